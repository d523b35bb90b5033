package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// LockSuffix names the instance lock file beside a SQLite database
// (switchboard.db → switchboard.db.lock).
const LockSuffix = ".lock"

// Holder is what the lock file says about the process that holds it.
type Holder struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"`
}

// HeldError is LockInstance's error when another process serves the store.
type HeldError struct {
	Path   string // the database
	Holder Holder // zero when the holder had not written its details yet
}

func (e *HeldError) Error() string {
	who := "another process"
	if e.Holder.PID != 0 {
		who = fmt.Sprintf("switchboard pid %d on host %s, started %s", e.Holder.PID, e.Holder.Host,
			e.Holder.Started.Format(time.RFC3339))
	}
	return fmt.Sprintf("store %s is already in use by %s: stop that process first, or point store.path at another file "+
		"(two processes on one SQLite store answer every message twice and fight over the bot token)", e.Path, who)
}

// InstanceLock keeps a second serving process off a SQLite store. It is an
// advisory lock (flock) on the file beside the database: the kernel drops
// it when the process ends, even by SIGKILL, so a lock file left by a crash
// is simply not locked and the next process takes it over. Commands that
// use the store briefly (pairing, schedule, doctor) do not take it.
type InstanceLock struct {
	f *os.File
}

// LockInstance takes the instance lock of the SQLite database at path and
// writes this process's details into the lock file. It returns a
// *HeldError naming the holder when another process has it; other errors
// (a read-only directory, a file system without locks) mean the lock
// could not be taken either way, and the caller may go on without it.
func LockInstance(path string) (*InstanceLock, error) {
	lp := path + LockSuffix
	f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o600)
	writable := err == nil
	if err != nil {
		// A read-only mount: an existing lock file can still be locked.
		if f, err = os.Open(lp); err != nil {
			return nil, fmt.Errorf("store: instance lock %s: %w", lp, err)
		}
	}
	held, err := tryLock(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("store: instance lock %s: %w", lp, err)
	}
	if held {
		e := &HeldError{Path: path}
		if b, err := os.ReadFile(lp); err == nil {
			_ = json.Unmarshal(b, &e.Holder) // empty while the holder writes it
		}
		_ = f.Close()
		return nil, e
	}
	if writable {
		host, _ := os.Hostname()
		b, _ := json.Marshal(Holder{PID: os.Getpid(), Host: host, Started: time.Now().UTC().Truncate(time.Second)})
		// Best effort: the lock itself is what keeps others off.
		if err := f.Truncate(0); err == nil {
			_, _ = f.WriteAt(append(b, '\n'), 0)
		}
	}
	return &InstanceLock{f: f}, nil
}

// Close releases the lock. The file stays: removing it would let two
// processes lock two different files of the same name.
func (l *InstanceLock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := errors.Join(unlock(l.f), l.f.Close())
	l.f = nil
	return err
}
