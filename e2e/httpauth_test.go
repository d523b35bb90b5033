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

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
)

func TestHTTPTokenFromEnvironment(t *testing.T) {
	const envToken = "env-http-token-FAKE-0123456789abcdef"
	model := testkit.NewFakeLLM(t)
	c := modelConfig(model.URL)
	dir := t.TempDir()
	c.Store.Path = filepath.Join(dir, "switchboard.db")
	c.Skills.Dir = filepath.Join(dir, "skills")
	c.Learning.Enabled = false
	c.HTTP.Listen, c.HTTP.Token = "127.0.0.1:0", "" // the file names no token
	cfg := cfgfile.Write(t, c)
	t.Setenv("SWITCHBOARD_HTTP_TOKEN", envToken)

	s := startServe(t, cfg, func(ctx context.Context) error { return nil })
	if err := waitLog(s.ctx(t), s.stderr, "http listening"); err != nil {
		t.Fatal(err)
	}
	line := logLine(s.stderr, "http listening")
	if !strings.Contains(line, "auth=true") {
		t.Errorf("start-up log %q: want auth=true", line)
	}
	url := "http://" + listenLine.FindStringSubmatch(line)[1]

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
