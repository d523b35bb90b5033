package skills

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The gateway's own secrets, as an operator passes them in the
// environment; clearly fake.
var confineSecrets = map[string]string{
	"OPENAI_API_KEY":         "sk-confine-FAKE-0123456789abcdef",
	"TELEGRAM_BOT_TOKEN":     "7300000009:AAF-confine-FAKE_0123456789abcdef",
	"DISCORD_BOT_TOKEN":      "confine-FAKE-discord-token.0123456789",
	"SWITCHBOARD_HTTP_TOKEN": "confine-FAKE-http-token-0123456789",
}

// A command tool's program sees none of the gateway's environment: not by
// listing it, not through a shell the skill runs, not by naming its own
// or the gateway's /proc environ file as an argument (absolute, through
// .., or through a link planted in the workspace).
func TestCommandToolSeesNoGatewaySecrets(t *testing.T) {
	for k, v := range confineSecrets {
		t.Setenv(k, v)
	}
	ws, _ := workspace(t)
	policy := CommandPolicy{Enabled: true, Workspace: ws, Timeout: 10 * time.Second}
	buildTool(t, ToolDef{Name: "init", Kind: "command", Argv: []string{"true"}}, Env{Command: policy})
	if err := os.Symlink("/proc/self/environ", filepath.Join(ws, "environ")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc", filepath.Join(ws, "proc")); err != nil {
		t.Fatal(err)
	}
	parent := "/proc/" + strconv.Itoa(os.Getpid()) + "/environ"
	env := ToolDef{Name: "env", Kind: "command", Argv: []string{"env"}}
	shell := ToolDef{Name: "shell_echo", Kind: "command", Argv: []string{"sh", "-c", `echo "key=[$OPENAI_API_KEY] tg=[$TELEGRAM_BOT_TOKEN] dc=[$DISCORD_BOT_TOKEN] http=[$SWITCHBOARD_HTTP_TOKEN]"`}}
	cat := ToolDef{Name: "cat", Kind: "command", Argv: []string{"cat", "{file}"}, Parameters: schema("file")}
	tests := []struct {
		name    string
		def     ToolDef
		args    string
		want    string // in the output
		wantErr string
	}{
		{name: "env lists only its own four variables", def: env, want: "LANG=C.UTF-8\nHOME=/"},
		{name: "a shell expands the names to nothing", def: shell, want: "key=[] tg=[] dc=[] http=[]\n"},
		{name: "its own environ file", def: cat, args: `{"file":"/proc/self/environ"}`, wantErr: "is an absolute path"},
		{name: "the gateway's environ file", def: cat, args: `{"file":"` + parent + `"}`, wantErr: "is an absolute path"},
		{name: "up and over to /proc", def: cat, args: `{"file":"../../../../../../proc/self/environ"}`, wantErr: "contains a .. path element"},
		{name: "a link to environ", def: cat, args: `{"file":"environ"}`, wantErr: "resolves outside the workspace"},
		{name: "a link to /proc", def: cat, args: `{"file":"proc/1/environ"}`, wantErr: "resolves outside the workspace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tool := buildTool(t, tc.def, Env{Command: policy})
			got, err := tool.Fn(t.Context(), json.RawMessage(tc.args))
			for name, secret := range confineSecrets {
				if strings.Contains(got+errText(err), secret) || strings.Contains(got, name+"=") {
					t.Fatalf("%s reached the command: %q, %v", name, got, err)
				}
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %q, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, %v; want output containing %q", got, err, tc.want)
			}
		})
	}
}

// The program a command tool runs is the one the skill names, resolved
// when the skill loads; the model's arguments are single argv elements,
// never a shell, never a program of their own choosing, never an option.
func TestCommandToolModelCannotChooseTheProgram(t *testing.T) {
	ws, secret := workspace(t)
	policy := CommandPolicy{Enabled: true, Workspace: ws, Timeout: 10 * time.Second}
	echo := ToolDef{Name: "echo", Kind: "command", Argv: []string{"echo", "{a}", "{b}"}, Parameters: schema("a", "b")}
	tool := buildTool(t, echo, Env{Command: policy})
	meta := "$(touch pwned1); `touch pwned2` | touch pwned3 && touch pwned4 > pwned5"
	tests := []struct {
		name, args, want, wantErr string
	}{
		{name: "shell syntax is text", args: `{"a":` + strconv.Quote(meta) + `}`, want: meta + " \n"},
		{name: "another program is just a word", args: `{"a":"sh","b":"rm"}`, want: "sh rm\n"},
		{name: "a program by path is refused", args: `{"a":"/bin/sh"}`, wantErr: "is an absolute path"},
		{name: "an option is refused", args: `{"a":"sh","b":"-c"}`, wantErr: "could be read as an option"},
		{name: "a NUL cannot split an element", args: `{"a":"x\u0000-rf"}`, wantErr: "contains a NUL byte"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tool.Fn(t.Context(), json.RawMessage(tc.args))
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
	entries, err := os.ReadDir(ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "pwned") {
			t.Errorf("a shell ran: %s exists in the workspace", e.Name())
		}
	}

	// The program can never be a placeholder, and a skill naming a fixed
	// directory keeps arguments inside it.
	if _, err := (ToolDef{Name: "run", Kind: "command", Argv: []string{"{program}", "x"}, Parameters: schema("program")}).Build("skill:test", Env{Command: policy}); err == nil ||
		!strings.Contains(err.Error(), "argv[0]: the program cannot be a placeholder") {
		t.Errorf("a placeholder program: %v", err)
	}
	fixed := buildTool(t, ToolDef{Name: "ls", Kind: "command", Argv: []string{"cat", filepath.Dir(secret) + "/ws/{file}"}, Parameters: schema("file")}, Env{Command: policy})
	if got, err := fixed.Fn(t.Context(), json.RawMessage(`{"file":"../secret.txt"}`)); err == nil || !strings.Contains(err.Error(), "contains a .. path element") || strings.Contains(got, "top secret") {
		t.Errorf("a fixed directory left through ..: %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "pwned1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pwned1: %v", err)
	}
}
