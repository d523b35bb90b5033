package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/mattn/go-sqlite3"
)

// A database that cannot take writes — a full disk, a read-only file or
// file system — is a condition outside the program that usually passes.
// The store names it (Unavailable), remembers it for Ping, and leaves the
// file as it was: every write is one transaction, so a failed one changes
// nothing.

// WithMaxPages caps the database at n pages (PRAGMA max_page_count on every
// connection; a page is 4 KiB). A write that needs a page beyond the cap
// fails with SQLITE_FULL, as on a full disk, until pages are freed.
func WithMaxPages(n int) Option {
	return func(s *Store) { s.maxPages = n }
}

// WithReadOnly opens the database read-only, as SQLite opens a file it may
// not write (a file mode or a read-only mount): every write fails with
// SQLITE_READONLY. The file must exist and be up to date.
func WithReadOnly() Option {
	return func(s *Store) { s.readOnly = true }
}

// openDB returns the connection pool for the file at path, with the
// options of s applied to every connection.
func (s *Store) openDB(path string) *sql.DB {
	name := dsn(path)
	if s.readOnly {
		name += "&mode=ro"
	}
	drv := &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		if n := s.maxPages; n > 0 {
			if _, err := c.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", n), nil); err != nil {
				return fmt.Errorf("set max_page_count: %w", err)
			}
		}
		if s.readOnly {
			return nil
		}
		// The checkpointer copies the WAL into the file instead (see there).
		if _, err := c.Exec("PRAGMA wal_autocheckpoint = 0", nil); err != nil {
			return fmt.Errorf("set wal_autocheckpoint: %w", err)
		}
		c.RegisterCommitHook(func() int {
			s.walDirty.Store(true)
			return 0
		})
		return nil
	}}
	return sql.OpenDB(connector{name: name, drv: drv})
}

// connector opens connections with a driver of the store's own, so that
// its ConnectHook applies to this store only.
type connector struct {
	name string
	drv  *sqlite3.SQLiteDriver
}

func (c connector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.name) }
func (c connector) Driver() driver.Driver                        { return c.drv }

// Unavailable reports whether err means that the database cannot take
// writes for now, and why in a few words a user understands: the disk (or
// the size cap) is full, the file or its file system is read-only, the
// disk fails, or another process holds the lock too long. Such a write is
// worth trying again once the condition has passed; other errors are not.
func Unavailable(err error) (why string, ok bool) {
	if why, ok := pgUnavailable(err); ok {
		return why, true
	}
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return "", false
	}
	switch se.Code {
	case sqlite3.ErrFull:
		return "storage is full", true
	case sqlite3.ErrReadonly:
		return "storage is read-only", true
	case sqlite3.ErrIoErr, sqlite3.ErrCantOpen:
		return "storage cannot be written", true
	case sqlite3.ErrBusy, sqlite3.ErrLocked:
		return "storage is busy", true
	}
	return "", false
}

// noteWrite records the outcome of a write for Ping: a failure that
// Unavailable names is kept until a write succeeds.
func (s *Store) noteWrite(err error) {
	if err == nil {
		s.writeErr.Store(nil)
		return
	}
	s.noteErr(err)
	if _, ok := Unavailable(err); ok {
		s.writeErr.Store(&err)
	}
}

// sqlPingProbe writes a page's worth of data, so it needs a free page. Ping
// rolls it back.
const sqlPingProbe = `INSERT INTO state (key, value, updated_at) VALUES ('store.ping', zeroblob(4096), 0)
	ON CONFLICT (key) DO UPDATE SET value = excluded.value`

// sqlPingProbePostgres is sqlPingProbe for Postgres: it fails in a
// read-only transaction (a hot standby, default_transaction_read_only) and
// without write permission.
const sqlPingProbePostgres = `INSERT INTO state (key, value, updated_at) VALUES ('store.ping', repeat('x', 4096), 0)
	ON CONFLICT (key) DO UPDATE SET value = excluded.value`

// Ping checks that the database accepts writes, for readiness checks. In a
// transaction it rolls back, it takes the write lock and writes a page's
// worth of data: that fails on a read-only file or file system
// (SQLITE_READONLY) and when no page is left under a size cap
// (SQLITE_FULL). A full disk shows only when SQLite writes to the file, at
// a commit, so Ping also fails while the last write failed for a reason
// Unavailable names and none has succeeded since.
func (s *Store) Ping(ctx context.Context) error {
	if de := s.damage.Load(); de != nil {
		return fmt.Errorf("store: ping: %w", de)
	}
	tx, err := s.raw.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	probe := sqlPingProbe
	if s.d.postgres {
		probe = sqlPingProbePostgres
	}
	_, err = tx.ExecContext(ctx, probe)
	if rerr := tx.Rollback(); err == nil {
		err = rerr
	}
	if err != nil && Damaged(err) && !s.d.postgres {
		return fmt.Errorf("store: ping: %w", s.noteDamage(err))
	}
	if err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	if p := s.writeErr.Load(); p != nil {
		return fmt.Errorf("store: ping: the last write failed: %w", *p)
	}
	return nil
}
