package mcpclient

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-gateway/switchboard/config"
)

var openAIName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestToolName(t *testing.T) {
	long := strings.Repeat("x", 70)
	tests := []struct {
		server, tool, want string
	}{
		{"github", "search_issues", "github__search_issues"},
		{"files", "read-file", "files__read-file"},
		{"files", "fs.read file", "files__fs_read_file"},
		{"files", "dé/jà", "files__d__j_"},                                  // one "_" per character, not per byte
		{"srv", strings.Repeat("a", 59), "srv__" + strings.Repeat("a", 59)}, // exactly 64
	}
	for _, tt := range tests {
		if got := toolName(tt.server, tt.tool); got != tt.want {
			t.Errorf("toolName(%q, %q) = %q, want %q", tt.server, tt.tool, got, tt.want)
		}
	}

	a, b := toolName("srv", long+"a"), toolName("srv", long+"b")
	for _, n := range []string{a, b} {
		if !openAIName.MatchString(n) || len(n) != 64 || !strings.HasPrefix(n, "srv__xxx") {
			t.Errorf("truncated name %q (%d) is not a 64-character function name keeping the start", n, len(n))
		}
	}
	if a == b {
		t.Errorf("two long names that differ at the end share the name %q", a)
	}
	if again := toolName("srv", long+"a"); again != a {
		t.Errorf("truncation is not deterministic: %q then %q", a, again)
	}
}

func TestResultText(t *testing.T) {
	tests := []struct {
		name string
		res  *mcp.CallToolResult
		want string
	}{
		{"text parts joined", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.TextContent{Text: "b"}}}, "a\nb"},
		{"no content", &mcp.CallToolResult{}, ""},
		{"structured only", &mcp.CallToolResult{StructuredContent: map[string]any{"n": 1}}, `{"n":1}`},
		{"text wins over structured", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "t"}}, StructuredContent: 1}, "t"},
		{"image without type", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: []byte("abc")}}}, "[image: unknown type, 3 bytes]"},
		{"empty embedded resource", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{}}}, "[resource]"},
	}
	for _, tt := range tests {
		if got := resultText(tt.res); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestStderrLogger(t *testing.T) {
	log, logs := newLog()
	w := &stderrLogger{log: log}
	for _, chunk := range []string{"first li", "ne\r\nsecond\n", "", "\nun", "finished"} {
		if n, err := w.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", chunk, n, err)
		}
	}
	w.Write([]byte(strings.Repeat("z", maxStderrLine+10)))
	w.flush()
	w.flush() // nothing left: no empty line

	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		_, after, _ := strings.Cut(l, "line=")
		lines = append(lines, strings.Trim(after, `"`))
	}
	want := []string{"first line", "second", "", "unfinished" + strings.Repeat("z", maxStderrLine-len("unfinished")), strings.Repeat("z", 10+len("unfinished"))}
	if !slices.Equal(lines, want) {
		t.Errorf("logged lines = %q\nwant %q", lines, want)
	}
}

func TestChildEnv(t *testing.T) {
	ours := map[string]string{"PATH": "/usr/bin", "LANG": "C.UTF-8", "OPENAI_API_KEY": "sk-ours", "HOME": "/home/sb"}
	lookup := func(k string) (string, bool) { v, ok := ours[k]; return v, ok }
	got := childEnv(lookup, []string{"API_KEY=theirs", "PATH=/opt/bin"})
	want := []string{"PATH=/usr/bin", "HOME=/home/sb", "LANG=C.UTF-8", "API_KEY=theirs", "PATH=/opt/bin"}
	if !slices.Equal(got, want) {
		t.Errorf("childEnv = %q, want %q (TMPDIR unset, OPENAI_API_KEY not inherited, the server's PATH last so it wins)", got, want)
	}
}

func TestConfigErrorsNameNoSecrets(t *testing.T) {
	tests := []struct {
		cfg  config.MCPServer
		want string
	}{
		{config.MCPServer{Name: "a", Command: []string{"x"}, Env: []string{"TOKEN=ok-123456789", "no-equals-secret-value"}}, `mcp server "a": env[1] must be KEY=value`},
		{config.MCPServer{Name: "b", URL: "http://127.0.0.1:1/mcp", Headers: []string{"Authorization Bearer secret-value-123"}}, `mcp server "b": headers[0] must be "Name: value"`},
		{config.MCPServer{Name: "c", URL: "http://127.0.0.1:1/mcp", Command: []string{"x"}}, `mcp server "c": set either command or url, not both`},
	}
	for _, tt := range tests {
		_, err := newServer(tt.cfg, discard(), options{})
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: err = %v, want %q", tt.cfg.Name, err, tt.want)
		}
	}
}

func TestRedact(t *testing.T) {
	s, err := newServer(config.MCPServer{Name: "r", URL: "http://user:url-password-1@127.0.0.1:1/mcp",
		Headers: []string{"Authorization: Bearer tok-abcdefgh", "X-Short: abc"}}, discard(), options{})
	if err != nil {
		t.Fatal(err)
	}
	base := errors.New("boom")
	got := s.redact(fmt.Errorf("sent Bearer tok-abcdefgh to url-password-1 with abc: %w", base))
	if want := "sent [redacted] to [redacted] with abc: boom"; got.Error() != want {
		t.Errorf("redact = %q, want %q", got, want)
	}
	if !errors.Is(got, base) {
		t.Error("redact broke the error chain")
	}
	if plain := errors.New("nothing secret"); s.redact(plain) != plain {
		t.Error("redact wrapped an error without secrets")
	}
}
