package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
	"github.com/switchboard-gateway/switchboard/llm"
)

// mcpLateAfter is when the MCP server of TestMCPServerStartedLater starts,
// counted from serve's start: issue 24's acceptance says 10 s.
const mcpLateAfter = 10 * time.Second

// TestMCPServerStartedLater is issue 24's "an MCP server started 10 s after
// the gateway has its tools offered without a restart", through serve in
// real time: a streamable HTTP server configured at a port where nothing
// listens yet. serve comes up and answers chats without its tools, /status
// says it is down and retried; 10 s after serve started (the scenario's
// clock, not a wait for something) a real MCP server (the official SDK)
// starts on that port, and once the background retry has reached it
// (serve's log says so) the next model request offers its tool, the model
// calls it, its result reaches the model labelled untrusted and the reply
// reaches the chat. Then the server adds a tool, which the SDK announces
// with notifications/tools/list_changed, and the next model request offers
// that one too, still without a restart.
func TestMCPServerStartedLater(t *testing.T) {
	t.Parallel()
	addr, release := holdPort(t) // refused until the server starts there
	tg := tgfake.New(t, tgToken)
	model := testkit.NewFakeLLM(t)
	script := newModelScript(model)
	dir := t.TempDir()
	cfgPath := faultConfig(t, dir, tg, model, noRetries)
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MCP.Servers = []config.MCPServer{{Name: "late", URL: "http://" + addr + "/mcp"}}
	config.Section[*telegram.Config](cfg).Admins = userIDs(fu1) // /status shows the server to admins
	cfgPath = cfgfile.Write(t, cfg)

	started := time.Now()
	s := startFaultServe(t, cfgPath, tg, model, script)

	// The server is down: serve answers chats with the tools it has, and
	// none of the missing server's.
	s.answer("hello while it is down", testkit.Reply{Text: "Hello without MCP."})
	s.say(fu1, "hello while it is down")
	if got := sentTexts(s.waitSent(t, fu1, 1)); got[0] != "Hello without MCP." {
		t.Fatalf("reply while the MCP server is down = %q", got)
	}
	if names := mcpTools(s.requestFor(t, "hello while it is down")); len(names) != 0 {
		t.Errorf("tools of the down server offered: %q", names)
	}
	s.say(fu1, "/status")
	status := sentTexts(s.waitSent(t, fu1, 2))[1]
	if !strings.Contains(status, "MCP server late is down and retried in the background") {
		t.Errorf("/status while the MCP server is down = %q, want it down and retried", status)
	}

	// 10 s after serve started, the server starts on the reserved port.
	srv := mcp.NewServer(&mcp.Implementation{Name: "late-e2e", Version: "v0.0.1"}, nil)
	var (
		mu    sync.Mutex
		calls []string // "tool: argument" as the server received them
	)
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup", Description: "Look a word up in the glossary."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Word string `json:"word"`
		}) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			calls = append(calls, "lookup: "+in.Word)
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Word + ": a routing board"}}}, nil, nil
		})
	clock := time.NewTimer(mcpLateAfter - time.Since(started))
	select {
	case <-clock.C:
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}
	if st := s.stderr.String(); strings.Contains(st, `msg="mcp server connected"`) {
		t.Fatalf("serve connected to the MCP server before it started:\n%s", st)
	}
	release()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("start the MCP server on the reserved %s: %v", addr, err)
	}
	ts := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	ts.Listener.Close()
	ts.Listener = l
	ts.Start()
	// Its event stream to serve ends only when serve goes: cut it, or Close
	// would wait for it.
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	up := time.Now()

	// The background retry (1 s, 2 s, 4 s, 8 s after the failed start)
	// reaches it within a retry interval.
	if err := waitLog(waitCtx(t), s.stderr, `msg="mcp server connected"`); err != nil {
		t.Fatalf("the MCP server that started later was never connected (%v); stderr:\n%s", err, s.stderr.String())
	}
	joined := time.Since(up)

	ask := "what is a switchboard?"
	s.answer(ask,
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("call_lookup", "late__lookup", `{"word":"switchboard"}`)}},
		testkit.Reply{Text: "A switchboard is a routing board."})
	s.say(fu1, ask)
	if got := sentTexts(s.waitSent(t, fu1, 3))[2]; got != "A switchboard is a routing board." {
		t.Errorf("reply with the late server's tool = %q", got)
	}
	reqs := requestsEndingWith(model, ask)
	if len(reqs) != 2 {
		t.Fatalf("%d model requests for %q, want 2 (the tool call, then the answer)", len(reqs), ask)
	}
	if names := mcpTools(reqs[0]); !slices.Equal(names, []string{"late__lookup"}) {
		t.Errorf("MCP tools offered after the server came up = %q, want late__lookup", names)
	}
	checkToolResult(t, reqs[1], "call_lookup", "late__lookup", "switchboard: a routing board")

	// The server adds a tool; the SDK tells the session with
	// notifications/tools/list_changed, and serve lists the tools again.
	srv.AddTool(&mcp.Tool{Name: "define", Description: "Define a word.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			calls = append(calls, "define")
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a word defined"}}}, nil
		})
	if err := waitLog(waitCtx(t), s.stderr, `msg="mcp server tools changed"`); err != nil {
		t.Fatalf("serve did not list the tools again after list_changed (%v); stderr:\n%s", err, s.stderr.String())
	}
	again := "and define it"
	s.answer(again,
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("call_define", "late__define", `{}`)}},
		testkit.Reply{Text: "Defined."})
	s.say(fu1, again)
	if got := sentTexts(s.waitSent(t, fu1, 4))[3]; got != "Defined." {
		t.Errorf("reply with the added tool = %q", got)
	}
	reqs = requestsEndingWith(model, again)
	if len(reqs) != 2 {
		t.Fatalf("%d model requests for %q, want 2", len(reqs), again)
	}
	if names := mcpTools(reqs[0]); !slices.Equal(names, []string{"late__define", "late__lookup"}) {
		t.Errorf("MCP tools offered after list_changed = %q, want late__define and late__lookup", names)
	}
	checkToolResult(t, reqs[1], "call_define", "late__define", "a word defined")

	mu.Lock()
	if want := []string{"lookup: switchboard", "define"}; !slices.Equal(calls, want) {
		t.Errorf("the MCP server received %q, want %q", calls, want)
	}
	mu.Unlock()
	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d; stderr:\n%s", code, s.stderr.String())
	}
	script.checkAllAsked(t)
	checkNoSecrets(t, "serve's log", s.stderr.String())
	t.Logf("MCP server started %v after serve; its tools joined %v after it started", up.Sub(started).Round(time.Millisecond), joined.Round(time.Millisecond))
}

