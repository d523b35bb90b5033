package matrix

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeHS is a small homeserver on 127.0.0.1: login, whoami, versions,
// /sync from queued batches, sends kept by transaction id (as a real
// homeserver: the same txn is the same event), joins, leaves, typing,
// redactions, key queries; and failures on demand.
type fakeHS struct {
	t   testing.TB
	srv *httptest.Server

	mu        sync.Mutex
	batches   []map[string]any // the /sync answers to give, in order
	sinces    []string         // the since of each /sync asked
	wake      chan struct{}    // closed when a batch is queued
	txns      map[string]string
	events    []sentEvent
	joined    []string
	left      []string
	typing    int
	logins    int
	fail      []failure // the next send answers, in order
	next      int
	keys      map[string]any // the /keys/query answer
	media     map[string][]byte
	mediaAuth []string // the Authorization of each download
	// history is each room's events a limited timeline left out, oldest
	// first, served by /messages backwards from the prev_batch "gap"; the
	// to of each such request is kept in historyTo.
	history   map[string][]map[string]any
	historyTo []string
}

type sentEvent struct {
	Room, Type, Txn, ID string
	Content             map[string]any
}

type failure struct {
	status int
	body   string
}

func newFakeHS(t testing.TB) *fakeHS {
	f := &fakeHS{t: t, wake: make(chan struct{}), txns: map[string]string{}, media: map[string][]byte{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeHS) URL() string { return f.srv.URL }

// queue adds a /sync answer: rooms.join etc. as given; next_batch is set.
func (f *fakeHS) queue(batch map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	batch["next_batch"] = "b" + strconv.Itoa(len(f.batches)+1)
	f.batches = append(f.batches, batch)
	close(f.wake)
	f.wake = make(chan struct{})
}

// failNext makes the next sends answer status with body.
func (f *fakeHS) failNext(status int, body string, times int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range times {
		f.fail = append(f.fail, failure{status, body})
	}
}

func (f *fakeHS) sent() []sentEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sentEvent(nil), f.events...)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeHS) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if strings.HasPrefix(r.URL.Path, "/_matrix/media/v3/upload") || strings.HasPrefix(r.URL.Path, "/_matrix/client/v1/media/download/") {
		f.mediaRoute(w, r, body)
		return
	}
	p := strings.TrimPrefix(r.URL.Path, "/_matrix/client")
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	authed := r.Header.Get("Authorization") == "Bearer tok-123456"
	switch {
	case p == "/versions":
		writeJSON(w, 200, map[string]any{"versions": []string{"v1.1", "v1.11"}})
	case p == "/v3/login" && r.Method == http.MethodPost:
		var req struct {
			Password string `json:"password"`
			DeviceID string `json:"device_id"`
		}
		_ = json.Unmarshal(body, &req)
		if req.Password != "pw-123456" {
			writeJSON(w, 403, map[string]any{"errcode": "M_FORBIDDEN", "error": "Invalid password"})
			return
		}
		f.mu.Lock()
		f.logins++
		f.mu.Unlock()
		writeJSON(w, 200, map[string]any{"user_id": "@bot:hs.test", "access_token": "tok-123456", "device_id": cmpOr(req.DeviceID, "DEV1")})
	case !authed:
		writeJSON(w, 401, map[string]any{"errcode": "M_UNKNOWN_TOKEN", "error": "Unknown token"})
	case p == "/v3/account/whoami":
		writeJSON(w, 200, map[string]any{"user_id": "@bot:hs.test", "device_id": "DEV1"})
	case len(parts) == 4 && parts[1] == "profile":
		writeJSON(w, 200, map[string]any{"displayname": "Switchbot"})
	case p == "/v3/sync":
		f.sync(w, r)
	case len(parts) == 6 && parts[1] == "rooms" && parts[3] == "send" && r.Method == http.MethodPut:
		f.send(w, parts[2], parts[4], parts[5], body)
	case len(parts) == 6 && parts[1] == "rooms" && parts[3] == "redact":
		f.send(w, parts[2], "m.room.redaction", parts[5], body)
	case len(parts) == 3 && parts[1] == "join", len(parts) == 4 && parts[1] == "rooms" && parts[3] == "join":
		f.mu.Lock()
		f.joined = append(f.joined, parts[2])
		f.mu.Unlock()
		writeJSON(w, 200, map[string]any{"room_id": parts[2]})
	case len(parts) == 4 && parts[1] == "rooms" && parts[3] == "leave":
		f.mu.Lock()
		f.left = append(f.left, parts[2])
		f.mu.Unlock()
		writeJSON(w, 200, map[string]any{})
	case len(parts) == 5 && parts[1] == "rooms" && parts[3] == "typing":
		f.mu.Lock()
		f.typing++
		f.mu.Unlock()
		writeJSON(w, 200, map[string]any{})
	case len(parts) == 4 && parts[1] == "rooms" && parts[3] == "messages":
		f.messages(w, r, parts[2])
	case p == "/v3/keys/query":
		f.mu.Lock()
		k := f.keys
		f.mu.Unlock()
		writeJSON(w, 200, k)
	default:
		writeJSON(w, 404, map[string]any{"errcode": "M_UNRECOGNIZED", "error": "not in the fake: " + r.Method + " " + p})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// sync answers the batch after since ("" is the first), or waits for one
// until the request's timeout.
func (f *fakeHS) sync(w http.ResponseWriter, r *http.Request) {
	since := r.URL.Query().Get("since")
	timeout, _ := strconv.Atoi(r.URL.Query().Get("timeout"))
	deadline := time.After(time.Duration(timeout) * time.Millisecond)
	n := 0
	if since != "" {
		n, _ = strconv.Atoi(strings.TrimPrefix(since, "b"))
	}
	f.mu.Lock()
	f.sinces = append(f.sinces, since)
	f.mu.Unlock()
	for {
		f.mu.Lock()
		wake := f.wake
		if n < len(f.batches) {
			b := f.batches[n]
			f.mu.Unlock()
			writeJSON(w, 200, b)
			return
		}
		f.mu.Unlock()
		select {
		case <-wake:
		case <-deadline:
			writeJSON(w, 200, map[string]any{"next_batch": since})
			return
		case <-r.Context().Done():
			return
		}
	}
}

// messages serves a room's history backwards in pages: from "gap" (the
// prev_batch of a limited timeline) or "gN" (N events already given).
func (f *fakeHS) messages(w http.ResponseWriter, r *http.Request, room string) {
	q := r.URL.Query()
	if q.Get("dir") != "b" {
		writeJSON(w, 400, map[string]any{"errcode": "M_INVALID_PARAM", "error": "only dir=b in the fake"})
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.historyTo = append(f.historyTo, q.Get("to"))
	evs := f.history[room]
	given := 0
	if from := q.Get("from"); from != "gap" {
		given, _ = strconv.Atoi(strings.TrimPrefix(from, "g"))
	}
	limit, _ := strconv.Atoi(q.Get("limit"))
	var chunk []map[string]any
	for i := len(evs) - 1 - given; i >= 0 && len(chunk) < limit; i-- {
		chunk = append(chunk, evs[i])
	}
	resp := map[string]any{"start": q.Get("from"), "chunk": chunk}
	if given+len(chunk) < len(evs) {
		resp["end"] = "g" + strconv.Itoa(given+len(chunk))
	}
	writeJSON(w, 200, resp)
}

// send keeps an event by transaction id: the same txn in the same room
// answers the event it made before.
func (f *fakeHS) send(w http.ResponseWriter, room, typ, txn string, body []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.next < len(f.fail) {
		fl := f.fail[f.next]
		f.next++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(fl.status)
		_, _ = io.WriteString(w, fl.body)
		return
	}
	key := room + "|" + txn
	if eventID, ok := f.txns[key]; ok {
		writeJSON(w, 200, map[string]any{"event_id": eventID})
		return
	}
	eventID := fmt.Sprintf("$ev%d", len(f.events)+1)
	f.txns[key] = eventID
	var content map[string]any
	_ = json.Unmarshal(body, &content)
	f.events = append(f.events, sentEvent{Room: room, Type: typ, Txn: txn, ID: eventID, Content: content})
	writeJSON(w, 200, map[string]any{"event_id": eventID})
}

// Event builders for /sync batches.

func member(user, membership, sender string, direct bool) map[string]any {
	c := map[string]any{"membership": membership}
	if direct {
		c["is_direct"] = true
	}
	return map[string]any{"type": "m.room.member", "state_key": user, "sender": sender, "event_id": "$m-" + user + "-" + membership,
		"origin_server_ts": 1, "content": c}
}

func textEvent(eventID, sender, body string, extra map[string]any) map[string]any {
	c := map[string]any{"msgtype": "m.text", "body": body}
	for k, v := range extra {
		c[k] = v
	}
	return map[string]any{"type": "m.room.message", "sender": sender, "event_id": eventID, "origin_server_ts": 1700000000000, "content": c}
}

func joinedRoom(state []map[string]any, timeline ...map[string]any) map[string]any {
	return map[string]any{"state": map[string]any{"events": state}, "timeline": map[string]any{"events": timeline}}
}

func joinBatch(rooms map[string]any) map[string]any {
	return map[string]any{"rooms": map[string]any{"join": rooms}}
}

// mediaRoute serves uploads and authenticated downloads.
func (f *fakeHS) mediaRoute(w http.ResponseWriter, r *http.Request, body []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Method == http.MethodPost {
		mediaID := fmt.Sprintf("m%d", len(f.media)+1)
		f.media[mediaID] = body
		writeJSON(w, 200, map[string]any{"content_uri": "mxc://hs.test/" + mediaID})
		return
	}
	f.mediaAuth = append(f.mediaAuth, r.Header.Get("Authorization"))
	mediaID := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	data, ok := f.media[mediaID]
	if !ok {
		writeJSON(w, 404, map[string]any{"errcode": "M_NOT_FOUND", "error": "no such media"})
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(data)
}
