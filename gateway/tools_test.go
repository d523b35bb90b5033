package gateway

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
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
	reg, cfg, src := commandFiles(t, ws, `name: ops
description: o
instructions: i
define_tools:
  - name: report
    description: r
    kind: command
    argv: [./scripts/report.sh, notes.txt]
`, skills.Env{})
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
	if _, err := callTool(t, src, "file_write", map[string]string{"path": "other.txt", "content": "fine"}); err != nil {
		t.Errorf("file_write of another file: %v", err)
	}
	// The script's folder is its program's too (what it sources, imports).
	if _, err := callTool(t, src, "file_write", map[string]string{"path": "scripts/other.txt", "content": "fine"}); err == nil ||
		!strings.Contains(err.Error(), "is in the folder of report.sh") {
		t.Errorf("file_write in the script's folder: %v, want it refused", err)
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

// commandFiles loads one skill file and returns the file tools with
// command tools and the file tools on, both in ws (the defaults share it).
func commandFiles(t *testing.T, ws, skill string, env skills.Env) (*skills.Registry, *config.Config, agent.Source) {
	t.Helper()
	reg := skills.Load(fstest.MapFS{"ops.yaml": {Data: []byte(skill)}}, nil, env)
	if len(reg.Problems()) > 0 {
		t.Fatal(reg.Problems())
	}
	cfg := config.Default()
	cfg.Tools.Files.Enabled, cfg.Tools.Files.Root = true, ws
	cfg.Tools.Command.Enabled, cfg.Tools.Command.Workspace = true, ws
	return reg, cfg, fileTools(cfg, func() *skills.Registry { return reg })
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

// What the operator's commands load is not writable by the model. With
// py_report: [python3, scripts/report.py], file_write of scripts/json.py
// (or json.py, or any .py) is refused, and the report runs the real json
// module; with git_status: [git, status], a .gitconfig whose
// core.fsmonitor runs a command, written by the file tools or already in
// the workspace, never runs: the file tools refuse dotfiles and .git/, and
// commands get a private HOME. Issue 29, finding 3.
func TestPlantedCodeNeverRuns(t *testing.T) {
	t.Setenv("PATH", "/usr/local/bin:/usr/bin:/bin") // the system's programs, not a user's shims
	for _, prog := range []string{"python3", "git"} {
		if _, err := exec.LookPath(prog); err != nil {
			testkit.Missing(t, "%s is not installed (apt-get install python3 git)", prog)
		}
	}
	ws := filepath.Join(t.TempDir(), "workspace")
	if err := os.MkdirAll(filepath.Join(ws, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Programs look at the workspace by its full path: its parents must
	// let the commands' uid (nobody, under root) pass.
	for _, d := range []string{filepath.Dir(ws), filepath.Dir(filepath.Dir(ws))} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "scripts", "report.py"), []byte("import json\nprint(json.dumps({'report': 1}))\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	if os.Geteuid() == 0 { // commands run as nobody then: the repository is theirs
		if out, err := exec.Command("chown", "-R", "65534:65534", filepath.Join(ws, ".git")).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
	}
	skill := `name: ops
description: o
instructions: i
define_tools:
  - name: py_report
    description: r
    kind: command
    argv: [python3, scripts/report.py]
  - name: git_status
    description: s
    kind: command
    argv: [git, status, --short]
`
	policy := skills.CommandPolicy{Enabled: true, Workspace: ws, Timeout: 20 * time.Second}
	reg, _, files := commandFiles(t, ws, skill, skills.Env{Command: policy})

	gitconfig := "[core]\n\tfsmonitor = \"echo PWNED-GIT; touch pwned-git; false\"\n[safe]\n\tdirectory = *\n"
	for _, tc := range []struct{ path, content string }{
		{"scripts/json.py", "print('PWNED')\n"},
		{"json.py", "print('PWNED')\n"},
		{"scripts/json/__init__.py", "print('PWNED')\n"},
		{".gitconfig", gitconfig},
		{".git/config", gitconfig},
	} {
		if _, err := callTool(t, files, "file_write", map[string]string{"path": tc.path, "content": tc.content}); err == nil {
			t.Errorf("file_write %s was accepted", tc.path)
		}
	}
	// A .gitconfig already in the workspace (from before, or put there by
	// a command) is not the commands' HOME.
	if err := os.WriteFile(filepath.Join(ws, ".gitconfig"), []byte(gitconfig), 0o644); err != nil {
		t.Fatal(err)
	}

	run := func(name string) string {
		t.Helper()
		for _, s := range reg.Skills() {
			for _, d := range s.DefineTools {
				if d.Name != name {
					continue
				}
				tool, err := d.Build("skill:ops", skills.Env{Command: policy})
				if err != nil {
					t.Fatal(err)
				}
				out, err := tool.Fn(t.Context(), nil)
				if err != nil {
					return "error: " + err.Error()
				}
				return out
			}
		}
		t.Fatalf("no tool %s", name)
		return ""
	}
	if got := run("py_report"); got != "{\"report\": 1}\n" {
		t.Errorf("py_report = %q, want the report from the real json module", got)
	}
	got := run("git_status")
	if strings.Contains(got, "PWNED") {
		t.Errorf("git status ran the planted fsmonitor: %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "pwned-git")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the planted fsmonitor ran: pwned-git exists (%v); git status said %q", err, got)
	}
	if !strings.Contains(got, "?? scripts/") {
		t.Errorf("git status = %q, want it to have run and listed scripts/", got)
	}
}
