package whatsapp

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

const (
	testToken   = "EAAtest-access-token-0123456789"
	testSecret  = "app-secret-0123456789"
	testVerify  = "verify-0123456789"
	testPhoneID = "1000000001"
	testUser    = "15551234567"
)

// graph is a small fake of the Graph API endpoints the adapter calls: it
// records every request and answers from fail (the next answers of a
// path) or with a made-up success.
type graph struct {
	t   *testing.T
	srv *httptest.Server

	mu    sync.Mutex
	calls []call
	fail  map[string][]answer // path → answers to give first
	media map[string][]byte   // media id → bytes
	n     int
	// holdReads, when set, holds read receipts (without a typing
	// indicator) until it is closed: a slow Graph API.
	holdReads chan struct{}
	// holdSends, when set, holds each message sent until it is closed,
	// after telling sendHeld the id its answer will give.
	holdSends chan struct{}
	sendHeld  chan string
}

// call is one request the fake took.
type call struct {
	Method, Path, Auth, ContentType string
	Body                            map[string]any
	Raw                             []byte
}

// answer is a made-up answer: a status and a Graph error code.
type answer struct {
	status, code int
	retryAfter   string
	message      string
}

func newGraph(t *testing.T) *graph {
	g := &graph{t: t, fail: map[string][]answer{}, media: map[string][]byte{}}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *graph) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	c := call{Method: r.Method, Path: r.URL.Path, Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type"), Raw: raw}
	_ = json.Unmarshal(raw, &c.Body)
	g.mu.Lock()
	g.calls = append(g.calls, c)
	var a *answer
	if q := g.fail[r.URL.Path]; len(q) > 0 {
		a, g.fail[r.URL.Path] = &q[0], q[1:]
	}
	g.n++
	n, hold, holdSend := g.n, g.holdReads, g.holdSends
	g.mu.Unlock()
	if _, typing := c.Body["typing_indicator"]; hold != nil && c.Body["status"] == "read" && !typing {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	if _, isSend := c.Body["to"]; holdSend != nil && isSend {
		g.sendHeld <- "wamid.out" + strconv.Itoa(n)
		select {
		case <-holdSend:
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if c.Auth != "Bearer "+testToken {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"message":"Invalid OAuth access token","type":"OAuthException","code":190}}`)
		return
	}
	if a != nil {
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		w.WriteHeader(a.status)
		msg := a.message
		if msg == "" {
			msg = "made-up failure"
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "OAuthException",
			"code": a.code, "error_data": map[string]string{"details": msg + " (details)"}, "fbtrace_id": "X"}})
		return
	}
	v := "/" + DefaultAPIVersion + "/"
	switch {
	case r.URL.Path == v+testPhoneID:
		_, _ = io.WriteString(w, `{"display_phone_number":"15550001111","verified_name":"Test Bot","quality_rating":"GREEN","id":"`+testPhoneID+`"}`)
	case r.URL.Path == v+testPhoneID+"/messages":
		_ = json.NewEncoder(w).Encode(map[string]any{"messaging_product": "whatsapp", "success": true,
			"messages": []map[string]string{{"id": "wamid.out" + strconv.Itoa(n)}}})
	case r.URL.Path == v+testPhoneID+"/media":
		_, _ = io.WriteString(w, `{"id":"media-up-`+strconv.Itoa(n)+`"}`)
	case strings.HasPrefix(r.URL.Path, "/files/"):
		id := strings.TrimPrefix(r.URL.Path, "/files/")
		g.mu.Lock()
		data, ok := g.media[id]
		g.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(data)
	case strings.HasPrefix(r.URL.Path, v):
		id := strings.TrimPrefix(r.URL.Path, v)
		g.mu.Lock()
		data, ok := g.media[id]
		g.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":{"message":"Unsupported get request","code":100}}`)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"url": g.srv.URL + "/files/" + id, "mime_type": "audio/ogg", "file_size": len(data), "id": id})
	default:
		http.NotFound(w, r)
	}
}

// failNext makes the next answers of path (below the version) these.
func (g *graph) failNext(path string, as ...answer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := "/" + DefaultAPIVersion + "/" + path
	g.fail[p] = append(g.fail[p], as...)
}

