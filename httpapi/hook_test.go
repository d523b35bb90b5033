package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A chat channel that takes its platform's events by HTTP (Slack's
// Events API, WhatsApp's webhook) is served at its path for POST and GET
// (a handshake) without http.token; other methods and paths are the
// server's own, behind the token.
func TestChannelHookIsServedWithoutTheToken(t *testing.T) {
	hook := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hooked") })
	s, err := New(Options{Listen: "0.0.0.0:8080", Token: testToken, Version: "v-test", Store: pingStore{},
		ChannelHook: func(path string) http.Handler {
			if path == "/slack/events" {
				return hook
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path string) (int, string) {
		req := httptest.NewRequest(method, path, strings.NewReader("{}"))
		req.Host = "127.0.0.1:8080"
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	if code, body := do(http.MethodPost, "/slack/events"); code != http.StatusOK || body != "hooked" {
		t.Errorf("POST /slack/events = %d %q", code, body)
	}
	if code, body := do(http.MethodGet, "/slack/events"); code != http.StatusOK || body != "hooked" {
		t.Errorf("GET /slack/events = %d %q; want the hook (a webhook's handshake)", code, body)
	}
	if code, body := do(http.MethodPut, "/slack/events"); body == "hooked" {
		t.Errorf("PUT /slack/events reached the hook (%d)", code)
	}
	if code, _ := do(http.MethodGet, "/readyz"); code != http.StatusUnauthorized {
		t.Errorf("GET /readyz without the token = %d, want 401", code)
	}
}
