package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/bench/internal/gateway"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
)

const tgToken = "7300000001:AAF-bench-Secret_0123456789abcdef"

// rig is one `switchboard serve` with the shipped defaults, its own fakes
// and a fresh database: Telegram (behind a recorder that timestamps every
// call) and the fake model.
type rig struct {
	tg    *tgfake.Fake
	rec   *recorder
	front *httptest.Server // the recorder in front of tg: the gateway's api_endpoint
	model *testkit.FakeLLM
	proc  *gateway.Process
}

// startRig starts fresh fakes, writes the shipped defaults wired to them
// under a new directory of root, and starts bin; it returns once /readyz
// answers 200.
func startRig(ctx context.Context, bin, root string, users int) (*rig, error) {
	r := &rig{tg: tgfake.Start(tgToken), model: testkit.Start("127.0.0.1:0")}
	r.rec = &recorder{next: r.tg}
	r.front = httptest.NewServer(r.rec)
	dir, err := os.MkdirTemp(root, "run-")
	if err != nil {
		r.closeFakes()
		return nil, err
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := cfgfile.WriteFile(cfg, gateway.Shipped(users, dir, r.model.URL, tgToken, r.front.URL)); err != nil {
		r.closeFakes()
		return nil, err
	}
	if r.proc, err = gateway.Start(ctx, bin, dir, cfg); err != nil {
		r.closeFakes()
		return nil, err
	}
	return r, nil
}

// stop ends the process with SIGTERM (it must exit cleanly) and the fakes.
func (r *rig) stop() error {
	err := r.proc.Stop()
	r.closeFakes()
	return err
}

// kill ends everything at once, after a failure.
func (r *rig) kill() {
	r.proc.Kill()
	r.closeFakes()
}

func (r *rig) closeFakes() {
	r.model.Close()
	r.front.Close()
	r.tg.Close()
}

// call is one Bot API call the gateway made, as the recorder saw it.
type call struct {
	method string // lower case: sendmessage, editmessagetext, sendmessagedraft…
	chat   int64
	text   string
	status int       // the fake's HTTP status: 429 when it held the call back
	at     time.Time // when the fake's answer was written
}

// visible reports whether the call put text in front of the user: a
// message, an edit of one, or a draft, that the fake took.
func (c call) visible() bool {
	switch c.method {
	case "sendmessage", "editmessagetext", "sendmessagedraft":
		return c.status == http.StatusOK && c.text != ""
	}
	return false
}

// recorder passes every request to the Telegram fake and records it with
// the time its answer was written, without changing the fake.
type recorder struct {
	next http.Handler

	mu      sync.Mutex
	calls   []call
	changed chan struct{} // closed and replaced at every call recorded
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, method, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/bot"), "/")
	method = strings.ToLower(method)
	var p url.Values
	if method != "getupdates" {
		p = peek(r)
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	rc.next.ServeHTTP(sw, r)
	if p == nil {
		return
	}
	chat, _ := strconv.ParseInt(p.Get("chat_id"), 10, 64)
	rc.mu.Lock()
	rc.calls = append(rc.calls, call{method: method, chat: chat, text: p.Get("text"), status: sw.status, at: time.Now()})
	if rc.changed != nil {
		close(rc.changed)
		rc.changed = nil
	}
	rc.mu.Unlock()
}

// since returns the calls recorded after the first n, and a channel closed
// when the next one is.
func (rc *recorder) since(n int) ([]call, <-chan struct{}) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.changed == nil {
		rc.changed = make(chan struct{})
	}
	return append([]call(nil), rc.calls[min(n, len(rc.calls)):]...), rc.changed
}

func (rc *recorder) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.calls)
}

// peek reads the chat and the text of a form-encoded or JSON request and
// leaves its body for the fake; nil for anything else (uploads).
func peek(r *http.Request) url.Values {
	ct := r.Header.Get("Content-Type")
	form, js := strings.HasPrefix(ct, "application/x-www-form-urlencoded"), strings.HasPrefix(ct, "application/json")
	if !form && !js {
		return nil
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if form {
		p, _ := url.ParseQuery(string(body))
		return p
	}
	var m struct {
		ChatID json.Number `json:"chat_id"`
		Text   string      `json:"text"`
	}
	_ = json.Unmarshal(body, &m)
	return url.Values{"chat_id": {m.ChatID.String()}, "text": {m.Text}}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
