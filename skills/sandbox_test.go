package skills

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/sandbox"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// sandboxWorkspace is a workspace (created) whose parents others may
// pass, and the policy for it.
func sandboxWorkspace(t *testing.T) (string, CommandPolicy) {
	t.Helper()
	ws, _ := workspace(t)
	policy := CommandPolicy{Enabled: true, Workspace: ws, Timeout: 10 * time.Second}
	buildTool(t, ToolDef{Name: "init", Kind: "command", Argv: []string{"true"}}, Env{Command: policy})
	return ws, policy
}

// GNU sed runs a shell for its e command; a model-chosen sed script must
// not: the sandbox passes --sandbox to sed (and gawk), which refuses e, r
// and w. Issue 29, finding 2.
func TestCommandSedScriptRunsNoShell(t *testing.T) {
	ws, policy := sandboxWorkspace(t)
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sed := buildTool(t, ToolDef{Name: "lines", Kind: "command", Argv: []string{"sed", "-n", "{range}", "notes.txt"}, Parameters: schema("range")},
		Env{Command: policy})
	for _, script := range []string{"1e id", "1e touch pwned-e", "1w pwned-w", "1r /etc/passwd"} {
		t.Run(script, func(t *testing.T) {
			args, _ := json.Marshal(map[string]string{"range": script})
			got, err := sed.Fn(t.Context(), args)
			if strings.Contains(got+errText(err), "uid=") || strings.Contains(got, "root:") {
				t.Fatalf("sed ran the script's command: %q, %v", got, err)
			}
			if err == nil || !strings.Contains(err.Error(), "disabled in sandbox mode") {
				t.Fatalf("got %q, %v; want sed's sandbox refusal", got, err)
			}
		})
	}
	for _, f := range []string{"pwned-e", "pwned-w"} {
		if _, err := os.Stat(filepath.Join(ws, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists: sed ran its command (%v)", f, err)
		}
	}
	// An ordinary range still works.
	if got, err := sed.Fn(t.Context(), json.RawMessage(`{"range":"2p"}`)); err != nil || got != "two\n" {
		t.Errorf("sed -n 2p: %q, %v", got, err)
	}
}

// An awk program the model writes reads the environ files of its parent,
// of the gateway and its own: none holds a gateway secret. The stand-in
// gateway (a re-run of this test binary) got the secrets at exec, as a
// real one does. Issue 29, finding 2.
func TestCommandAwkReadsNoGatewaySecret(t *testing.T) {
	ws, _ := sandboxWorkspace(t)
	prog := `BEGIN {
  getline st < "/proc/self/stat"; split(st, a, ") "); split(a[2], b, " ")
  n = split("/proc/" b[2] "/environ /proc/%[1]d/environ /proc/self/environ /proc/%[1]d/task/%[1]d/environ", f, " ")
  for (i = 1; i <= n; i++) { while ((getline line < f[i]) > 0) print f[i] ": " line; close(f[i]) }
  print "awk ran as", ENVIRON["HOME"]
}`
	args, _ := json.Marshal(map[string]string{"program": prog})
	spec, _ := json.Marshal(gatewayHelper{Workspace: ws,
		Tool: ToolDef{Name: "awk_tool", Kind: "command", Argv: []string{"awk", "{program}"}, Parameters: schema("program")},
		Args: string(args)})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), exe)
	cmd.Env = append(os.Environ(), gatewayHelperEnv+"="+string(spec))
	for k, v := range confineSecrets {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the stand-in gateway: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "awk ran as") {
		t.Fatalf("the awk program did not run:\n%s", out)
	}
	for name, secret := range confineSecrets {
		if strings.Contains(string(out), secret) {
			t.Errorf("%s reached the awk program:\n%s", name, out)
		}
	}
}

