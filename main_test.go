package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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

// A plain `go build` in a checkout names the commit it was built from (Go
// stamps a pseudo-version such as v0.0.0-20261203172919-fcce0de56ff9, with
// "+dirty" for uncommitted changes): the version without -X main.version.
// It builds with -buildvcs=auto, Go's default, because these machines set
// -buildvcs=false in Go's env file.
func TestVersionFromCheckout(t *testing.T) {
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", args...).Output()
		return strings.TrimSpace(string(out)), err
	}
	rev, err := git("rev-parse", "HEAD")
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v (the test needs a git checkout, as CI's clean clone is)", err)
	}
	bin := filepath.Join(t.TempDir(), "switchboard")
	build := exec.Command("go", goBuildArgs("build", "-buildvcs=auto", "-o", bin, ".")...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// Read after the build: what it stamped is the tree as it was then.
	status, _ := git("status", "--porcelain")
	dirty := status != ""
	want := rev[:12] // in the pseudo-version
	if tag, err := git("describe", "--tags", "--exact-match"); err == nil && tag != "" {
		want = tag
	}
	// Go stamps only a checkout whose .git is a directory, not a linked
	// worktree's .git file: there the build says "dev".
	top, _ := git("rev-parse", "--show-toplevel")
	if fi, err := os.Stat(filepath.Join(top, ".git")); err != nil || !fi.IsDir() {
		t.Logf("%s/.git is not a directory (a linked worktree): go build stamps no revision", top)
		out, err := exec.Command(bin, "version").Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != "switchboard dev" {
			t.Errorf("switchboard version = %q, %v; want \"switchboard dev\" without a stamp", got, err)
		}
		return
	}
	for _, arg := range []string{"version", "--version", "-v"} {
		out, err := exec.Command(bin, arg).Output()
		got := strings.TrimSpace(string(out))
		if err != nil || !strings.HasPrefix(got, "switchboard v") || !strings.Contains(got, want) ||
			strings.HasSuffix(got, "+dirty") != dirty {
			t.Errorf("switchboard %s = %q, %v; want the build's version naming %s, dirty %v", arg, got, err, want, dirty)
		}
	}
}

// goBuildArgs are the arguments of a go command that builds, with -race
// when this test binary has it: the same flags as the test run, so the
// build finds its dependencies compiled in Go's cache.
func goBuildArgs(cmd string, args ...string) []string {
	if raceBuild {
		return append([]string{cmd, "-race"}, args...)
	}
	return append([]string{cmd}, args...)
}
