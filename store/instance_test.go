//go:build unix

package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestInstanceLock: a second LockInstance on one store fails naming the
// holder (pid, host, start) and the fix; once the first is closed the next
// one takes it.
func TestInstanceLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchboard.db")
	first, err := LockInstance(path)
	if err != nil {
		t.Fatalf("first lock: %v", err)
	}
	_, err = LockInstance(path)
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("second lock: got %v, want a *HeldError", err)
	}
	host, _ := os.Hostname()
	if held.Holder.PID != os.Getpid() || held.Holder.Host != host || time.Since(held.Holder.Started) > time.Minute {
		t.Errorf("holder = %+v, want pid %d on %s started just now", held.Holder, os.Getpid(), host)
	}
	for _, want := range []string{fmt.Sprintf("pid %d", os.Getpid()), "host " + host, "started ", path, "stop that process", "store.path"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := first.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	again, err := LockInstance(path)
	if err != nil {
		t.Fatalf("lock after close: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestInstanceLockStale: a lock file left by a process that died (its
// details still there, nothing holding the lock) is taken over, and the
// file then names this process.
func TestInstanceLockStale(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchboard.db")
	dead, _ := json.Marshal(Holder{PID: 1 << 22, Host: "gone", Started: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err := os.WriteFile(path+LockSuffix, dead, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := LockInstance(path)
	if err != nil {
		t.Fatalf("stale lock not taken over: %v", err)
	}
	defer l.Close()
	var got Holder
	b, err := os.ReadFile(path + LockSuffix)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("lock file %q: %v", b, err)
	}
	if got.PID != os.Getpid() {
		t.Errorf("lock file names pid %d, want %d", got.PID, os.Getpid())
	}
}

// TestInstanceLockReadOnly: on a read-only directory with a lock file
// already there, the lock is still taken (serving a read-only store is
// allowed) and a second one still refused. (As root the mode bits do not
// stop the read-write open; the test then checks the same outcome.)
func TestInstanceLockReadOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "switchboard.db")
	if err := os.WriteFile(path+LockSuffix, nil, 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
	l, err := LockInstance(path)
	if err != nil {
		t.Fatalf("lock on a read-only directory: %v", err)
	}
	defer l.Close()
	if _, err := LockInstance(path); !errors.As(err, new(*HeldError)) {
		t.Errorf("second lock: got %v, want a *HeldError", err)
	}
}