// A setsid child leaves the program's process group and session; it is
// still stopped when the program times out or ends, and the result says
// so. Issue 29, finding 8.
func TestCommandSetsidChildIsStopped(t *testing.T) {
	ws, policy := sandboxWorkspace(t)
	// The shell waits until the escaped child has written its pid.
	escape := `setsid sh -c 'echo $$ > leftover.pid; exec sleep 1000' </dev/null >/dev/null 2>&1 & ` +
		`until [ -s leftover.pid ]; do sleep 0.01; done; echo started; `
	tests := []struct {
		name    string
		script  string
		timeout time.Duration
		want    string // in the result or the error
	}{
		{"timed out", escape + "sleep 30", 2 * time.Second, "timed out after 2s and was stopped, with 2 processes it started; output so far: started"},
		{"ended", escape + "echo done", 0, "started\ndone\n\n[a background process it started was stopped]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(filepath.Join(ws, "leftover.pid"))
			p := policy
			if tc.timeout > 0 {
				p.Timeout = tc.timeout
			}
			tool := buildTool(t, ToolDef{Name: "escape", Kind: "command", Argv: []string{"sh", "-c", tc.script}}, Env{Command: p})
			got, err := tool.Fn(t.Context(), nil)
			b, rerr := os.ReadFile(filepath.Join(ws, "leftover.pid"))
			pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
			if rerr != nil || perr != nil || pid <= 1 {
				t.Fatalf("no pid from the setsid child: %q, %v, %v (result %q, %v)", b, rerr, perr, got, err)
			}
			alive := syscall.Kill(pid, 0) == nil
			if alive {
				t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
				if st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); !strings.Contains(string(st), ") Z ") {
					t.Errorf("the setsid child %d survived the tool: %q, %v", pid, got, err)
				}
			}
			if !strings.Contains(got+errText(err), tc.want) {
				t.Errorf("got %q, %v; want it to say %q", got, err, tc.want)
			}
		})
	}
}

// Landlock keeps a command's writes in its working folder (and private
// home): a folder outside that anyone may write stays untouched. The
// kernel here has Landlock; under CI=true its absence fails the test.
// Issue 29, finding 2.
func TestCommandCannotWriteOutsideItsFolder(t *testing.T) {
	if abi := sandbox.LandlockABI(); abi == 0 {
		testkit.Missing(t, "this kernel has no Landlock (Linux 5.13+, lsm=landlock): commands are not confined to their folder")
	}
	ws, policy := sandboxWorkspace(t)
	outside := filepath.Join(filepath.Dir(ws), "open")
	if err := os.Mkdir(outside, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(outside, 0o777); err != nil { // past the umask: only Landlock stands in the way
		t.Fatal(err)
	}
	target := filepath.Join(outside, "pwned")
	tool := buildTool(t, ToolDef{Name: "write", Kind: "command",
		Argv: []string{"sh", "-c", `echo x > "$1"; echo inside > inside.txt; echo home > "$HOME/h" && cat "$HOME/h"`, "sh", target}}, Env{Command: policy})
	got, err := tool.Fn(t.Context(), nil)
	if _, serr := os.Stat(target); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("the command wrote %s outside its folder: %q, %v", target, got, err)
	}
	if !strings.Contains(got, "Permission denied") || !strings.Contains(got, "home") {
		t.Errorf("got %q, %v; want the outside write denied and the home writable", got, err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "inside.txt")); err != nil || string(b) != "inside\n" {
		t.Errorf("a write in the working folder: %q, %v", b, err)
	}
}

// A command tool reaches no TCP port but tools.command.connect_ports: not
// the gateway's own HTTP API on loopback, which a model-chosen URL could
// otherwise drive (approve a pairing, run the agent).
func TestCommandConnectsOnlyToItsPorts(t *testing.T) {
	if sandbox.LandlockABI() < 4 {
		testkit.Missing(t, "this kernel's Landlock has no network rules (ABI 4+)")
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("the gateway's dashboard"))
	}))
	defer api.Close()
	port, _ := strconv.Atoi(api.URL[strings.LastIndex(api.URL, ":")+1:])
	script := `exec 3<>/dev/tcp/127.0.0.1/` + strconv.Itoa(port) + ` && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && cat <&3 || echo refused`
	_, policy := sandboxWorkspace(t)
	for _, tc := range []struct {
		name  string
		ports []int
		want  string
	}{
		{"default: none", nil, "refused"},
		{"its port listed", []int{port}, "the gateway's dashboard"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := CommandPolicyOf(config.CommandTool{Enabled: true, Workspace: policy.Workspace, Timeout: policy.Timeout, ConnectPorts: tc.ports})
			tool := buildTool(t, ToolDef{Name: "fetch", Kind: "command", Argv: []string{"bash", "-c", script}}, Env{Command: p})
			got, err := tool.Fn(t.Context(), nil)
			if err != nil || !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
