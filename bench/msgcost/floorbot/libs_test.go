package main

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/switchboard-gateway/switchboard"

// TestLibsAreSwitchboards checks that libs.go imports exactly the packages
// switchboard's own packages import (those of the binary, with its goolm
// tag), so that the floor on switchboard's libraries initialises what
// switchboard does, no more and no less.
func TestLibsAreSwitchboards(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	list := func(args ...string) []string {
		t.Helper()
		out, err := exec.Command(goTool, append([]string{"list", "-tags", "goolm"}, args...)...).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
		}
		return strings.Fields(string(out))
	}
	var own []string
	for _, p := range list("-deps", module) {
		if p == module || strings.HasPrefix(p, module+"/") {
			own = append(own, p)
		}
	}
	if len(own) < 10 {
		t.Fatalf("go list found %d of switchboard's packages in its binary: %v", len(own), own)
	}
	want := map[string]bool{}
	for _, p := range list(append([]string{"-f", `{{join .Imports " "}}`}, own...)...) {
		if p != "C" && p != module && !strings.HasPrefix(p, module+"/") {
			want[p] = true
		}
	}

	f, err := parser.ParseFile(token.NewFileSet(), "libs.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, s := range f.Imports {
		p, err := strconv.Unquote(s.Path.Value)
		if err != nil {
			t.Fatal(err)
		}
		have[p] = true
	}
	var missing, extra []string
	for p := range want {
		if !have[p] {
			missing = append(missing, p)
		}
	}
	for p := range have {
		if !want[p] {
			extra = append(extra, p)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	if len(missing) > 0 {
		t.Errorf("libs.go lacks %d package(s) switchboard imports; add them: %s", len(missing), strings.Join(missing, " "))
	}
	if len(extra) > 0 {
		t.Errorf("libs.go imports %d package(s) switchboard no longer does; remove them: %s", len(extra), strings.Join(extra, " "))
	}
	if len(want) < 50 {
		t.Errorf("switchboard's packages import %d packages; go list's answer looks wrong", len(want))
	}
}
