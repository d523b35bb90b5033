package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
		out, err := exec.Command(name, args...).Output()
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
	gomod, err := exec.Command("git", "show", "HEAD:go.mod").Output()
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
