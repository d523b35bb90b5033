package store

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A store directory SQLite cannot work in gives an error naming the cause
// and the fix, not SQLite's "unable to open database file". The tests run
// as root here, where a directory's mode does not stop writes and no
// read-only mount can be made, so they make the failure with what root
// respects too: a regular file where a directory has to be, and a
// directory where SQLite has to create its -shm (SQLite fails there at
// connect, as it does on a read-only mount). The read-only and permission
// wording itself is checked on the errors such a mount and mode give
// (TestDirReason).
func TestOpenDirectoryProblems(t *testing.T) {
	t.Run("parent is a file", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "data")
		if err := os.WriteFile(file, []byte("not a directory"), 0o600); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(file, "sub", "switchboard.db")
		_, err := Open(t.Context(), path)
		want := "store: open " + path + ": cannot create the directory " + filepath.Dir(path) + ": " + file + " is a file, not a directory: move store.path"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("err = %v\nwant it to start %q", err, want)
		}
		if cerr := CheckPath(path); cerr == nil || !strings.HasPrefix(err.Error(), cerr.Error()) {
			t.Errorf("CheckPath = %v, want the same cause as Open", cerr)
		}
	})
	t.Run("shm cannot be created after a clean stop", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "switchboard.db")
		s, err := Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path + "-shm"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("-shm left after a clean stop: %v", err)
		}
		// A dangling link where the -shm goes: SQLite (which opens it with
		// O_NOFOLLOW) cannot open it, for root too, and fails at connect
		// with "unable to open database file", as on a read-only mount.
		if err := os.Symlink(filepath.Join(dir, "gone", "shm"), path+"-shm"); err != nil {
			t.Fatal(err)
		}
		_, err = Open(t.Context(), path)
		want := "store: open " + path + ": " + path + "-shm cannot be opened for writing (SQLite needs to create switchboard.db-wal and -shm beside it): no such file or directory: remove it, or move store.path; the error was: unable to open database file"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("err = %v\nwant it to start %q", err, want)
		}
		if cerr := CheckPath(path); cerr == nil || !strings.HasPrefix(err.Error(), cerr.Error()) {
			t.Errorf("CheckPath = %v, want the same cause as Open", cerr)
		}
		if de, ok := errors.AsType[*DirError](err); !ok || de.Err == nil || !strings.Contains(de.Err.Error(), "unable to open database file") {
			t.Errorf("err = %#v, want a *DirError carrying SQLite's error", err)
		}
	})
	t.Run("missing directory is created", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "a", "b", "switchboard.db")
		if err := CheckPath(path); err != nil {
			t.Fatalf("CheckPath = %v, want nil for a creatable directory", err)
		}
		s, err := Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		if err := CheckPath(path); err != nil {
			t.Fatalf("CheckPath = %v after a clean stop, want nil", err)
		}
		entries, _ := os.ReadDir(filepath.Dir(path))
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".switchboard-probe") {
				t.Errorf("probe file %s left behind", e.Name())
			}
		}
	})
}

func TestDirReason(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&fs.PathError{Op: "open", Path: "/data/.switchboard-probe-1", Err: syscall.EROFS}, "the directory /data is on a read-only file system"},
		{&fs.PathError{Op: "open", Path: "/data/.switchboard-probe-1", Err: syscall.EACCES}, "the directory /data is not writable by uid "},
		{&fs.PathError{Op: "open", Path: "/data/.switchboard-probe-1", Err: syscall.EPERM}, "the directory /data is not writable by uid "},
		{&fs.PathError{Op: "open", Path: "/data/.switchboard-probe-1", Err: syscall.ENOSPC}, "cannot create a file in the directory /data: no space left on device"},
	}
	for _, tt := range tests {
		if got := dirReason("/data", tt.err); !strings.HasPrefix(got, tt.want) {
			t.Errorf("dirReason(%v) = %q, want it to start %q", tt.err, got, tt.want)
		}
	}
}
