package mcpclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// The test binary doubles as the stdio MCP server: run with this variable
// set, TestMain serves MCP on stdin/stdout instead of running the tests.
const (
	envServe    = "SWITCHBOARD_MCP_TEST_SERVER" // "1": serve and exit
	envExtra    = "SWITCHBOARD_MCP_TEST_EXTRA"  // "1": add tools with awkward names and schemas
	envStubborn = "SWITCHBOARD_MCP_TEST_STUB"   // "1": ignore SIGTERM and outlive stdin
	envSpawn    = "SWITCHBOARD_MCP_TEST_SPAWN"  // "1": add the spawn tool
	envHold     = "SWITCHBOARD_MCP_TEST_HOLD"   // a FIFO: hold it open for writing until killed
	envTasks    = "SWITCHBOARD_MCP_TEST_TASKS"  // "1": add long_job, a tool that requires task augmentation
	readyLine   = "switchboard test server ready"
)

func TestMain(m *testing.M) {
	if fifo := os.Getenv(envHold); fifo != "" {
		os.Exit(hold(fifo))
	}
	if os.Getenv(envServe) == "1" {
		os.Exit(serveStdio())
	}
	os.Exit(m.Run())
}

func serveStdio() int {
	stubborn := os.Getenv(envStubborn) == "1"
	var term chan os.Signal
	if stubborn {
		term = make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
	}
	fmt.Fprintln(os.Stderr, readyLine)
	var t mcp.Transport = &mcp.StdioTransport{}
	srv := newTestServer(os.Getenv(envExtra) == "1")
	if os.Getenv(envTasks) == "1" {
		addTaskTool(srv)
		t = &mcp.IOTransport{Reader: os.Stdin, Writer: taskWriter{os.Stdout}}
	}
	err := srv.Run(context.Background(), t)
	if stubborn {
		for range term { // outlive stdin and SIGTERM: only SIGKILL ends us
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}

// hold is a grandchild left behind by a server: it keeps fifo open for
// writing, says "ready" on stdout and waits to be killed, so the test sees
// the end of the FIFO exactly when it dies.
func hold(fifo string) int {
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hold:", err)
		return 1
	}
	defer f.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	fmt.Println("ready")
	for range sig {
	}
	return 0
}

// spawn starts a grandchild that holds fifo open and returns its pid once it
// is ready. It does not wait for it: the server leaves it behind.
func spawn(fifo string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{envHold + "=" + fifo}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		return "", fmt.Errorf("grandchild said %q: %v", line, err)
	}
	return strconv.Itoa(cmd.Process.Pid), nil
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// newTestServer is the MCP server of the tests, over stdio and over HTTP.
// Its page size of 2 makes the client paginate tools/list.
func newTestServer(extra bool) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "switchboard-test", Version: "v0.0.1"}, &mcp.ServerOptions{PageSize: 2})
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	anyArgs := json.RawMessage(`{"type":"object"}`)

	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text back.", Annotations: readOnly},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return text(in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("it broke on purpose")
		})
	s.AddTool(&mcp.Tool{Name: "args", Description: "Return the raw arguments.", InputSchema: anyArgs},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(string(req.Params.Arguments)), nil
		})
	s.AddTool(&mcp.Tool{Name: "media", Description: "Return one part of every kind.", InputSchema: anyArgs, Annotations: readOnly},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "a chart:"},
				&mcp.ImageContent{MIMEType: "image/png", Data: make([]byte, 1234)},
				&mcp.AudioContent{MIMEType: "audio/wav", Data: make([]byte, 10)},
				&mcp.ResourceLink{URI: "file:///srv/report.pdf", Name: "report", MIMEType: "application/pdf"},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///srv/notes.txt", MIMEType: "text/plain", Text: "the notes"}},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///srv/blob.bin", Blob: []byte{1, 2, 3}}},
			}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "env", Description: "List the names of the environment variables.", InputSchema: anyArgs, Annotations: readOnly},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var names []string
			for _, kv := range os.Environ() {
				k, _, _ := strings.Cut(kv, "=")
				names = append(names, k)
			}
			slices.Sort(names)
			return text(strings.Join(names, ",")), nil
		})
	s.AddTool(&mcp.Tool{Name: "pid", Description: "Return the server's process id.", InputSchema: anyArgs, Annotations: readOnly},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(strconv.Itoa(os.Getpid())), nil
		})
	s.AddTool(&mcp.Tool{Name: "crash", Description: "Exit the server process at once.", InputSchema: anyArgs},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			os.Exit(3)
			return nil, nil
		})
	if os.Getenv(envSpawn) == "1" {
		mcp.AddTool(s, &mcp.Tool{Name: "spawn", Description: "Start a process and leave it behind."},
			func(_ context.Context, _ *mcp.CallToolRequest, in struct {
				FIFO string `json:"fifo"`
			}) (*mcp.CallToolResult, any, error) {
				pid, err := spawn(in.FIFO)
				return text(pid), nil, err
			})
	}
	if extra {
		for _, name := range []string{"dotted.name", "dotted_name", strings.Repeat("very_long_tool_name_", 5)} {
			s.AddTool(&mcp.Tool{Name: name, Description: "An awkward name.", InputSchema: anyArgs},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return text("ok " + name), nil
				})
		}
		// A schema that does not resolve: the tool is kept, unvalidated.
		s.AddTool(&mcp.Tool{Name: "bad_schema", Description: "Its schema has a dangling $ref.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"#/$defs/missing"}}}`)},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return text("got " + string(req.Params.Arguments)), nil
			})
	}
	return s
}

