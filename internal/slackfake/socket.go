package slackfake

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Envelope types, as Socket Mode names them.
const (
	EnvelopeEventsAPI     = "events_api"
	EnvelopeInteractive   = "interactive"
	EnvelopeSlashCommands = "slash_commands"
)

// Envelope is a recorded Socket Mode envelope.
type Envelope struct {
	ID      string
	Type    string          // EnvelopeEventsAPI, EnvelopeInteractive or EnvelopeSlashCommands
	Kind    string          // the inner event's type ("message", "app_mention"), "block_actions", or the command
	TS      string          // the message the envelope is about, if any
	Payload json.RawMessage // as sent
	Sent    int             // times sent (1 + redeliveries)
	Acked   bool
	// AckPayload is the payload of the acknowledgement (slash command
	// answers), nil when it had none.
	AckPayload json.RawMessage
	Dropped    bool // given up after the retries SetRedelivery allows
	LostAcks   int  // acknowledgements lost (UserMessage.LoseFirstAck)
	// AckedIn is the time from the first send to the acknowledgement
	// (Slack wants it within 3 s).
	AckedIn time.Duration
}

type envelope struct {
	Envelope
	loseAck bool      // its next acknowledgement is lost (UserMessage.LoseFirstAck)
	accepts bool      // accepts_response_payload
	first   time.Time // first sent
	conn    *sockConn
	timer   *time.Timer
}

// sockConn is one Socket Mode websocket. Frames go out through a queue
// and one writer goroutine, so the fake never holds its lock across
// network I/O.
type sockConn struct {
	ws   *websocket.Conn
	out  chan any
	done chan struct{}
	once sync.Once
}

// sendQueue is how many frames may wait for a slow client before the
// connection is dropped (the client reconnects and gets them again).
const sendQueue = 1024

func newSockConn(ws *websocket.Conn) *sockConn {
	c := &sockConn{ws: ws, out: make(chan any, sendQueue), done: make(chan struct{})}
	go c.write()
	return c
}

func (c *sockConn) write() {
	for {
		select {
		case <-c.done:
			return
		case v := <-c.out:
			_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if c.ws.WriteJSON(v) != nil {
				c.close()
				return
			}
		}
	}
}

// send queues a frame; it reports false when the connection is closed or
// its queue is full (then it is closed).
func (c *sockConn) send(v any) bool {
	select {
	case <-c.done:
		return false
	default:
	}
	select {
	case c.out <- v:
		return true
	default:
		c.close()
		return false
	}
}

func (c *sockConn) close() {
	c.once.Do(func() { close(c.done) })
	_ = c.ws.Close()
}

// SetRedelivery sets how long an envelope may stay unacknowledged before
// it is sent again (default 1 s) and how many times it is sent again at
// most (0, the default: until acknowledged; Slack stops after 3).
func (f *Fake) SetRedelivery(after time.Duration, maxRetries int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.redeliverAfter = after
	f.maxRetries = maxRetries
}

// SetPingInterval sets how often the fake pings each socket (default 10
// s; slack-go's socketmode reconnects when none came for 30 s). Affects
// connections opened afterwards.
func (f *Fake) SetPingInterval(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pingInterval = d
}

// SetEchoBot sets whether the bot's posts come back as message events
// (default true, as Slack sends them to an app subscribed to the
// conversation; only once a socket has connected).
func (f *Fake) SetEchoBot(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.echoBot = on
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (f *Fake) handleSocket(w http.ResponseWriter, r *http.Request) {
	ticket := r.URL.Query().Get("ticket")
	f.mu.Lock()
	valid := f.tickets[ticket]
	delete(f.tickets, ticket)
	ping := f.pingInterval
	f.mu.Unlock()
	if !valid {
		http.Error(w, "invalid ticket", http.StatusUnauthorized)
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := newSockConn(ws)
	defer func() {
		c.close()
		f.mu.Lock()
		f.forgetLocked(c)
		f.mu.Unlock()
	}()

	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.conns[c] = struct{}{}
	f.connects++
	hello := map[string]any{
		"type": "hello", "num_connections": len(f.conns),
		"debug_info":      map[string]any{"host": "slackfake", "approximate_connection_time": 18060},
		"connection_info": map[string]any{"app_id": AppID},
	}
	if !c.send(hello) {
		f.mu.Unlock()
		return
	}
	f.newest = c
	for _, e := range f.envelopes {
		if !e.Acked && !e.Dropped && !f.liveLocked(e.conn) && f.httpTargetLocked(e) == "" {
			f.deliverLocked(e)
		}
	}
	f.notify()
	f.mu.Unlock()

	go func() {
		t := time.NewTicker(ping)
		defer t.Stop()
		for {
			select {
			case <-c.done:
				return
			case <-t.C:
				if c.ws.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(5*time.Second)) != nil {
					return
				}
				f.mu.Lock()
				f.pings++
				f.notify()
				f.mu.Unlock()
			}
		}
	}()

	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var ack struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(data, &ack) != nil || ack.EnvelopeID == "" {
			continue
		}
		f.ack(ack.EnvelopeID, ack.Payload)
	}
}

