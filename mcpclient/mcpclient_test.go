package mcpclient

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/config"
)

var wantTestTools = []string{"test__args", "test__crash", "test__echo", "test__env", "test__fail", "test__media", "test__pid"}

// failText is the error of test__fail: the server's text, labelled like a
// result.
var failText = agent.UntrustedLabel("test__fail") + "\nit broke on purpose"

func TestStdioServer(t *testing.T) {
	const secret = "super-secret-env-value-123"
	t.Setenv("SWITCHBOARD_PARENT_ONLY", "must-not-reach-the-child")
	log, logs := newLog()
	m := mustConnect(t, log, options{}, stdioServer(t, "test", "SECRET_TOKEN="+secret))

	src := m.Source()
	if src.Name() != "mcp" {
		t.Errorf("source name = %q, want mcp", src.Name())
	}
	if got := toolNames(m); !slices.Equal(got, wantTestTools) {
		t.Errorf("tools (listed over several pages) = %v, want %v", got, wantTestTools)
	}

	echo := toolByName(t, m, "test__echo")
	if echo.Description != "[test] Echo the text back." {
		t.Errorf("echo description = %q", echo.Description)
	}
	if !echo.ConcurrencySafe || echo.Source != "mcp:test" {
		t.Errorf("echo: ConcurrencySafe=%v Source=%q, want true and mcp:test", echo.ConcurrencySafe, echo.Source)
	}
	if !strings.Contains(string(echo.Parameters), `"text"`) || !strings.Contains(string(echo.Parameters), `"required"`) {
		t.Errorf("echo parameters = %s, want the server's schema with a required text", echo.Parameters)
	}
	if toolByName(t, m, "test__fail").ConcurrencySafe {
		t.Error("fail has no readOnlyHint but is ConcurrencySafe")
	}
	// A tool not marked read-only acts beyond the reply (asked about or
	// withdrawn after untrusted content); a read-only one does not.
	if echo.Acts || !toolByName(t, m, "test__fail").Acts {
		t.Errorf("Acts: echo (read-only) %v, fail (no hint) %v; want false and true", echo.Acts, toolByName(t, m, "test__fail").Acts)
	}

	if got := mustCall(t, m, "test__echo", `{"text":"hi there"}`); got != "hi there" {
		t.Errorf("echo = %q, want %q", got, "hi there")
	}
	if _, err := call(t, m, "test__fail", `{}`); err == nil || err.Error() != failText {
		t.Errorf("fail: err = %v, want the tool's error text, labelled", err)
	}
	// Large integers reach the server exactly as the model wrote them.
	if got := mustCall(t, m, "test__args", `{"id":12345678901234567890,"f":0.1}`); got != `{"f":0.1,"id":12345678901234567890}` {
		t.Errorf("args = %s", got)
	}
	wantMedia := "a chart:\n[image: image/png, 1234 bytes]\n[audio: audio/wav, 10 bytes]\n" +
		"[resource link: file:///srv/report.pdf, report, application/pdf]\n" +
		"[resource: file:///srv/notes.txt, text/plain]\nthe notes\n[resource: file:///srv/blob.bin, 3 bytes]"
	if got := mustCall(t, m, "test__media", `{}`); got != wantMedia {
		t.Errorf("media =\n%s\nwant\n%s", got, wantMedia)
	}

	// The child sees the scrubbed environment plus its own entries only.
	var wantEnv []string
	for _, k := range inheritedEnv {
		if _, ok := os.LookupEnv(k); ok {
			wantEnv = append(wantEnv, k)
		}
	}
	wantEnv = append(wantEnv, "GORACE", "SECRET_TOKEN", envServe)
	slices.Sort(wantEnv)
	if got := strings.Split(mustCall(t, m, "test__env", `{}`), ","); !slices.Equal(got, wantEnv) {
		t.Errorf("child environment = %v, want %v", got, wantEnv)
	}

	want := []ServerStatus{{Name: "test", Transport: "stdio", Connected: true, Tools: len(wantTestTools)}}
	if got := m.Status(); !slices.Equal(got, want) {
		t.Errorf("status = %+v, want %+v", got, want)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if got := m.Status(); got[0].Connected {
		t.Error("status after close still says connected")
	}
	if _, err := call(t, m, "test__echo", `{"text":"x"}`); err == nil || !strings.Contains(err.Error(), `mcp server "test": closed`) {
		t.Errorf("call after close: err = %v, want closed", err)
	}

	// Close waited for the child, so its stderr is fully logged by now.
	out := logs.String()
	if !strings.Contains(out, `level=DEBUG msg="mcp server stderr" mcp_server=test line="`+readyLine+`"`) {
		t.Errorf("the child's stderr line is not in the debug log:\n%s", out)
	}
	if strings.Contains(out, secret) {
		t.Errorf("the log shows an env secret:\n%s", out)
	}
}

// httpTestServer serves the test MCP server on 127.0.0.1, answering 401 to
// requests without the X-Api-Key header. swap replaces the MCP handler,
// as a restarted server would (it forgets every session).
type httpTestServer struct {
	*httptest.Server
	handler  atomic.Pointer[mcp.StreamableHTTPHandler]
	accepted atomic.Int64
	rejected atomic.Int64
}

func newHTTPTestServer(t *testing.T, key string) *httpTestServer {
	t.Helper()
	h := &httpTestServer{}
	h.swap()
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != key {
			h.rejected.Add(1)
			http.Error(w, "missing or wrong X-Api-Key", http.StatusUnauthorized)
			return
		}
		h.accepted.Add(1)
		h.handler.Load().ServeHTTP(w, r)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *httpTestServer) swap() {
	srv := newTestServer(false)
	h.handler.Store(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
}

func TestHTTPServer(t *testing.T) {
	const key = "secret-header-value-456"
	ts := newHTTPTestServer(t, key)
	log, logs := newLog()
	m := mustConnect(t, log, options{}, config.MCPServer{Name: "test", URL: ts.URL, Headers: []string{"X-Api-Key: " + key}})

	if got := toolNames(m); !slices.Equal(got, wantTestTools) {
		t.Errorf("tools = %v, want %v", got, wantTestTools)
	}
	if got := mustCall(t, m, "test__echo", `{"text":"over http"}`); got != "over http" {
		t.Errorf("echo = %q", got)
	}
	if _, err := call(t, m, "test__fail", `{}`); err == nil || err.Error() != failText {
		t.Errorf("fail: err = %v, want the tool's error text, labelled", err)
	}
	want := []ServerStatus{{Name: "test", Transport: "http", Connected: true, Tools: len(wantTestTools)}}
	if got := m.Status(); !slices.Equal(got, want) {
		t.Errorf("status = %+v, want %+v", got, want)
	}

	// The server restarts and forgets the session: the call reconnects and
	// is sent again, invisibly to the model.
	ts.swap()
	if got := mustCall(t, m, "test__echo", `{"text":"after restart"}`); got != "after restart" {
		t.Errorf("echo after restart = %q", got)
	}
	if !strings.Contains(logs.String(), `msg="mcp server lost the session; reconnecting" mcp_server=test tool=echo`) ||
		!strings.Contains(logs.String(), `msg="mcp server reconnected" mcp_server=test`) {
		t.Errorf("the call did not go through a reconnect:\n%s", logs.String())
	}

	if err := m.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if n, bad := ts.accepted.Load(), ts.rejected.Load(); n == 0 || bad != 0 {
		t.Errorf("requests with the header: %d, without: %d; want every request to carry it", n, bad)
	}
	if strings.Contains(logs.String(), key) {
		t.Errorf("the log shows the header value:\n%s", logs.String())
	}
}

func TestHTTPServerRejectsMissingHeader(t *testing.T) {
	const key = "secret-header-value-789"
	ts := newHTTPTestServer(t, key)
	m, errs := connect(t.Context(), []config.MCPServer{{Name: "nokey", URL: ts.URL, Headers: []string{"X-Api-Key: wrong-value-000"}}}, nil, options{})
	defer m.Close()
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), `mcp server "nokey": connect: `) {
		t.Fatalf("errs = %v, want one connect error naming the server", errs)
	}
	if strings.Contains(errs[0].Error(), "wrong-value-000") {
		t.Errorf("the error shows the header value: %v", errs[0])
	}
	if len(toolNames(m)) != 0 {
		t.Errorf("tools = %v, want none", toolNames(m))
	}
}

