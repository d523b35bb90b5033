//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// run runs script with sh in a fresh folder and returns its outcome and
// output. The test binary is the launcher (this package's init).
func run(t *testing.T, ctx context.Context, script string) (Outcome, string, string) {
	t.Helper()
	dir := t.TempDir()
	var out bytes.Buffer
	oc, err := Run(ctx, Spec{Program: "/bin/sh", Args: []string{"sh", "-c", script}, Dir: dir,
		Env: []string{"PATH=/usr/bin:/bin", "FOO=bar"}}, &out, &out)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return oc, out.String(), dir
}

func TestRunEnvironmentAndUID(t *testing.T) {
	oc, out, _ := run(t, t.Context(), `env; id -u; id -G`)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var names []string
	for _, l := range lines[:len(lines)-2] {
		name, _, _ := strings.Cut(l, "=")
		if name != "PWD" && name != "SHLVL" && name != "_" { // the shell's own
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if got, want := strings.Join(names, " "), "FOO HOME PATH TMPDIR"; got != want {
		t.Errorf("variables %q, want %q:\n%s", got, want, out)
	}
	uid := lines[len(lines)-2]
	if os.Geteuid() == 0 && (uid != "65534" || lines[len(lines)-1] != "65534") {
		t.Errorf("under root: uid %s, groups %s; want 65534 and only 65534", uid, lines[len(lines)-1])
	}
	if !oc.Confirmed || oc.ExitCode != 0 || oc.Leftovers != 0 {
		t.Errorf("outcome %+v", oc)
	}
}

func TestRunExitCode(t *testing.T) {
	if oc, _, _ := run(t, t.Context(), "exit 3"); oc.ExitCode != 3 || oc.Signal != "" || !oc.Confirmed {
		t.Errorf("outcome %+v, want exit 3", oc)
	}
	if oc, _, _ := run(t, t.Context(), "kill -TERM $$"); oc.ExitCode != -1 || oc.Signal != "SIGTERM" {
		t.Errorf("outcome %+v, want SIGTERM", oc)
	}
}

// Every process the program started is stopped when it ends, and when the
// run is stopped, setsid ones included; the outcome counts them.
func TestRunStopsEveryDescendant(t *testing.T) {
	// Three left behind: a background job, a setsid one, and one whose
	// parent (the inner sh) has exited already.
	script := `sleep 1000 & setsid sleep 1000 & sh -c 'setsid sleep 1000 &'; echo started`
	oc, out, _ := run(t, t.Context(), script)
	if out != "started\n" || !oc.Confirmed || oc.Leftovers != 3 || oc.ProgramStopped {
		t.Errorf("ended: %q, %+v; want 3 leftovers stopped", out, oc)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	oc, out, _ = run(t, ctx, script+"; sleep 1000")
	if !oc.Confirmed || !oc.ProgramStopped || oc.Leftovers != 4 || oc.Signal != "SIGKILL" {
		t.Errorf("stopped: %q, %+v; want the program and 4 others stopped", out, oc)
	}
}

// Landlock: the program writes its folder and its home, reads the system,
// and neither reads nor writes other folders its uid could.
func TestRunLandlock(t *testing.T) {
	if LandlockABI() == 0 {
		testkit.Missing(t, "this kernel has no Landlock")
	}
	other := t.TempDir()
	for _, d := range []string{other, filepath.Dir(other)} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(other, "open.txt"), []byte("readable by all"), 0o666); err != nil {
		t.Fatal(err)
	}
	oc, out, dir := run(t, t.Context(), `cat `+other+`/open.txt; echo x > `+other+`/new.txt; echo in > in.txt; echo h > "$HOME/h"; cat "$HOME/h"; head -c 4 /etc/hostname >/dev/null && echo system`)
	if oc.Landlock != LandlockABI() {
		t.Errorf("landlock ABI %d, want %d", oc.Landlock, LandlockABI())
	}
	if strings.Contains(out, "readable by all") {
		t.Errorf("read a folder outside: %q", out)
	}
	if _, err := os.Stat(filepath.Join(other, "new.txt")); err == nil {
		t.Errorf("wrote a folder outside: %q", out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "in.txt")); err != nil || string(b) != "in\n" {
		t.Errorf("its own folder: %q, %v (%q)", b, err, out)
	}
	if !strings.Contains(out, "h\nsystem\n") {
		t.Errorf("home or system not usable: %q", out)
	}
}

// BenchmarkRun is the cost of a confined run of /bin/true (the launcher's
// start, Landlock, the sweep), against BenchmarkExec, the same without.
func BenchmarkRun(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		if _, err := Run(b.Context(), Spec{Program: "/bin/true", Args: []string{"true"}, Dir: dir}, io.Discard, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExec(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// Without connect_ports a command opens no TCP connection (it cannot reach
// the gateway's own HTTP API on loopback); a listed port it may reach.
func TestRunNetwork(t *testing.T) {
	if LandlockABI() < 4 {
		testkit.Missing(t, "this kernel's Landlock has no network rules (ABI 4+)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("hello from the gateway\n"))
			c.Close()
		}
	}()
	script := fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && head -n 1 <&3 || echo refused`, port)
	for _, tc := range []struct {
		name  string
		ports []uint16
		want  string
	}{
		{"no ports", nil, "refused"},
		{"another port", []uint16{uint16(port) + 1}, "refused"},
		{"its port", []uint16{uint16(port)}, "hello from the gateway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := Run(t.Context(), Spec{Program: "/bin/bash", Args: []string{"bash", "-c", script}, Dir: t.TempDir(),
				Env: []string{"PATH=/usr/bin:/bin"}, ConnectPorts: tc.ports}, &out, &out)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Fatalf("output %q; want %q", out.String(), tc.want)
			}
		})
	}
}
