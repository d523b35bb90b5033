package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/config"
)

// changes returns options whose notify signals ch after each change of the
// tool set, for waitFor.
func changes(opts options) (options, chan struct{}) {
	ch := make(chan struct{}, 1)
	opts.notify = func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return opts, ch
}

// waitFor waits until cond holds, checking it after each change of the tool
// set; it fails the test after 10 s.
func waitFor(t *testing.T, ch <-chan struct{}, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// freeAddr returns a 127.0.0.1 address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// serveMCP serves srv over streamable HTTP on l (or a new 127.0.0.1
// listener), wrapping the handler with wrap if given, and returns its URL.
func serveMCP(t *testing.T, l net.Listener, srv *mcp.Server, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	if wrap != nil {
		h = wrap(h)
	}
	ts := httptest.NewUnstartedServer(h)
	if l != nil {
		ts.Listener.Close()
		ts.Listener = l
	}
	ts.Start()
	t.Cleanup(ts.Close)
	return ts.URL
}

func prefixed(server string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = server + "__" + strings.TrimPrefix(n, "test__")
	}
	return out
}

// An HTTP server that comes up 10 s (of simulated time) after the gateway
// has its tools offered without a restart: the client retries it with
// capped exponential backoff (1 s, 2 s, 4 s, 8 s…), here with the waits
// simulated, and the server is started once 10 s have passed.
func TestServerStartedLaterJoins(t *testing.T) {
	addr := freeAddr(t)
	release := make(chan struct{})
	var (
		mu        sync.Mutex
		simulated time.Duration
		delays    []time.Duration
		started   bool
	)
	opts, ch := changes(options{wait: func(ctx context.Context, d time.Duration) bool {
		select {
		case <-release: // the test has looked at the server while it was down
		case <-ctx.Done():
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		simulated += d
		delays = append(delays, d)
		if simulated >= 10*time.Second && !started {
			started = true
			l, err := net.Listen("tcp", addr)
			if err != nil {
				t.Errorf("listen again on %s: %v", addr, err)
				return false
			}
			serveMCP(t, l, newTestServer(false), nil)
		}
		return ctx.Err() == nil
	}})
	log, logs := newLog()
	m, errs := connect(t.Context(), []config.MCPServer{{Name: "late", URL: "http://" + addr + "/mcp"}}, log, opts)
	defer m.Close()
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), `mcp server "late": connect: `) {
		t.Fatalf("errs = %v, want the failed first connect", errs)
	}
	if got := toolNames(m); len(got) != 0 {
		t.Errorf("tools while the server is down = %v, want none", got)
	}
	st := m.Status()[0]
	if st.Connected || !st.Retrying || st.LastError == "" || st.NextRetry.IsZero() {
		t.Errorf("status while down = %+v, want down, retrying, with the error and the next retry", st)
	}

	close(release)
	want := prefixed("late", wantTestTools)
	waitFor(t, ch, "the late server's tools", func() bool { return slices.Equal(toolNames(m), want) })
	// The tool set the agent gets each step is the new one.
	if n := len(m.Source().Tools(agent.TurnInfo{})); n != len(want) {
		t.Errorf("source offers %d tools, want %d", n, len(want))
	}
	if got := mustCall(t, m, "late__echo", `{"text":"finally"}`); got != "finally" {
		t.Errorf("echo = %q", got)
	}
	st = m.Status()[0]
	if !st.Connected || st.Retrying || st.LastError != "" || st.Tools != len(want) {
		t.Errorf("status after the server came up = %+v", st)
	}
	mu.Lock()
	if !slices.Equal(delays, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}) {
		t.Errorf("retry delays = %v, want 1s 2s 4s 8s", delays)
	}
	mu.Unlock()
	if !strings.Contains(logs.String(), `msg="mcp server still down; retrying" mcp_server=late attempt=1`) {
		t.Errorf("the failed retries are not logged:\n%s", logs.String())
	}
}

func TestBackoffIsCapped(t *testing.T) {
	var got []time.Duration
	for a := 1; a <= 10; a++ {
		got = append(got, backoff(a))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		32 * time.Second, 64 * time.Second, 2 * time.Minute, 2 * time.Minute, 2 * time.Minute}
	if !slices.Equal(got, want) {
		t.Errorf("backoff = %v, want %v", got, want)
	}
}

// A stdio server that crashes is started again in the background, without
// waiting for the next call, and Close stops the retries.
func TestDroppedServerIsRetriedInTheBackground(t *testing.T) {
	opts, ch := changes(options{backoff: func(int) time.Duration { return 0 }})
	m := mustConnect(t, nil, opts, stdioServer(t, "test"))
	first := mustCall(t, m, "test__pid", `{}`)
	if _, err := call(t, m, "test__crash", `{}`); err == nil {
		t.Fatal("crash: no error")
	}
	waitFor(t, ch, "the background reconnect", func() bool { return m.Status()[0].Connected })
	if second := mustCall(t, m, "test__pid", `{}`); second == first {
		t.Errorf("pid after the reconnect = %s, the crashed process", second)
	}

	// A server that stays away is retried until Close, which ends the loop.
	m.servers[0].argv = []string{"/nonexistent/switchboard-mcp-server"}
	if _, err := call(t, m, "test__crash", `{}`); err == nil {
		t.Fatal("crash: no error")
	}
	if err := m.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if st := m.Status()[0]; st.Retrying {
		t.Errorf("status after close = %+v, still retrying", st)
	}
}