func TestConnectReportsFailuresAndKeepsTheRest(t *testing.T) {
	// An address nothing listens on: bind a port, then free it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + l.Addr().String() + "/mcp"
	l.Close()

	servers := []config.MCPServer{
		{Name: "missing", Command: []string{"/nonexistent/switchboard-mcp-server"}},
		stdioServer(t, "test"),
		{Name: "down", URL: deadURL},
		{Name: "empty"},
	}
	m, errs := connect(t.Context(), servers, nil, options{})
	defer m.Close()
	for _, err := range errs {
		t.Log(err)
	}

	wantPrefixes := []string{
		`mcp server "missing": start: `,
		`mcp server "down": connect: `,
		`mcp server "empty": set command`,
	}
	if len(errs) != len(wantPrefixes) {
		t.Fatalf("errs = %v, want %d", errs, len(wantPrefixes))
	}
	for i, p := range wantPrefixes {
		if !strings.HasPrefix(errs[i].Error(), p) {
			t.Errorf("errs[%d] = %q, want prefix %q", i, errs[i], p)
		}
	}
	if got := toolNames(m); !slices.Equal(got, wantTestTools) {
		t.Errorf("tools = %v, want only the good server's %v", got, wantTestTools)
	}
	if got := mustCall(t, m, "test__echo", `{"text":"still works"}`); got != "still works" {
		t.Errorf("echo = %q", got)
	}

	st := m.Status()
	if len(st) != 4 {
		t.Fatalf("status = %+v, want 4 servers", st)
	}
	for i, want := range []struct {
		name, transport string
		connected       bool
	}{{"missing", "stdio", false}, {"test", "stdio", true}, {"down", "http", false}, {"empty", "", false}} {
		got := st[i]
		if got.Name != want.name || got.Transport != want.transport || got.Connected != want.connected {
			t.Errorf("status[%d] = %+v, want %s/%s connected=%v", i, got, want.name, want.transport, want.connected)
		}
		if !want.connected && got.LastError == "" {
			t.Errorf("status[%d] has no last error", i)
		}
	}
}

