package cli

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// healthServer serves /healthz on 127.0.0.1 with status and returns its port.
func healthServer(t *testing.T, status int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return port
}

// `switchboard healthcheck` asks the gateway's /healthz at http.listen: the
// image's HEALTHCHECK, in an image with no shell or curl.
func TestHealthcheck(t *testing.T) {
	up, failing := healthServer(t, http.StatusOK), healthServer(t, http.StatusServiceUnavailable)
	closed := func() string { // a port nobody listens on
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(l.Addr().String())
		l.Close()
		return port
	}()
	for _, tt := range []struct {
		name, listen string
		code         int
		out, err     string
	}{
		{"answers", "127.0.0.1:" + up, ExitOK, "ok: http://127.0.0.1:" + up + "/healthz", ""},
		{"all addresses are asked on loopback", "0.0.0.0:" + up, ExitOK, "ok: http://127.0.0.1:" + up + "/healthz", ""},
		{"no host is asked on loopback", ":" + up, ExitOK, "ok: http://127.0.0.1:" + up + "/healthz", ""},
		{"not 200", "127.0.0.1:" + failing, ExitFail, "", "answered 503 Service Unavailable"},
		{"nobody listens", "127.0.0.1:" + closed, ExitFail, "", "connection refused"},
		{"no HTTP server", "", ExitConfig, "", "http.listen is empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := writeConfig(t, "llm:\n  model: m\nhttp:\n  listen: \""+tt.listen+"\"\n")
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"--config", cfg, "healthcheck"}, nil, &stdout, &stderr)
			if code != tt.code || !strings.Contains(stdout.String(), tt.out) || !strings.Contains(stderr.String(), tt.err) {
				t.Errorf("healthcheck with http.listen %q: exit %d, stdout %q, stderr %q; want %d, %q, %q",
					tt.listen, code, stdout.String(), stderr.String(), tt.code, tt.out, tt.err)
			}
		})
	}
}