// addTaskTool adds long_job, which taskWriter marks as requiring task
// augmentation: the SDK's Tool has no execution field to say so.
func addTaskTool(s *mcp.Server) {
	s.AddTool(&mcp.Tool{Name: "long_job", Description: "Runs only as a task.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("ran as a plain call"), nil
		})
}

// taskWriter adds "execution": {"taskSupport": "required"} (MCP
// 2025-11-25) to long_job's entry in every message the server writes.
type taskWriter struct{ w io.Writer }

var (
	taskToolJSON     = []byte(`"name":"long_job"`)
	taskRequiredJSON = []byte(`"execution":{"taskSupport":"required"},"name":"long_job"`)
)

func (t taskWriter) Write(p []byte) (int, error) {
	if _, err := t.w.Write(bytes.ReplaceAll(p, taskToolJSON, taskRequiredJSON)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (t taskWriter) Close() error {
	if c, ok := t.w.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// --- helpers ------------------------------------------------------------

// newLog returns a logger at debug level and the text it writes.
func newLog() (*slog.Logger, *testkit.SyncBuffer) {
	b := &testkit.SyncBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// stdioServer configures the test binary as a stdio server.
func stdioServer(t *testing.T, name string, env ...string) config.MCPServer {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A race-enabled child otherwise sleeps a second before it exits.
	base := []string{envServe + "=1", "GORACE=atexit_sleep_ms=0"}
	return config.MCPServer{Name: name, Command: []string{exe}, Env: append(base, env...)}
}

// mustConnect connects and fails the test on any reported error; the
// manager is closed at cleanup.
func mustConnect(t *testing.T, log *slog.Logger, opts options, servers ...config.MCPServer) *Manager {
	t.Helper()
	m, errs := connect(t.Context(), servers, log, opts)
	t.Cleanup(func() { m.Close() })
	if len(errs) > 0 {
		t.Fatalf("connect: %v", errors.Join(errs...))
	}
	return m
}

func toolByName(t *testing.T, m *Manager, name string) *agent.Tool {
	t.Helper()
	for _, tl := range m.Source().Tools(agent.TurnInfo{}) {
		if tl.Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %s; have %v", name, toolNames(m))
	return nil
}

func toolNames(m *Manager) []string {
	var out []string
	for _, tl := range m.Source().Tools(agent.TurnInfo{}) {
		out = append(out, tl.Name)
	}
	return out
}

func call(t *testing.T, m *Manager, name, args string) (string, error) {
	t.Helper()
	return toolByName(t, m, name).Fn(t.Context(), json.RawMessage(args))
}

func mustCall(t *testing.T, m *Manager, name, args string) string {
	t.Helper()
	out, err := call(t, m, name, args)
	if err != nil {
		t.Fatalf("%s(%s): %v", name, args, err)
	}
	return out
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
