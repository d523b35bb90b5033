package gateway

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Deploy leaves a byte-identical copy with none of its pages in the page
// cache, where a file just written has them all.
func TestDeploy(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "built", "switchboard")
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("switchboard binary page\n"), 100_000) // 2.4 MB
	if err := os.WriteFile(src, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if cached, total := pagesCached(t, src); cached != total {
		t.Fatalf("the file just written has %d of %d pages cached; want all (the test cannot tell otherwise)", cached, total)
	}
	got, err := Deploy(src, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got != filepath.Join(dir, "switchboard") {
		t.Errorf("deployed to %s", got)
	}
	if cached, total := pagesCached(t, got); cached != 0 || total == 0 {
		t.Errorf("deployed copy: %d of %d pages cached, want none", cached, total)
	}
	copied, err := os.ReadFile(got)
	if err != nil || !bytes.Equal(copied, data) {
		t.Errorf("deployed copy differs (%d bytes, err %v)", len(copied), err)
	}
	if st, err := os.Stat(got); err != nil || st.Mode().Perm()&0o100 == 0 {
		t.Errorf("deployed copy is not executable: %v %v", st.Mode(), err)
	}
}

func pagesCached(t *testing.T, path string) (cached, total int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cached, total, err = residentPages(f)
	if err != nil {
		t.Fatal(err)
	}
	return cached, total
}

// ReadMemory reads this process's own figures: all set, anonymous and PSS
// within RSS.
func TestReadMemory(t *testing.T) {
	m, err := ReadMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.Anon <= 0 || m.PSS <= 0 || m.Anon > m.RSS || m.PSS > m.RSS {
		t.Errorf("memory %+v: want RSS > 0 holding Anon and PSS", m)
	}
}
