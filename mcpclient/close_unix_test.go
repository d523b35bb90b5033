//go:build unix

package mcpclient

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gone reports whether no process has the pid any more: the child has
// exited and has been reaped (a zombie would still answer signal 0).
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func childPID(t *testing.T, m *Manager) int {
	t.Helper()
	pid, err := strconv.Atoi(mustCall(t, m, "test__pid", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	s := m.servers[0]
	s.mu.Lock()
	started := s.cur.pid
	s.mu.Unlock()
	if got := started; got != pid {
		t.Fatalf("the server says pid %d, we started %d", pid, got)
	}
	if gone(pid) {
		t.Fatalf("pid %d is not running before Close", pid)
	}
	return pid
}

func TestCloseStopsTheChild(t *testing.T) {
	m := mustConnect(t, nil, options{}, stdioServer(t, "test"))
	pid := childPID(t, m)

	if err := m.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if !gone(pid) {
		t.Errorf("pid %d still exists after Close", pid)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

// A child that ignores both the end of stdin and SIGTERM is killed once the
// grace periods are over.
func TestCloseKillsAStubbornChild(t *testing.T) {
	const grace = 100 * time.Millisecond
	m := mustConnect(t, nil, options{grace: grace}, stdioServer(t, "test", envStubborn+"=1"))
	pid := childPID(t, m)

	start := time.Now()
	err := m.Close()
	if err == nil || !strings.Contains(err.Error(), `mcp server "test": close: `) || !strings.Contains(err.Error(), "killed") {
		t.Errorf("close: err = %v, want the kill reported", err)
	}
	if d := time.Since(start); d < 2*grace {
		t.Errorf("close took %v, want at least the two grace periods (%v) before the kill", d, 2*grace)
	}
	if !gone(pid) {
		t.Errorf("pid %d still exists after Close", pid)
	}
}

// A helper the server started (npx's node, say) is in the server's process
// group and dies with it, though the server itself exits gracefully.
func TestCloseKillsWhatTheChildLeftBehind(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "held")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Open the reading end first (without blocking) so the grandchild's
	// open for writing succeeds; EOF then means every writer is gone.
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	m := mustConnect(t, nil, options{}, stdioServer(t, "test", envSpawn+"=1"))
	if _, err := call(t, m, "test__spawn", `{"fifo":"`+fifo+`"}`); err != nil {
		t.Fatalf("spawn: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	// A bound for a broken build, not a synchronisation: the read ends at
	// once when the grandchild is dead.
	if err := r.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := r.Read(make([]byte, 1))
	if n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("read from the grandchild's FIFO after Close: n=%d err=%v, want EOF (it should be dead)", n, err)
	}
}
