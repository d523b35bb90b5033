package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestSkipLines(t *testing.T) {
	var l skipLog
	if got := l.lines("store"); len(got) != 0 {
		t.Fatalf("no skips: %q", got)
	}
	for i := range 66 {
		l.add("PostgreSQL", "SWITCHBOARD_TEST_PG_DSN is not set: see .ci/run", "TestX/"+string(rune('a'+i%26)))
	}
	l.add("", "chromium is not installed", "TestDashboard")
	l.add("container engine", "no engine", "TestA")
	l.add("container engine", "no engine", "TestB")
	want := []string{
		"store: 66 PostgreSQL tests skipped: SWITCHBOARD_TEST_PG_DSN is not set: see .ci/run",
		"store: 1 test skipped (TestDashboard): chromium is not installed",
		"store: 2 container engine tests skipped (TestA, TestB): no engine",
	}
	if got := l.lines("store"); !slices.Equal(got, want) {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The lines show in `go test ./...` without -v, which prints only "ok" for
// a passing package's own output.
func TestSkipLinesInGoTest(t *testing.T) {
	modes := []bool{false, true}
	if runtime.GOOS != "linux" {
		modes = []bool{true} // without -v the go command's output is found through /proc
	}
	root := ModuleRoot(t)
	for _, verbose := range modes {
		args := []string{"test", "-count=1", "./internal/testkit/testdata/skipdemo"}
		if verbose {
			args = append(args, "-v")
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput() // a pipe, as in CI's `go test ./... | tee`
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		for _, want := range []string{
			"internal/testkit/testdata/skipdemo: 2 PostgreSQL tests skipped (TestNeedsPostgres/a, TestNeedsPostgres/b): DEMO_DSN is not set: see .ci/run\n",
			"internal/testkit/testdata/skipdemo: 1 test skipped (TestNeedsChromium): chromium is not installed (apt-get install chromium)\n",
			"ok  \tgithub.com/switchboard-gateway/switchboard/internal/testkit/testdata/skipdemo",
		} {
			if strings.Count(string(out), want) != 1 {
				t.Errorf("go %s printed %q once? no:\n%s", strings.Join(args, " "), want, out)
			}
		}
	}
}

// Every test that skips is counted: it skips through SkipFor (Missing,
// NeedPostgres...), never with t.Skip, and its package's TestMain runs
// testkit.RunTests, so that the skip is said at the end of the run.
func TestEverySkipIsCounted(t *testing.T) {
	root := ModuleRoot(t)
	rawSkip := regexp.MustCompile(`\b[tb]\.Skip(f|Now)?\(`)
	counted := regexp.MustCompile(`testkit\.(SkipFor|Missing|NeedPostgres|NewPostgresSchema|NodeClient|NodeScript)\(`)
	needMain := map[string]string{} // package dir → a file that skips
	hasMain := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		src, rel, dir := string(b), strings.TrimPrefix(path, root+string(filepath.Separator)), filepath.Dir(path)
		if filepath.Dir(rel) != filepath.Join("internal", "testkit") && rawSkip.MatchString(src) {
			t.Errorf("%s skips with t.Skip: use testkit.SkipFor (or testkit.Missing), which the end of the run reports", rel)
		}
		if counted.MatchString(src) {
			needMain[dir] = rel
		}
		if strings.Contains(src, "testkit.RunTests(m)") {
			hasMain[dir] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, file := range needMain {
		if !hasMain[dir] {
			t.Errorf("%s skips through testkit, but its package has no TestMain running testkit.RunTests(m): its skips would go unreported", file)
		}
	}
	if len(needMain) < 4 {
		t.Errorf("found skipping tests in only %d packages: %v", len(needMain), needMain)
	}
}
