package testkit

// Counted skips. `go test ./...` prints only "ok" for a package whose tests
// passed, skipped ones included, so a machine without PostgreSQL or
// Chromium looked like one that ran everything. A test that cannot run for
// want of something outside Go skips with SkipFor (or Missing, NeedPostgres),
// which counts it; the package's TestMain runs its tests with RunTests,
// which then prints one line per group, such as
//
//	store: 66 PostgreSQL tests skipped: SWITCHBOARD_TEST_PG_DSN is not set: start PostgreSQL: see .ci/run
//
// go test shows a passing package's output only with -v, so without -v the
// line goes to the go command's own output (see skipOutput).

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// skipGroup is what a group of skipped tests needs (kind, may be empty)
// and why it is not here.
type skipGroup struct{ kind, why string }

// skipLog counts the skips of this test binary.
type skipLog struct {
	mu     sync.Mutex
	groups []skipGroup
	tests  map[skipGroup][]string // skipped tests' names, in order
}

var skips skipLog

func (l *skipLog) add(kind, why, test string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := skipGroup{kind, why}
	if l.tests == nil {
		l.tests = map[skipGroup][]string{}
	}
	if _, ok := l.tests[g]; !ok {
		l.groups = append(l.groups, g)
	}
	l.tests[g] = append(l.tests[g], test)
}

// lines says, for package pkg, how many tests of each group skipped and
// why, naming the tests when there are at most three.
func (l *skipLog) lines(pkg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, g := range l.groups {
		tests := l.tests[g]
		noun := "tests"
		if len(tests) == 1 {
			noun = "test"
		}
		if g.kind != "" {
			noun = g.kind + " " + noun
		}
		names := ""
		if len(tests) <= 3 {
			names = " (" + strings.Join(tests, ", ") + ")"
		}
		out = append(out, fmt.Sprintf("%s: %d %s skipped%s: %s", pkg, len(tests), noun, names, g.why))
	}
	return out
}

// SkipFor skips t for want of something outside Go, and counts it for the
// line RunTests prints: kind is what the test needs ("PostgreSQL",
// "container engine"; may be empty), why one line saying what is missing
// and where to get it. It never fails a test: for tools CI must have, use
// Missing.
func SkipFor(t testing.TB, kind, why string) {
	t.Helper()
	skips.add(kind, firstLine(why), t.Name())
	t.Skipf("skipped: %s", why)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// RunTests runs the package's tests and then prints one line per group of
// tests skipped through SkipFor, and returns the exit code for os.Exit:
//
//	func TestMain(m *testing.M) { os.Exit(testkit.RunTests(m)) }
func RunTests(m *testing.M) int {
	code := m.Run()
	lines := skips.lines(packageName())
	if len(lines) == 0 {
		return code
	}
	w, done := skipOutput()
	defer done()
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	return code
}

// packageName is the test's package as go test ./... names it, relative to
// the module ("store", "channels/chatapi"): tests run in their package's
// directory.
func packageName() string {
	wd, err := os.Getwd()
	if err != nil {
		return "?"
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil || rel == "." {
				return filepath.Base(dir)
			}
			return filepath.ToSlash(rel)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return filepath.Base(wd)
		}
		dir = parent
	}
}

// skipOutput is where the skip lines go: the test binary's stdout with -v
// (go test shows it then), else the go command's own stdout when the
// binary runs under go test and that is a terminal or a pipe (see
// parentStdout), else stdout.
func skipOutput() (io.Writer, func()) {
	if !testing.Verbose() {
		if f := parentStdout(); f != nil {
			return f, func() { f.Close() }
		}
	}
	return os.Stdout, func() {}
}

// isGoCommand reports whether exe (a path) is the go command.
func isGoCommand(exe string) bool {
	return slices.Contains([]string{"go", "go.exe"}, filepath.Base(exe))
}
