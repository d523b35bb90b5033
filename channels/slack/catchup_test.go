package slack

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// historyAPI is a Web API with conversations.history and .replies over a
// fixed set of messages, recording what was asked.
type historyAPI struct {
	mu    sync.Mutex
	asked []string
	msgs  map[string][]map[string]string // "C1" or "C1/thread" → messages, newest first as Slack answers
}

func (h *historyAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	method := r.URL.Path[len("/api/"):]
	key := r.Form.Get("channel")
	if method == "conversations.replies" {
		key += "/" + r.Form.Get("ts")
	}
	h.mu.Lock()
	h.asked = append(h.asked, method+" "+key+" oldest="+r.Form.Get("oldest"))
	msgs := h.msgs[key]
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch method {
	case "conversations.history", "conversations.replies":
		var out []map[string]string
		for _, m := range msgs {
			if compareTS(m["ts"], r.Form.Get("oldest")) >= 0 {
				out = append(out, m)
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "messages": out})
	default:
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "unknown_method"})
	}
}

func TestCatchUp(t *testing.T) {
	api := &historyAPI{msgs: map[string][]map[string]string{
		"D1": {
			{"type": "message", "user": "U1", "text": "written while down", "ts": "1700000300.000001"},
			{"type": "message", "user": "UBOT", "bot_id": "BBOT", "text": "my answer", "ts": "1700000200.000001"},
			{"type": "message", "user": "U1", "text": "taken in", "ts": "1700000100.000001"},
		},
		"C1/1700000000.000001": {
			{"type": "message", "user": "U1", "text": "<@UBOT> and in the thread", "ts": "1700000400.000001", "thread_ts": "1700000000.000001"},
			{"type": "message", "user": "U1", "text": "<@UBOT> start", "ts": "1700000000.000001", "thread_ts": "1700000000.000001"},
		},
		"C1": {
			{"type": "message", "user": "U2", "text": "<@UBOT> a new thread", "ts": "1700000500.000001"},
			{"type": "message", "user": "U2", "text": "not for the bot", "ts": "1700000450.000001"},
		},
	}}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	last := map[string]string{
		"D1":                   "1700000100.000001",
		"C1:1700000000.000001": "1700000000.000001",
		"C9:1600000000.000001": "1600000000.000001", // older than a day: not read
		"D2":                   "act:1700000100.1",  // a press: no ts to start from
	}
	a, err := New(Options{BotToken: "xoxb-1", AppToken: "xapp-1", APIURL: srv.URL + "/api/", Logger: quietLog(),
		Now:      func() time.Time { return time.Unix(1700000600, 0) },
		LastSeen: func(context.Context) (map[string]string, error) { return last, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	a.me = testMe
	s := newSink()
	a.catchUp(t.Context(), s)
	var got []string
	for _, in := range s.got {
		got = append(got, in.ChatID+" "+in.MessageID+" "+in.Text)
	}
	want := []string{
		"C1:1700000000.000001 1700000400.000001 and in the thread",
		"D1 1700000300.000001 written while down",
		"C1:1700000500.000001 1700000500.000001 a new thread",
	}
	if !slices.Equal(got, want) {
		t.Errorf("caught up:\n%s\nwant:\n%s\nasked: %v", strings.Join(got, "\n"), strings.Join(want, "\n"), api.asked)
	}
	for _, q := range api.asked {
		if strings.Contains(q, "C9") || strings.Contains(q, "D2") {
			t.Errorf("asked %q", q)
		}
	}
}

func TestCompareTS(t *testing.T) {
	for _, c := range []struct {
		x, y string
		want int
	}{{"1.2", "1.10", 1}, {"1.000002", "1.000010", -1}, {"10.0", "9.9", 1}, {"1700000000.000100", "1700000000.0001", 0}, {"2", "1.999", 1}} {
		if got := compareTS(c.x, c.y); (got > 0) != (c.want > 0) || (got < 0) != (c.want < 0) {
			t.Errorf("compareTS(%s, %s) = %d, want sign %d", c.x, c.y, got, c.want)
		}
	}
}
