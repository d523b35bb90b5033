package gateway

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/skills"
)

// With command tools on, and the file tools in the same folder (the
// defaults), file_write and file_edit refuse the files a command skill runs
// or names, also through a symbolic link, and change the others; with
// command tools off nothing runs them, and the file tools may.
func TestFileToolsLeaveCommandScripts(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "workspace")
	if err := os.MkdirAll(filepath.Join(ws, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(ws, "scripts", "report.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho report\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("scripts/report.sh", filepath.Join(ws, "link.sh")); err != nil {
		t.Fatal(err)
	}
	reg := skills.Load(fstest.MapFS{"ops.yaml": {Data: []byte(`name: ops
description: o
instructions: i
define_tools:
  - name: report
    description: r
    kind: command
    argv: [./scripts/report.sh, notes.txt]
`)}}, nil, skills.Env{})
	if len(reg.Problems()) > 0 {
		t.Fatal(reg.Problems())
	}
	cfg := config.Default()
	cfg.Tools.Files.Enabled, cfg.Tools.Files.Root = true, ws
	cfg.Tools.Command.Enabled, cfg.Tools.Command.Workspace = true, ws
	src := fileTools(cfg, func() *skills.Registry { return reg })
	for _, tc := range []struct{ tool, path string }{
		{"file_write", "scripts/report.sh"},
		{"file_edit", "scripts/report.sh"},
		{"file_write", "link.sh"},
		{"file_write", "notes.txt"},
	} {
		_, err := callTool(t, src, tc.tool, map[string]string{"path": tc.path, "content": "rm -rf ~", "old_text": "echo report", "new_text": "rm -rf ~"})
		if err == nil || !strings.Contains(err.Error(), "may read it but not change it") {
			t.Errorf("%s %s: %v, want it refused", tc.tool, tc.path, err)
		}
	}
	if b, _ := os.ReadFile(script); string(b) != "#!/bin/sh\necho report\n" {
		t.Errorf("the script was changed: %q", b)
	}
	if _, err := callTool(t, src, "file_write", map[string]string{"path": "scripts/other.txt", "content": "fine"}); err != nil {
		t.Errorf("file_write of another file: %v", err)
	}
	if out, err := callTool(t, src, "file_read", map[string]string{"path": "scripts/report.sh"}); err != nil || !strings.Contains(out, "echo report") {
		t.Errorf("file_read of the script: %q, %v", out, err)
	}

	cfg.Tools.Command.Enabled = false
	off := fileTools(cfg, func() *skills.Registry { return reg })
	if _, err := callTool(t, off, "file_edit", map[string]string{"path": "scripts/report.sh", "old_text": "echo report", "new_text": "echo changed"}); err != nil {
		t.Errorf("with command tools off, file_edit of the script: %v", err)
	}
}

// callTool calls the source's tool name with args, as a turn in chat c1.
func callTool(t *testing.T, src agent.Source, name string, args map[string]string) (string, error) {
	t.Helper()
	for _, tool := range src.Tools(agent.TurnInfo{Channel: "test", ChatKey: "c1"}) {
		if tool.Name == name {
			b, _ := json.Marshal(args)
			return tool.Fn(t.Context(), b)
		}
	}
	t.Fatalf("no tool %s", name)
	return "", nil
}

// The scripts an MCP server's command runs or names are read-only to the
// file tools too, command tools on or off: rewritten, they would run at
// the server's next start. Relative paths are from the working directory.
func TestFileToolsLeaveMCPServerScripts(t *testing.T) {
	ws := t.TempDir()
	t.Chdir(ws)
	for _, f := range []string{"server.py", "tools/extra.js"} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("print('mcp')\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config.Default()
	cfg.Tools.Files.Enabled, cfg.Tools.Files.Root = true, ws
	cfg.MCP.Servers = []config.MCPServer{
		{Name: "py", Command: []string{"python3", "server.py", "--verbose"}},
		{Name: "node", Command: []string{"node", filepath.Join(ws, "tools", "extra.js")}},
	}
	src := fileTools(cfg, func() *skills.Registry { return skills.Load(fstest.MapFS{}, nil, skills.Env{}) })
	for _, path := range []string{"server.py", "tools/extra.js"} {
		_, err := callTool(t, src, "file_write", map[string]string{"path": path, "content": "import os; os.system('rm -rf ~')"})
		if err == nil || !strings.Contains(err.Error(), "may read it but not change it") {
			t.Errorf("file_write %s: %v, want it refused", path, err)
		}
	}
	if b, _ := os.ReadFile("server.py"); string(b) != "print('mcp')\n" {
		t.Errorf("the server's script was changed: %q", b)
	}
	if _, err := callTool(t, src, "file_write", map[string]string{"path": "notes.txt", "content": "fine"}); err != nil {
		t.Errorf("file_write of another file: %v", err)
	}
}