// sent returns the calls to path (below the version).
func (g *graph) sent(path string) []call {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []call
	for _, c := range g.calls {
		if c.Path == "/"+DefaultAPIVersion+"/"+path {
			out = append(out, c)
		}
	}
	return out
}

// messages returns the bodies posted to /messages of a type ("text",
// "interactive", "template", … or "read" for read receipts).
func (g *graph) messages(typ string) []map[string]any {
	var out []map[string]any
	for _, c := range g.sent(testPhoneID + "/messages") {
		t, _ := c.Body["type"].(string)
		if c.Body["status"] == "read" {
			t = "read"
		}
		if t == typ {
			out = append(out, c.Body)
		}
	}
	return out
}

// waitReads waits until n read receipts were posted.
func (g *graph) waitReads(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := waitfor.Poll(ctx, time.Millisecond, func() bool { return len(g.messages("read")) >= n }); err != nil {
		t.Fatalf("%d read receipts, want %d: %v", len(g.messages("read")), n, err)
	}
}

// sink records what the adapter delivers, after refusing the first
// failFirst deliveries.
type sink struct {
	failFirst atomic.Int32
	mu        sync.Mutex
	got       []channels.Inbound
}

func (s *sink) Deliver(_ context.Context, in channels.Inbound) error {
	if s.failFirst.Add(-1) >= 0 {
		return errors.New("store unavailable")
	}
	s.mu.Lock()
	s.got = append(s.got, in)
	s.mu.Unlock()
	return nil
}

func (s *sink) messages() []channels.Inbound {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]channels.Inbound(nil), s.got...)
}

// clock is a settable clock.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *clock) now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }

// newTestAdapter returns an adapter on g, logging at debug level to the
// buffer it returns; mod adjusts its options.
func newTestAdapter(t *testing.T, g *graph, mod func(*Options)) (*Adapter, *testkit.SyncBuffer) {
	t.Helper()
	log := &testkit.SyncBuffer{}
	o := &Options{PhoneNumberID: testPhoneID, AccessToken: testToken, AppSecret: testSecret, VerifyToken: testVerify, APIBase: g.srv.URL}
	o.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() } // retries at once
	if mod != nil {
		mod(o)
	}
	a, err := New(*o)
	if err != nil {
		t.Fatal(err)
	}
	return a, log
}

// run runs a with s until the test ends, and waits until it takes
// deliveries.
func run(t *testing.T, a *Adapter, s channels.Sink) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	var runErr error
	running.Go(func() { runErr = a.Run(ctx, s) })
	t.Cleanup(func() {
		cancel()
		running.Wait()
		if runErr != nil {
			t.Errorf("Run: %v", runErr)
		}
	})
	wctx, wcancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer wcancel()
	if err := waitfor.Poll(wctx, time.Millisecond, a.Connected); err != nil {
		t.Fatalf("the adapter did not start taking deliveries: %v", err)
	}
}

// post sends a webhook delivery to a's handler, signed with secret ("":
// unsigned), and returns the status.
func post(t *testing.T, a *Adapter, body []byte, secret string) int {
	t.Helper()
	path, h := a.Handler()
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if secret != "" {
		r.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(sign(secret, body)))
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

// textDelivery is a delivery of one text message, as Meta posts it.
func textDelivery(wamid, from, text string) []byte {
	return deliveryOf(map[string]any{"from": from, "id": wamid, "timestamp": "1733480000", "type": "text", "text": map[string]string{"body": text}})
}

// deliveryOf wraps messages in a delivery's envelope.
func deliveryOf(msgs ...map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"object": "whatsapp_business_account", "entry": []any{map[string]any{
		"id": "WABA1", "changes": []any{map[string]any{"field": "messages", "value": map[string]any{
			"messaging_product": "whatsapp",
			"metadata":          map[string]string{"display_phone_number": "15550001111", "phone_number_id": testPhoneID},
			"contacts":          []any{map[string]any{"profile": map[string]string{"name": "Ann"}, "wa_id": testUser}},
			"messages":          msgs,
		}}},
	}}})
	return b
}
