package e2e

// Honest HTTP auth through `serve`: SWITCHBOARD_HTTP_TOKEN turns the token
// on when the file names none (as init writes it), and the start-up log
// says so.

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
)

func TestHTTPTokenFromEnvironment(t *testing.T) {
	const envToken = "env-http-token-FAKE-0123456789abcdef"
	model := testkit.NewFakeLLM(t)
	cfg := httpConfig(t, model.URL, "") // the file names no token
	t.Setenv("SWITCHBOARD_HTTP_TOKEN", envToken)

	s, url := serveReady(t, cfg, envToken)
	if line := logLine(s.stderr, "http listening"); !strings.Contains(line, "auth=true") {
		t.Errorf("start-up log %q: want auth=true", line)
	}

	for _, path := range []string{"/readyz", "/v1/models", "/metrics", "/"} {
		code, _ := testkit.HTTPDo(t, url, "", http.MethodGet, path, "", nil)
		if code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", path, code)
		}
	}
	if code, _ := testkit.HTTPDo(t, url, "wrong-token-but-long-enough", http.MethodPost, "/v1/chat/completions",
		`{"messages":[{"role":"user","content":"hi"}]}`, nil); code != http.StatusUnauthorized {
		t.Errorf("a chat with a wrong token: %d, want 401", code)
	}
	code, body := testkit.HTTPDo(t, url, envToken, http.MethodGet, "/v1/models", "", nil)
	if code != http.StatusOK {
		t.Errorf("GET /v1/models with the environment's token: %d %s, want 200", code, body)
	}
}

// The chat API through serve: a turn that pauses for approval answers with
// the question and its switchboard_approval field; the next "yes" gets the
// resumed turn's reply, and the tool ran once, after it.
func TestChatAPIApprovalThroughServe(t *testing.T) {
	const token = "chat-api-token-FAKE-0123456789abcdef"
	model := testkit.NewFakeLLM(t)
	script := newModelScript(model)
	written, err := config.Load(approvalConfig(t, model, func(*config.Channels) {}))
	if err != nil {
		t.Fatal(err)
	}
	written.HTTP.Listen, written.HTTP.Token = "127.0.0.1:0", token
	cfg := cfgfile.Write(t, written)
	_, url := serveReady(t, cfg, token)

	scriptCleanup(script, "clean up tmp please")
	content, resp := testkit.Chat(t, url, token, "ada", "clean up tmp please")
	q, ok := resp["switchboard_approval"].(map[string]any)
	if !ok || !strings.Contains(content, "cleanup") || !strings.Contains(content, "the tmp folder") {
		t.Fatalf("the paused request: content %q, switchboard_approval %v", content, resp["switchboard_approval"])
	}
	if calls, _ := q["calls"].([]any); len(calls) != 1 || calls[0].(map[string]any)["tool"] != "cleanup" {
		t.Errorf("switchboard_approval %v: want the cleanup call", q)
	}
	if n := script.requestsMentioning("Report cleaning"); n != 0 {
		t.Fatalf("the tool ran before approval (%d sub-calls)", n)
	}
	if got, _ := testkit.Chat(t, url, token, "ada", "yes"); got != "All clean now." {
		t.Errorf("the answering request got %q, want the resumed turn's reply", got)
	}
	if n := script.requestsMentioning("Report cleaning"); n != 1 {
		t.Errorf("the tool ran %d times after yes, want 1", n)
	}
}

// httpConfig writes a configuration for serve with the model at modelURL,
// the store and skills in a temporary folder, no learning, and HTTP on
// 127.0.0.1:0 with token (empty: the file names none).
func httpConfig(t *testing.T, modelURL, token string) string {
	t.Helper()
	c := modelConfig(modelURL)
	dir := t.TempDir()
	c.Store.Path = filepath.Join(dir, "switchboard.db")
	c.Skills.Dir = filepath.Join(dir, "skills")
	c.Learning.Enabled = false
	c.HTTP.Listen, c.HTTP.Token = "127.0.0.1:0", token
	return cfgfile.Write(t, c)
}

// serveReady runs serve on cfg and returns it with its HTTP server's URL
// once /readyz answers 200 to token (the chat API takes requests then).
func serveReady(t *testing.T, cfg, token string) (*serveRun, string) {
	t.Helper()
	s := startServe(t, cfg, func(context.Context) error { return nil })
	ctx := s.ctx(t)
	if err := waitLog(ctx, s.stderr, "http listening"); err != nil {
		t.Fatal(err)
	}
	url := "http://" + listenLine.FindStringSubmatch(logLine(s.stderr, "http listening"))[1]
	tick := time.NewTicker(10 * time.Millisecond) // polling: readiness sends no event
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, url
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("serve not ready: %v\n%s", ctx.Err(), s.stderr.String())
		case <-tick.C:
		}
	}
}