func TestReconnectAfterCrash(t *testing.T) {
	log, logs := newLog()
	m := mustConnect(t, log, options{}, stdioServer(t, "test"))
	first := mustCall(t, m, "test__pid", `{}`)

	_, err := call(t, m, "test__crash", `{}`)
	if err == nil || !strings.HasPrefix(err.Error(), `mcp server "test": connection lost during crash`) {
		t.Fatalf("crash: err = %v, want the lost connection named", err)
	}
	if st := m.Status()[0]; st.Connected || st.LastError == "" {
		t.Errorf("status after the crash = %+v, want disconnected with an error", st)
	}

	second := mustCall(t, m, "test__pid", `{}`)
	if second == first {
		t.Errorf("pid after reconnect = %s, the same process as before", second)
	}
	if st := m.Status()[0]; !st.Connected || st.LastError != "" {
		t.Errorf("status after reconnect = %+v, want connected without error", st)
	}
	if !strings.Contains(logs.String(), `msg="mcp server reconnected" mcp_server=test`) {
		t.Errorf("no reconnect in the log:\n%s", logs.String())
	}
}

func TestReconnectFailsClearly(t *testing.T) {
	m := mustConnect(t, nil, options{}, stdioServer(t, "test"))
	// The binary disappears after the start, so the restart cannot work.
	s := m.servers[0]
	s.argv = []string{"/nonexistent/switchboard-mcp-server"}
	if _, err := call(t, m, "test__crash", `{}`); err == nil {
		t.Fatal("crash: no error")
	}
	_, err := call(t, m, "test__echo", `{"text":"x"}`)
	if err == nil || !strings.HasPrefix(err.Error(), `mcp server "test": the connection was lost and reconnecting failed: `) {
		t.Errorf("echo after a failed restart: err = %v", err)
	}
}

func TestAwkwardToolNames(t *testing.T) {
	log, logs := newLog()
	m, errs := connect(t.Context(), []config.MCPServer{stdioServer(t, "odd", envExtra+"=1")}, log, options{})
	defer m.Close()

	long := toolName("odd", strings.Repeat("very_long_tool_name_", 5))
	if len(long) != maxToolName || !strings.HasPrefix(long, "odd__very_long_tool_name_very_long") {
		t.Errorf("long name = %q (%d), want 64 characters keeping the start", long, len(long))
	}
	names := toolNames(m)
	for _, want := range []string{"odd__dotted_name", "odd__bad_schema", long} {
		if !slices.Contains(names, want) {
			t.Errorf("tools %v lack %s", names, want)
		}
	}
	// "dotted.name" sorts before "dotted_name", so it keeps the name.
	if len(errs) != 1 || errs[0].Error() != `mcp server "odd": tool "dotted_name" is named odd__dotted_name like odd/dotted.name; skipped` {
		t.Errorf("errs = %v, want the collision reported", errs)
	}
	if got := mustCall(t, m, "odd__dotted_name", `{}`); got != "ok dotted.name" {
		t.Errorf("odd__dotted_name = %q, want the first tool", got)
	}
	if got := m.Status()[0].Tools; got != len(names) {
		t.Errorf("status tools = %d, want %d", got, len(names))
	}

	// The tool with a broken schema stays, unvalidated, and is logged.
	if got := mustCall(t, m, "odd__bad_schema", `{"x":1}`); got != `got {"x":1}` {
		t.Errorf("bad_schema = %q", got)
	}
	if !strings.Contains(logs.String(), `level=WARN msg="mcp tool schema does not compile; its arguments will not be validated" mcp_server=odd tool=bad_schema`) {
		t.Errorf("no warning about the schema:\n%s", logs.String())
	}
}
