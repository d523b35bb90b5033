package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// DirError is an SQLite database path the store cannot work in: its
// directory cannot be created, or SQLite cannot create (or write) the -wal
// and -shm files it keeps beside the database, as on a read-only mount.
type DirError struct {
	Path  string // the database file
	Cause string // what is wrong, e.g. "the directory /data is on a read-only file system (…)"
	Fix   string // what to do about it
	Err   error  // what SQLite or the OS said when Open failed; nil from CheckPath
}

func (e *DirError) Error() string {
	s := fmt.Sprintf("store: open %s: %s: %s", e.Path, e.Cause, e.Fix)
	if e.Err != nil {
		s += "; the error was: " + e.Err.Error()
	}
	return s
}

func (e *DirError) Unwrap() error { return e.Err }

// CheckPath reports whether an SQLite database can be opened for writing at
// path: its directory exists or can be created, and SQLite can create the
// -wal and -shm files it keeps beside the database there (or, if they are
// left from an earlier run, write them). A read-only mount passes a file
// mode check but fails here. A problem is a *DirError naming the cause and
// the fix, as Open gives when it fails for it. nil means none was found
// (the database file itself may still be unwritable: Open then opens it
// read-only and every write fails).
func CheckPath(path string) error {
	cause, fix := checkDir(path)
	if cause == "" {
		return nil
	}
	return &DirError{Path: path, Cause: cause, Fix: fix}
}

// checkDir is CheckPath's diagnosis: the cause and the fix, or "".
func checkDir(path string) (cause, fix string) {
	dir := filepath.Dir(path)
	base := filepath.Base(path)
	// The nearest directory that exists is where something gets created.
	at := dir
	for {
		fi, err := os.Stat(at)
		if err == nil && !fi.IsDir() {
			return fmt.Sprintf("cannot create the directory %s: %s is a file, not a directory", dir, at), "move store.path"
		}
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return fmt.Sprintf("cannot use the directory %s: %s", dir, errReason(err)), "fix it, or move store.path"
		}
		parent := filepath.Dir(at)
		if parent == at {
			break
		}
		at = parent
	}
	if at != dir {
		if err := probeCreate(at); err != nil {
			return fmt.Sprintf("cannot create the directory %s: %s", dir, dirReason(at, err)),
				"create it and give the service user write access, or move store.path"
		}
		return "", ""
	}
	needs := fmt.Sprintf("SQLite needs to create %s-wal and -shm beside it", base)
	if err := probeCreate(dir); err != nil {
		return fmt.Sprintf("%s (%s)", dirReason(dir, err), needs), "make it writable, or move store.path"
	}
	// Left from an earlier run (or put there): SQLite opens them as it
	// would create them.
	for _, side := range []string{"-wal", "-shm"} {
		name := path + side
		if _, err := os.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o640)
		if err != nil {
			return fmt.Sprintf("%s cannot be opened for writing (%s): %s", name, needs, errReason(err)), "remove it, or move store.path"
		}
		f.Close()
	}
	return "", ""
}

// probeCreate creates and removes a file in dir.
func probeCreate(dir string) error {
	f, err := os.CreateTemp(dir, ".switchboard-probe-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// dirReason says why a file could not be created in dir.
func dirReason(dir string, err error) string {
	switch {
	case errors.Is(err, syscall.EROFS):
		return fmt.Sprintf("the directory %s is on a read-only file system", dir)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Sprintf("the directory %s is not writable by uid %d", dir, os.Geteuid())
	}
	return fmt.Sprintf("cannot create a file in the directory %s: %s", dir, errReason(err))
}

// errReason is an OS error without the path a *PathError repeats.
func errReason(err error) string {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err.Error()
	}
	return err.Error()
}