func (f *Fake) ack(id string, payload json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.byID[id]
	if e == nil || e.Acked {
		return
	}
	if e.loseAck {
		e.loseAck = false
		e.LostAcks++
		f.notify()
		return
	}
	e.Acked = true
	e.AckedIn = time.Since(e.first)
	if len(payload) > 0 && string(payload) != "null" {
		e.AckPayload = slices.Clone(payload)
	}
	if e.timer != nil {
		e.timer.Stop()
	}
	f.acked = append(f.acked, id)
	f.notify()
}

// markSent counts a send; the envelope's lock (f.mu) must be held.
func (e *envelope) markSent() {
	if e.Sent == 0 {
		e.first = time.Now()
	}
	e.Sent++
}

// forgetLocked drops c from the live connections; f.mu must be held.
func (f *Fake) forgetLocked(c *sockConn) {
	delete(f.conns, c)
	if f.newest == c {
		f.newest = nil
		for o := range f.conns {
			f.newest = o
		}
	}
	f.notify()
}

func (f *Fake) liveLocked(c *sockConn) bool {
	if c == nil {
		return false
	}
	_, ok := f.conns[c]
	return ok
}

// queueLocked records e and sends it; f.mu must be held.
func (f *Fake) queueLocked(e *envelope) {
	f.envelopes = append(f.envelopes, e)
	f.byID[e.ID] = e
	if target := f.httpTargetLocked(e); target != "" {
		if !f.closed {
			f.wg.Add(1)
			go f.postEnvelope(e, target)
		}
		return
	}
	f.deliverLocked(e)
}

// deliverLocked sends e to the newest live connection (or leaves it for
// the next one) and arms its redelivery; f.mu must be held.
func (f *Fake) deliverLocked(e *envelope) {
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	e.conn = nil
	if f.closed || f.newest == nil {
		return
	}
	if f.maxRetries > 0 && e.Sent > f.maxRetries {
		e.Dropped = true
		f.notify()
		return
	}
	frame := map[string]any{
		"envelope_id": e.ID, "type": e.Type, "payload": e.Payload,
		"accepts_response_payload": e.accepts, "retry_attempt": e.Sent, "retry_reason": "",
	}
	if e.Sent > 0 {
		frame["retry_reason"] = "timeout"
	}
	c := f.newest
	for !c.send(frame) {
		f.forgetLocked(c) // closed or stuck: try another, else the next hello resends e
		if c = f.newest; c == nil {
			return
		}
	}
	e.markSent()
	e.conn = c
	e.timer = time.AfterFunc(f.redeliverAfter, func() { f.redeliver(e) })
	f.notify()
}

func (f *Fake) redeliver(e *envelope) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || e.Acked || e.Dropped {
		return
	}
	f.deliverLocked(e)
}

// Acked returns the ids of the acknowledged envelopes, in the order of
// their first acknowledgement.
func (f *Fake) Acked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.acked)
}

// WaitAcked waits until envelope id is acknowledged.
func (f *Fake) WaitAcked(ctx context.Context, id string) error {
	return f.WaitFor(ctx, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		e := f.byID[id]
		return e != nil && e.Acked
	})
}

// WaitAllAcked waits until every envelope made so far is acknowledged
// (or dropped).
func (f *Fake) WaitAllAcked(ctx context.Context) error {
	return f.WaitFor(ctx, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, e := range f.envelopes {
			if !e.Acked && !e.Dropped {
				return false
			}
		}
		return true
	})
}

// Envelopes returns every envelope made, in order.
func (f *Fake) Envelopes() []Envelope {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Envelope, len(f.envelopes))
	for i, e := range f.envelopes {
		out[i] = e.Envelope
		out[i].Payload = slices.Clone(e.Payload)
	}
	return out
}

// EnvelopesOf returns the ids of the envelopes about message ts.
func (f *Fake) EnvelopesOf(ts string) []string {
	var ids []string
	for _, e := range f.Envelopes() {
		if e.TS == ts {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

// Connected reports whether a socket is open.
func (f *Fake) Connected() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.newest != nil
}

// Pings counts the websocket pings sent, on every socket.
func (f *Fake) Pings() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pings
}

// Connects counts the sockets that got a hello.
func (f *Fake) Connects() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.connects
}

// WaitConnected waits until at least n sockets got a hello and one is
// open.
func (f *Fake) WaitConnected(ctx context.Context, n int) error {
	return f.WaitFor(ctx, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.connects >= n && f.newest != nil
	})
}

// Refresh sends a disconnect (reason refresh_requested) on every socket,
// as Slack does every few hours; the client opens a new one.
func (f *Fake) Refresh() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		c.send(map[string]any{"type": "disconnect", "reason": "refresh_requested",
			"debug_info": map[string]any{"host": "slackfake"}})
	}
}

// DropConnections closes every socket abruptly (no close frame), as a
// network failure would; the client reconnects.
func (f *Fake) DropConnections() {
	f.mu.Lock()
	conns := make([]*sockConn, 0, len(f.conns))
	for c := range f.conns {
		conns = append(conns, c)
		delete(f.conns, c)
	}
	f.newest = nil
	f.notify()
	f.mu.Unlock()
	for _, c := range conns {
		c.once.Do(func() { close(c.done) })
		_ = c.ws.NetConn().Close()
	}
}
