package discordfake

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// maxBacklog is how many dispatches a session keeps for replay on RESUME.
const maxBacklog = 1000

// frame is a gateway payload.
type frame struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  int64           `json:"s,omitempty"`
	T  string          `json:"t,omitempty"`
}

type gwConn struct {
	ws  *websocket.Conn
	wmu sync.Mutex // gorilla allows one writer at a time
}

func (c *gwConn) send(v any) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteJSON(v)
}

func (c *gwConn) closeWith(code int, text string) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
	_ = c.ws.Close()
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (f *Fake) handleWebsocket(w http.ResponseWriter, r *http.Request) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade has answered the client
	}
	c := &gwConn{ws: ws}
	f.mu.Lock()
	f.conns[c] = struct{}{}
	interval := f.HeartbeatInterval
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.conns, c)
		if f.live == c {
			f.live = nil
			f.notify()
		}
		f.mu.Unlock()
		ws.Close()
	}()

	hello, _ := json.Marshal(map[string]int64{"heartbeat_interval": interval.Milliseconds()})
	if c.send(frame{Op: 10, D: hello}) != nil {
		return
	}
	for {
		var in frame
		if err := ws.ReadJSON(&in); err != nil {
			return
		}
		switch in.Op {
		case 1: // heartbeat
			if c.send(frame{Op: 11}) != nil {
				return
			}
		case 2:
			if !f.identify(c, in.D) {
				return
			}
		case 6:
			if !f.resume(c, in.D) {
				return
			}
		}
	}
}

// identify answers op 2 with READY and starts a new session.
func (f *Fake) identify(c *gwConn, d json.RawMessage) bool {
	var id struct {
		Token    string `json:"token"`
		Intents  int    `json:"intents"`
		Compress bool   `json:"compress"`
	}
	if json.Unmarshal(d, &id) != nil || id.Token != "Bot "+f.Token {
		c.closeWith(4004, "Authentication failed.")
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sessions++
	f.sessionID = fmt.Sprintf("fake-session-%d", f.sessions)
	f.seq = 1
	f.backlog = nil
	ready, _ := json.Marshal(map[string]any{
		"v": 9, "session_id": f.sessionID, "resume_gateway_url": f.GatewayURL(),
		"user": f.Bot, "application": map[string]any{"id": f.AppID, "flags": 0},
		"guilds": []any{}, "private_channels": []any{},
	})
	if c.send(frame{Op: 0, T: "READY", S: f.seq, D: ready}) != nil {
		return false
	}
	f.live = c
	f.identifies = append(f.identifies, Identify{Token: id.Token, Intents: id.Intents, Compress: id.Compress})
	f.notify()
	return true
}

// resume answers op 6: the events after the client's seq, then RESUMED; or
// op 9 when the session is unknown or its backlog no longer reaches back.
func (f *Fake) resume(c *gwConn, d json.RawMessage) bool {
	var r struct {
		Token     string `json:"token"`
		SessionID string `json:"session_id"`
		Seq       int64  `json:"seq"`
	}
	if json.Unmarshal(d, &r) != nil || r.Token != "Bot "+f.Token {
		c.closeWith(4004, "Authentication failed.")
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resumes = append(f.resumes, Resume{Token: r.Token, SessionID: r.SessionID, Seq: r.Seq})
	f.notify()
	if r.SessionID == "" || r.SessionID != f.sessionID || (len(f.backlog) > 0 && f.backlog[0].S > r.Seq+1) {
		return c.send(frame{Op: 9, D: json.RawMessage("false")}) == nil
	}
	for _, fr := range f.backlog {
		if fr.S > r.Seq {
			if c.send(fr) != nil {
				return false
			}
		}
	}
	f.seq++
	if c.send(frame{Op: 0, T: "RESUMED", S: f.seq, D: json.RawMessage("{}")}) != nil {
		return false
	}
	f.live = c
	return true
}

// Dispatch sends an op 0 event with the next sequence number and returns
// it. A MESSAGE_CREATE also goes into its channel's history. While no
// connection is live (dropped, or told to reconnect) the event
// is queued and replayed when the client resumes. Before the first IDENTIFY
// there is no session, and a later IDENTIFY starts afresh, as on Discord.
func (f *Fake) Dispatch(event string, d any) int64 {
	raw, err := json.Marshal(d)
	if err != nil {
		panic(fmt.Sprintf("discordfake: dispatch %s: %v", event, err))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if event == "MESSAGE_CREATE" {
		var m Message
		if json.Unmarshal(raw, &m) == nil && m.ID != "" && m.ChannelID != "" {
			f.recordLocked(m)
		}
	}
	f.seq++
	fr := frame{Op: 0, T: event, S: f.seq, D: raw}
	f.backlog = append(f.backlog, fr)
	if len(f.backlog) > maxBacklog {
		f.backlog = slices.Delete(f.backlog, 0, len(f.backlog)-maxBacklog)
	}
	if f.live != nil && f.live.send(fr) != nil {
		f.live = nil // the client resumes and gets it from the backlog
	}
	f.notify()
	return f.seq
}

// DropConnection closes the live gateway connection abruptly (no close
// frame), as a network failure would.
func (f *Fake) DropConnection() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live == nil {
		return
	}
	_ = f.live.ws.NetConn().Close()
	f.live = nil
	f.notify()
}

// Reconnect sends op 7 on the live connection; the client should close it
// and resume on a new one. Dispatches are queued meanwhile.
func (f *Fake) Reconnect() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live == nil {
		return
	}
	_ = f.live.send(frame{Op: 7, D: json.RawMessage("null")})
	f.live = nil
	f.notify()
}

// Connected reports whether a gateway connection is identified or resumed.
func (f *Fake) Connected() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live != nil
}

// SessionID is the current gateway session's id.
func (f *Fake) SessionID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sessionID
}

// Seq is the last sequence number the fake assigned.
func (f *Fake) Seq() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq
}

// Identifies counts the IDENTIFYs answered with READY.
func (f *Fake) Identifies() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.identifies)
}

// Resumes counts the RESUMEs received.
func (f *Fake) Resumes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.resumes)
}

// WaitIdentify waits until n IDENTIFYs have been answered with READY and
// returns the last.
func (f *Fake) WaitIdentify(ctx context.Context, n int) (Identify, error) {
	err := f.WaitFor(ctx, func() bool { return f.Identifies() >= n })
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		return Identify{}, err
	}
	return f.identifies[len(f.identifies)-1], nil
}

// WaitResume waits until n RESUMEs were received and the connection is live
// again, and returns the last RESUME.
func (f *Fake) WaitResume(ctx context.Context, n int) (Resume, error) {
	err := f.WaitFor(ctx, func() bool { return f.Resumes() >= n && f.Connected() })
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		return Resume{}, err
	}
	return f.resumes[len(f.resumes)-1], nil
}