// holdPort reserves a 127.0.0.1 port for a server that starts later: a
// socket bound to it that does not listen, so that a connection to it is
// refused, as to a server not started yet, while no other listener or
// outgoing connection of the parallel tests can take the port meanwhile
// (a port merely noted free could be taken in the seconds before the
// server starts). release frees it for the server's listener; it also
// runs when the test ends.
func holdPort(t *testing.T) (addr string, release func()) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.CloseOnExec(fd)
	var once sync.Once
	release = func() { once.Do(func() { syscall.Close(fd) }) }
	t.Cleanup(release)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port), release
}

// mcpTools lists the MCP tools a model request offers (named
// "<server>__<tool>"), sorted.
func mcpTools(r testkit.Recorded) []string {
	var out []string
	for _, spec := range r.Tools {
		if strings.Contains(spec.Name, "__") {
			out = append(out, spec.Name)
		}
	}
	slices.Sort(out)
	return out
}

// requestsEndingWith returns the model requests whose newest user message
// is text, in order.
func requestsEndingWith(m *testkit.FakeLLM, text string) []testkit.Recorded {
	var out []testkit.Recorded
	for _, r := range m.Requests() {
		if u := userTexts(r); len(u) > 0 && u[len(u)-1] == text {
			out = append(out, r)
		}
	}
	return out
}

// checkToolResult checks that r carries the result of call id to tool,
// holding result under the untrusted label.
func checkToolResult(t *testing.T, r testkit.Recorded, id, tool, result string) {
	t.Helper()
	i := slices.IndexFunc(r.Messages, func(m llm.Message) bool { return m.Role == llm.RoleTool && m.ToolCallID == id })
	if i < 0 {
		t.Errorf("the model did not get the result of %s: %+v", tool, r.Messages)
		return
	}
	got := r.Messages[i].Content
	if want := agent.UntrustedLabel(tool) + "\n"; !strings.HasPrefix(got, want) || !strings.Contains(got, result) {
		t.Errorf("result of %s the model got = %q, want %q under the label %q", tool, got, result, strings.TrimSpace(want))
	}
}
