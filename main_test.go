package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
)

// mainChildEnv makes the test binary run main itself (with the arguments
// after "--"), so the test sees the process as the binary runs it.
const mainChildEnv = "SWITCHBOARD_MAIN_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(mainChildEnv) != "" {
		for i, a := range os.Args {
			if a == "--" {
				os.Args = append([]string{os.Args[0]}, os.Args[i+1:]...)
				break
			}
		}
		main()
		return
	}
	os.Exit(m.Run())
}

// The binary hands its arguments and version to the command line and
// exits with its code.
func TestMainRunsTheCommandLine(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"version"}, 0, "switchboard dev\n"},
		{[]string{"--config"}, 2, ""},
		{[]string{"fly"}, 2, ""},
	} {
		cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, tt.args...)...)
		cmd.Env = append(os.Environ(), mainChildEnv+"=1")
		out, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tt.code || !strings.HasPrefix(string(out), tt.out) {
			t.Errorf("switchboard %v: exit %d, stdout %q; want %d, %q", tt.args, code, out, tt.code, tt.out)
		}
	}
}

// SIGTERM stops serve cleanly (exit 0, "stopped" logged), and a second
// SIGTERM sent while it stops changes nothing: the binary's signal
// handling, which main sets up beside the start rather than before it.
func TestSIGTERMStopsServe(t *testing.T) {
	const token = "123:main-test"
	tg := tgfake.Start(token)
	defer tg.Close()
	model := testkit.Start("127.0.0.1:0")
	defer model.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	yaml := fmt.Sprintf(`llm:
  base_url: %s
  model: m
store:
  path: %s
http:
  listen: 127.0.0.1:0
channels:
  telegram:
    enabled: true
    token: "%s"
    api_endpoint: %s
    allow_users: [1]
`, model.URL, filepath.Join(dir, "sb.db"), token, tg.URL)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$", "--", "serve", "--config", cfg)
	cmd.Env = append(os.Environ(), mainChildEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	await := func(what string) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("serve's log ended before %q", what)
				}
				if strings.Contains(l, what) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no %q in serve's log", what)
			}
		}
	}
	await("switchboard serving")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	await("shutting down")
	_ = cmd.Process.Signal(syscall.SIGTERM) // ignored while it stops (it may be gone)
	await("msg=stopped")
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v; want exit 0", err)
	}
}
