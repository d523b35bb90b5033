package skills

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// workspace makes a workspace path (not yet created) next to a secret file.
func workspace(t *testing.T) (ws, secret string) {
	t.Helper()
	dir := t.TempDir()
	secret = filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(secret, []byte("top secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "ws"), secret
}

func TestCommandKind(t *testing.T) {
	ws, secret := workspace(t)
	policy := CommandPolicy{Enabled: true, Workspace: ws, Timeout: 10 * time.Second}
	// Build creates the workspace; make it first so files can be placed.
	buildTool(t, ToolDef{Name: "init", Kind: "command", Argv: []string{"true"}}, Env{Command: policy})
	if fi, err := os.Stat(ws); err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("workspace: %v, %v; want a 0750 directory", fi, err)
	}
	files := map[string]string{"notes.txt": "inside notes\n", "-n": "dash file\n", "hello.sh": "#!/bin/sh\necho hello from $0 \"$1\"\n"}
	for name, content := range files {
		// Readable and runnable by others: a gateway running as root runs
		// commands as nobody.
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(secret, filepath.Join(ws, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(secret), filepath.Join(ws, "up")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(filepath.Dir(secret), "gone"), filepath.Join(ws, "dangling")); err != nil {
		t.Fatal(err)
	}

	cat := ToolDef{Name: "cat", Kind: "command", Argv: []string{"cat", "{file}"}, Parameters: schema("file")}
	echo := ToolDef{Name: "echo", Kind: "command", Argv: []string{"echo", "{text}"}, Parameters: schema("text")}
	tests := []struct {
		name    string
		def     ToolDef
		policy  func(*CommandPolicy)
		args    string
		want    string
		wantErr string
	}{
		{name: "echo", def: echo, args: `{"text":"hello world"}`, want: "hello world\n"},
		{name: "echo number and missing", def: ToolDef{Name: "e", Kind: "command", Argv: []string{"echo", "{n}", "[{none}]"}, Parameters: schema("n", "none")},
			args: `{"n":42}`, want: "42 []\n"},
		{name: "file inside", def: cat, args: `{"file":"notes.txt"}`, want: "inside notes\n"},
		{name: "dot-dot", def: cat, args: `{"file":"../secret.txt"}`, wantErr: `"../secret.txt" contains a .. path element`},
		{name: "absolute", def: cat, args: `{"file":"/etc/passwd"}`, wantErr: `"/etc/passwd" is an absolute path`},
		{name: "symlink outside", def: cat, args: `{"file":"link.txt"}`, wantErr: `"link.txt" resolves outside the workspace`},
		{name: "through a symlinked directory", def: cat, args: `{"file":"up/secret.txt"}`, wantErr: "resolves outside the workspace"},
		{name: "new file under a symlinked directory", def: cat, args: `{"file":"up/new/file.txt"}`, wantErr: "resolves outside the workspace"},
		{name: "dangling symlink", def: cat, args: `{"file":"dangling"}`, wantErr: "cannot be resolved"},
		{name: "element made absolute by joining", def: ToolDef{Name: "c", Kind: "command", Argv: []string{"cat", "{dir}/{file}"}, Parameters: schema("dir", "file")},
			args: `{"dir":"","file":"etc/passwd"}`, wantErr: `"/etc/passwd" is an absolute path`},
		{name: "option injection", def: cat, args: `{"file":"-n"}`, wantErr: "could be read as an option"},
		{name: "dash value after --", def: ToolDef{Name: "c", Kind: "command", Argv: []string{"cat", "--", "{file}"}, Parameters: schema("file")},
			args: `{"file":"-n"}`, want: "dash file\n"},
		{name: "non-zero exit", def: cat, args: `{"file":"missing.txt"}`, wantErr: "failed with exit status 1; output: cat: missing.txt: No such file"},
		{name: "output capped", def: echo, policy: func(p *CommandPolicy) { p.MaxOutputChars = 10 },
			args: `{"text":"` + strings.Repeat("a", 30) + `"}`, want: "aaaaaaaaaa\n[truncated: 21 more characters]"},
		{name: "cap counts characters", def: ToolDef{Name: "e", Kind: "command", Argv: []string{"echo", "{text}"}, Parameters: schema("text"), MaxResponseChars: 5},
			args: `{"text":"héllo wörld"}`, want: "héllo\n[truncated: 7 more characters]"},
		{name: "script in the workspace", def: ToolDef{Name: "s", Kind: "command", Argv: []string{"./hello.sh", "{who}"}, Parameters: schema("who")},
			args: `{"who":"me"}`, want: "hello from ./hello.sh me\n"},
		{name: "program not installed", def: ToolDef{Name: "x", Kind: "command", Argv: []string{"switchboard-no-such-program"}},
			wantErr: "program not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := policy
			if tc.policy != nil {
				tc.policy(&p)
			}
			tool := buildTool(t, tc.def, Env{Command: p})
			got, err := tool.Fn(t.Context(), json.RawMessage(tc.args))
			if strings.Contains(got+errText(err), "top secret") {
				t.Fatalf("the secret leaked: %q, %v", got, err)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %q, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestCommandKindDisabled(t *testing.T) {
	ws, _ := workspace(t)
	marker := filepath.Join(filepath.Dir(ws), "ran")
	tool := buildTool(t, ToolDef{Name: "touch", Kind: "command", Argv: []string{"touch", marker}}, Env{Command: CommandPolicy{Workspace: ws}})
	_, err := tool.Fn(t.Context(), nil)
	if err == nil || err.Error() != "command tools are disabled; the operator can enable them with tools.command.enabled" {
		t.Errorf("got %v, want the disabled error", err)
	}
	for _, p := range []string{marker, ws} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists (%v); a disabled tool must not run or prepare anything", p, err)
		}
	}
}

func TestCommandKindEnvironment(t *testing.T) {
	t.Setenv("SWITCHBOARD_LEAK_TEST", "leaky")
	ws, _ := workspace(t)
	tool := buildTool(t, ToolDef{Name: "env", Kind: "command", Argv: []string{"env"}}, Env{Command: CommandPolicy{Enabled: true, Workspace: ws}})
	got, err := tool.Fn(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for line := range strings.Lines(got) {
		name, _, _ := strings.Cut(line, "=")
		names = append(names, name)
	}
	if want := []string{"PATH", "LANG", "HOME", "TMPDIR"}; !reflect.DeepEqual(names, want) {
		t.Errorf("got variables %v, want %v", names, want)
	}
	// HOME is a private folder outside the workspace, TMPDIR in it.
	home := ""
	for line := range strings.Lines(got) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "HOME="); ok {
			home = v
		}
	}
	if !filepath.IsAbs(home) || strings.HasPrefix(home, filepath.Dir(ws)) {
		t.Errorf("HOME=%q, want a folder outside the workspace %s", home, ws)
	}
	for _, want := range []string{"LANG=C.UTF-8\n", "TMPDIR=" + home + "/tmp\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("got env %q, want it to contain %q", got, want)
		}
	}
	if _, err := os.Stat(home); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the private home %s outlived its run: %v", home, err)
	}
	if strings.Contains(got, "leaky") {
		t.Errorf("the environment leaked: %q", got)
	}
}

func TestCommandKindTimeout(t *testing.T) {
	tests := []struct {
		name       string
		policy     time.Duration
		def        time.Duration
		wantSuffix string
	}{
		{"policy timeout", 200 * time.Millisecond, 0, "timed out after 200ms"},
		{"tool timeout is smaller", 30 * time.Second, 200 * time.Millisecond, "timed out after 200ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ws, _ := workspace(t)
			// The outer context fails the test (instead of hanging it) if
			// the kill does not happen; the tool's error must name its own.
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			tool := buildTool(t, ToolDef{Name: "nap", Kind: "command", Argv: []string{"sh", "-c", "echo started; sleep 30"}, Timeout: tc.def},
				Env{Command: CommandPolicy{Enabled: true, Workspace: ws, Timeout: tc.policy}})
			_, err := tool.Fn(ctx, nil)
			if err == nil || !strings.Contains(err.Error(), tc.wantSuffix) || !strings.Contains(err.Error(), "output so far: started") {
				t.Fatalf("got %v, want an error saying %q with the output so far", err, tc.wantSuffix)
			}
		})
	}
}

func TestCommandKindBackgroundProcess(t *testing.T) {
	ws, _ := workspace(t)
	tool := buildTool(t, ToolDef{Name: "bg", Kind: "command", Argv: []string{"sh", "-c", "sleep 30 & echo done"}},
		Env{Command: CommandPolicy{Enabled: true, Workspace: ws}})
	got, err := tool.Fn(t.Context(), nil)
	if want := "done\n\n[a background process it started was stopped]"; err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
}

func TestCommandKindCancelledTurn(t *testing.T) {
	ws, _ := workspace(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	tool := buildTool(t, ToolDef{Name: "nap", Kind: "command", Argv: []string{"sleep", "30"}},
		Env{Command: CommandPolicy{Enabled: true, Workspace: ws}})
	_, err := tool.Fn(ctx, nil)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "nap was stopped") {
		t.Errorf("got %v, want nap stopped by the cancelled turn", err)
	}
}