// notifications/tools/list_changed lists the tools again: an added tool is
// offered, a removed one withdrawn, and calling it anyway gets the server's
// JSON-RPC error labelled as untrusted.
func TestToolListChanged(t *testing.T) {
	srv := newTestServer(false)
	url := serveMCP(t, nil, srv, nil)
	opts, ch := changes(options{})
	m := mustConnect(t, nil, opts, config.MCPServer{Name: "test", URL: url})
	echo := toolByName(t, m, "test__echo")

	srv.AddTool(&mcp.Tool{Name: "added", Description: "Added later.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("new"), nil })
	waitFor(t, ch, "test__added", func() bool { return slices.Contains(toolNames(m), "test__added") })
	if got := mustCall(t, m, "test__added", `{}`); got != "new" {
		t.Errorf("added = %q", got)
	}
	if got := m.Status()[0].Tools; got != len(wantTestTools)+1 {
		t.Errorf("status tools = %d, want %d", got, len(wantTestTools)+1)
	}

	srv.RemoveTools("echo")
	waitFor(t, ch, "test__echo to go", func() bool { return !slices.Contains(toolNames(m), "test__echo") })
	_, err := echo.Fn(t.Context(), json.RawMessage(`{"text":"x"}`))
	label := agent.UntrustedLabel("test__echo")
	if err == nil || !strings.HasPrefix(err.Error(), `mcp server "test": call echo: JSON-RPC error `) ||
		!strings.Contains(err.Error(), "\n"+label+"\n") {
		t.Errorf("removed tool: err = %v, want the server's JSON-RPC error labelled %q", err, label)
	}
}

// A tool that requires task augmentation is not offered: every plain call
// of it would fail.
func TestTaskRequiredToolNotOffered(t *testing.T) {
	httpSrv := newTestServer(false)
	addTaskTool(httpSrv)
	url := serveMCP(t, nil, httpSrv, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(&taskResponse{ResponseWriter: w}, r)
		})
	})
	for _, cfg := range []config.MCPServer{
		stdioServer(t, "test", envTasks+"=1"),
		{Name: "test", URL: url},
	} {
		t.Run(cmpTransport(cfg), func(t *testing.T) {
			log, logs := newLog()
			m := mustConnect(t, log, options{}, cfg)
			if got := toolNames(m); !slices.Equal(got, wantTestTools) {
				t.Errorf("tools = %v, want %v without test__long_job", got, wantTestTools)
			}
			if !strings.Contains(logs.String(), `level=INFO msg="mcp tool skipped: it requires task augmentation, which this client does not support" mcp_server=test tool=long_job`) {
				t.Errorf("the skipped tool is not logged:\n%s", logs.String())
			}
		})
	}
}

func cmpTransport(cfg config.MCPServer) string {
	if cfg.URL != "" {
		return "http"
	}
	return "stdio"
}

// taskResponse marks long_job as task-required in what the HTTP server
// writes, as taskWriter does for stdio.
type taskResponse struct{ http.ResponseWriter }

func (w *taskResponse) Write(p []byte) (int, error) {
	if _, err := w.ResponseWriter.Write(slices.Clone(replaceTask(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *taskResponse) WriteHeader(code int) {
	w.Header().Del("Content-Length") // the body grows
	w.ResponseWriter.WriteHeader(code)
}

func (w *taskResponse) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

func (w *taskResponse) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func replaceTask(p []byte) []byte {
	return []byte(strings.ReplaceAll(string(p), string(taskToolJSON), string(taskRequiredJSON)))
}

// startup_timeout bounds the start; timeout bounds each call; neither
// bounds the other.
func TestStartupTimeoutIsSeparate(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang) // before the cleanups close the servers and sessions
	// A server that never answers initialize.
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-hang:
		}
	}))
	t.Cleanup(stuck.Close)

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	began := time.Now()
	m, errs := connect(ctx, []config.MCPServer{{Name: "stuck", URL: stuck.URL, Timeout: time.Hour, StartupTimeout: 200 * time.Millisecond}}, nil, options{})
	m.Close()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "did not start within 200ms (startup_timeout)") {
		t.Errorf("errs = %v, want the start-up timeout named", errs)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("the start took %s: the call timeout bounded it", d)
	}

	// A tool that never answers: the call timeout, not the start-up one.
	srv := newTestServer(false)
	srv.AddTool(&mcp.Tool{Name: "block", Description: "Never answers.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-ctx.Done():
			case <-hang:
			}
			return nil, errors.New("released")
		})
	url := serveMCP(t, nil, srv, nil)
	m2 := mustConnect(t, nil, options{}, config.MCPServer{Name: "slow", URL: url, Timeout: 200 * time.Millisecond, StartupTimeout: time.Hour})
	cctx, ccancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer ccancel()
	_, err := toolByName(t, m2, "slow__block").Fn(cctx, json.RawMessage(`{}`))
	if err == nil || err.Error() != `mcp server "slow": block did not answer within 200ms` {
		t.Errorf("block: err = %v, want the call timeout", err)
	}
}
