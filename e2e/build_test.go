package e2e

// The binary as people build it: `go install module@version` through a
// module proxy, and `go build` in a checkout. Both build the module's main
// package (at moduleRoot) with the go command, so they take a while.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// `go install <module>@<version>` works: the module path is a real
// module path, so the go command resolves it through a module proxy and
// builds the binary, which reports that version. The proxy is a directory
// (GOPROXY=file://…) holding this checkout's HEAD as the module's zip;
// every dependency comes from the local module cache, so nothing leaves
// the machine.
func TestGoInstallFromModuleProxy(t *testing.T) {
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = moduleRoot // git archive takes the working directory's subtree
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %v: %v", name, args, err)
		}
		return strings.TrimSpace(string(out))
	}
	module := run("go", "list", "-m")
	modcache := run("go", "env", "GOMODCACHE")
	rev := run("git", "rev-parse", "HEAD")
	at, err := time.Parse(time.RFC3339, run("git", "show", "-s", "--format=%cI", "HEAD"))
	if err != nil {
		t.Fatal(err)
	}
	// A pseudo-version of HEAD: a version of its own for every commit, so
	// the module cache never holds another zip under the same version.
	version := "v0.0.0-" + at.UTC().Format("20060102150405") + "-" + rev[:12]

	proxy := t.TempDir()
	dir := filepath.Join(proxy, filepath.FromSlash(module), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run("git", "archive", "--format=zip", "--prefix="+module+"@"+version+"/", "-o", filepath.Join(dir, version+".zip"), "HEAD")
	show := exec.Command("git", "show", "HEAD:go.mod")
	show.Dir = moduleRoot
	gomod, err := show.Output()
	if err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(map[string]string{"Version": version, "Time": at.UTC().Format(time.RFC3339)})
	for name, data := range map[string][]byte{version + ".mod": gomod, version + ".info": info, "list": []byte(version + "\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	gobin := t.TempDir()
	install := exec.Command("go", goBuildArgs("install", module+"@"+version)...)
	install.Dir = t.TempDir() // outside this module, as a user runs it
	install.Env = append(os.Environ(),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(modcache, "cache", "download")),
		"GOSUMDB=off", "GOBIN="+gobin, "GOTOOLCHAIN=local", "GOFLAGS=")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install %s@%s: %v\n%s", module, version, err, out)
	}
	out, err := exec.Command(filepath.Join(gobin, "switchboard"), "version").Output()
	if got, want := strings.TrimSpace(string(out)), "switchboard "+version; err != nil || got != want {
		t.Errorf("the installed binary's version = %q, %v; want %q", got, err, want)
	}
}

// A plain `go build` in a checkout names the commit it was built from (Go
// stamps a pseudo-version such as v0.0.0-20261203172919-fcce0de56ff9, with
// "+dirty" for uncommitted changes): the version without -X main.version.
// It builds with -buildvcs=auto, Go's default, because these machines set
// -buildvcs=false in Go's env file.
func TestVersionFromCheckout(t *testing.T) {
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = moduleRoot
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	rev, err := git("rev-parse", "HEAD")
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v (the test needs a git checkout, as CI's clean clone is)", err)
	}
	bin := checkoutBinary(t)
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

// Package prefault's init runs before the initialisers of the libraries
// that touch the most heap at start (GODEBUG=inittrace=1 lists them in the
// order they run): otherwise the heap it fills would be filled already, page
// by page. Go orders initialisers by dependencies and then by import path,
// so a new import of prefault's, or a library that sorts before it, could
// move it.
func TestPrefaultInitsBeforeTheLibraries(t *testing.T) {
	cmd := exec.Command(checkoutBinary(t), "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var trace strings.Builder
	cmd.Stderr = &trace
	if err := cmd.Run(); err != nil {
		t.Fatalf("switchboard version: %v\n%s", err, trace.String())
	}
	at := map[string]int{} // package → its place in the order
	for i, line := range strings.Split(trace.String(), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "init" {
			at[f[1]] = i
		}
	}
	const prefault = "github.com/switchboard-gateway/switchboard/internal/prefault"
	p, ok := at[prefault]
	if !ok {
		t.Fatalf("no init of %s in the trace:\n%s", prefault, trace.String())
	}
	for _, lib := range []string{
		"github.com/yuin/goldmark/extension", "github.com/yuin/goldmark/util", "github.com/yuin/goldmark/parser",
		"codeberg.org/readeck/go-readability/v2", "maunium.net/go/mautrix/id", "golang.org/x/net/html",
		"github.com/prometheus/procfs", "github.com/google/jsonschema-go/jsonschema",
	} {
		l, ok := at[lib]
		if !ok {
			t.Errorf("no init of %s in the trace (is it still linked? update this list)", lib)
			continue
		}
		if l < p {
			t.Errorf("%s initialises before %s", lib, prefault)
		}
	}
}

// checkout is the binary `go build` makes in this checkout (with
// -buildvcs=auto, see TestVersionFromCheckout), built once for the tests
// that run it; TestMain removes its directory.
var checkout struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// checkoutBinary builds the checkout's binary, the first time, and returns
// its path.
func checkoutBinary(t *testing.T) string {
	t.Helper()
	checkout.once.Do(func() {
		if checkout.dir, checkout.err = os.MkdirTemp("", "switchboard-build-"); checkout.err != nil {
			return
		}
		checkout.bin = filepath.Join(checkout.dir, "switchboard")
		build := exec.Command("go", goBuildArgs("build", "-buildvcs=auto", "-o", checkout.bin, ".")...)
		build.Dir = moduleRoot
		if out, err := build.CombinedOutput(); err != nil {
			checkout.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if checkout.err != nil {
		t.Fatal(checkout.err)
	}
	return checkout.bin
}

// moduleRoot is the module's root directory, where package main is,
// relative to this package's directory (where go test runs its tests).
const moduleRoot = ".."

// goBuildArgs are the arguments of a go command that builds, with -race
// when this test binary has it: the same flags as the test run, so the
// build finds its dependencies compiled in Go's cache.
func goBuildArgs(cmd string, args ...string) []string {
	if raceBuild {
		return append([]string{cmd, "-race"}, args...)
	}
	return append([]string{cmd}, args...)
}
