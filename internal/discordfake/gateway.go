package discordfake

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
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

// session is a gateway session: one per shard, started by IDENTIFY.
type session struct {
	n       int // order of identification
	id      string
	shard   [2]int // [shard_id, num_shards]; [0, 1] when unsharded
	seq     int64
	backlog []frame
	live    *gwConn // the identified/resumed connection, if any
}

// takes reports whether the session receives an event of guildID ("" for
// none), as Discord routes events to shards.
func (ss *session) takes(guildID string) bool {
	return ss.shard[1] <= 1 || ShardOf(guildID, ss.shard[1]) == ss.shard[0]
}

// ShardOf is the shard that receives the events of guild guildID when the
// gateway is split into count shards: (guild_id >> 22) % count, as on
// Discord. An event without a guild (a DM, "") goes to shard 0, and so does
// one whose guild id is not a number (the fake's tests use ids such as
// "g1", which no Discord guild has).
func ShardOf(guildID string, count int) int {
	id, err := strconv.ParseUint(guildID, 10, 64)
	if err != nil || count <= 1 {
		return 0
	}
	return int((id >> 22) % uint64(count))
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
		for _, ss := range f.sessions {
			if ss.live == c {
				ss.live = nil
				f.notify()
			}
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
			if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
				f.endSessionsOf(c)
			}
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

// endSessionsOf ends the sessions live on c: a client that closes with
// 1000 or 1001 invalidates its session on Discord, so its RESUME gets op 9
// and it identifies anew.
func (f *Fake) endSessionsOf(c *gwConn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, ss := range f.sessions {
		if ss.live == c {
			delete(f.sessions, id)
			f.notify()
		}
	}
}

// identify answers op 2 with READY and starts a new session for the
// IDENTIFY's shard; an earlier session of the same shard ends (its RESUME
// gets op 9). A shard that is not [id, count] with 0 <= id < count is
// closed with 4010, as on Discord.
func (f *Fake) identify(c *gwConn, d json.RawMessage) bool {
	var id struct {
		Token    string `json:"token"`
		Intents  int    `json:"intents"`
		Compress bool   `json:"compress"`
		Shard    []int  `json:"shard"`
	}
	if json.Unmarshal(d, &id) != nil || id.Token != "Bot "+f.Token {
		c.closeWith(4004, "Authentication failed.")
		return false
	}
	shard := [2]int{0, 1}
	var recorded *[2]int
	if id.Shard != nil {
		if len(id.Shard) != 2 || id.Shard[1] < 1 || id.Shard[0] < 0 || id.Shard[0] >= id.Shard[1] {
			c.closeWith(4010, "Invalid shard.")
			return false
		}
		shard = [2]int{id.Shard[0], id.Shard[1]}
		recorded = &[2]int{shard[0], shard[1]}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for sid, ss := range f.sessions {
		if ss.shard == shard {
			delete(f.sessions, sid)
		}
	}
	f.nsessions++
	ss := &session{n: f.nsessions, id: fmt.Sprintf("fake-session-%d", f.nsessions), shard: shard, seq: 1}
	f.sessions[ss.id] = ss
	f.current = ss
	ready := map[string]any{
		"v": 9, "session_id": ss.id, "resume_gateway_url": f.GatewayURL(),
		"user": f.Bot, "application": map[string]any{"id": f.AppID, "flags": 0},
		"guilds": []any{}, "private_channels": []any{},
	}
	if recorded != nil {
		ready["shard"] = shard
	}
	raw, _ := json.Marshal(ready)
	if c.send(frame{Op: 0, T: "READY", S: ss.seq, D: raw}) != nil {
		return false
	}
	ss.live = c
	f.identifies = append(f.identifies, Identify{Token: id.Token, Intents: id.Intents, Compress: id.Compress,
		Shard: recorded, SessionID: ss.id})
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
	ss := f.sessions[r.SessionID]
	if ss == nil || (len(ss.backlog) > 0 && ss.backlog[0].S > r.Seq+1) {
		return c.send(frame{Op: 9, D: json.RawMessage("false")}) == nil
	}
	for _, fr := range ss.backlog {
		if fr.S > r.Seq {
			if c.send(fr) != nil {
				return false
			}
		}
	}
	ss.seq++
	if c.send(frame{Op: 0, T: "RESUMED", S: ss.seq, D: json.RawMessage("{}")}) != nil {
		return false
	}
	ss.live = c
	return true
}

// Dispatch sends an op 0 event to the sessions whose shard it belongs to
// (see ShardOf; an unsharded session takes every event), each with its
// next sequence number, and returns the number it got in the last
// identified of them (0 when no session took it). A MESSAGE_CREATE also
// goes into its channel's history. While a session has no live connection
// (dropped, or told to reconnect) the event is queued and replayed when the
// client resumes. Before the first IDENTIFY there is no session, and a
// later IDENTIFY of a shard starts it afresh, as on Discord.
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
	guild := eventGuild(event, raw)
	var seq int64
	for _, ss := range f.sessionsLocked() {
		if !ss.takes(guild) {
			continue
		}
		ss.seq++
		fr := frame{Op: 0, T: event, S: ss.seq, D: raw}
		ss.backlog = append(ss.backlog, fr)
		if len(ss.backlog) > maxBacklog {
			ss.backlog = slices.Delete(ss.backlog, 0, len(ss.backlog)-maxBacklog)
		}
		if ss.live != nil && ss.live.send(fr) != nil {
			ss.live = nil // the client resumes and gets it from the backlog
		}
		seq = ss.seq
	}
	f.notify()
	return seq
}

// sessionsLocked returns the sessions, oldest first; f.mu must be held.
func (f *Fake) sessionsLocked() []*session {
	out := slices.Collect(maps.Values(f.sessions))
	slices.SortFunc(out, func(x, y *session) int { return x.n - y.n })
	return out
}

// eventGuild is the guild an event belongs to, "" for none: the guild's id
// for GUILD_CREATE, GUILD_UPDATE and GUILD_DELETE, else the guild_id field.
func eventGuild(event string, raw json.RawMessage) string {
	var d struct {
		ID      string `json:"id"`
		GuildID string `json:"guild_id"`
	}
	_ = json.Unmarshal(raw, &d)
	switch event {
	case "GUILD_CREATE", "GUILD_UPDATE", "GUILD_DELETE":
		return d.ID
	}
	return d.GuildID
}

// DropConnection closes every live gateway connection abruptly (no close
// frame), as a network failure would.
func (f *Fake) DropConnection() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ss := range f.sessions {
		if ss.live != nil {
			_ = ss.live.ws.NetConn().Close()
			ss.live = nil
		}
	}
	f.notify()
}

// Reconnect sends op 7 on every live connection; each client should close
// it and resume on a new one. Dispatches are queued meanwhile.
func (f *Fake) Reconnect() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ss := range f.sessions {
		if ss.live != nil {
			_ = ss.live.send(frame{Op: 7, D: json.RawMessage("null")})
			ss.live = nil
		}
	}
	f.notify()
}

// Connected reports whether a gateway connection (of any shard) is
// identified or resumed.
func (f *Fake) Connected() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ss := range f.sessions {
		if ss.live != nil {
			return true
		}
	}
	return false
}

// SessionID is the id of the last session identified ("" before any).
func (f *Fake) SessionID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.current == nil {
		return ""
	}
	return f.current.id
}

// Seq is the last sequence number the last session identified assigned.
func (f *Fake) Seq() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.current == nil {
		return 0
	}
	return f.current.seq
}

// Identifies counts the IDENTIFYs answered with READY.
func (f *Fake) Identifies() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.identifies)
}

// IdentifyLog returns the IDENTIFYs answered with READY, in order.
func (f *Fake) IdentifyLog() []Identify {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.identifies)
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

// WaitResume waits until n RESUMEs were received and a connection is live
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
