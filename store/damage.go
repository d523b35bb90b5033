package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/mattn/go-sqlite3"
)

// A damaged database file (pages overwritten by a failing disk or a stray
// write, a file cut short by a copy or a full disk at the wrong moment) is
// not a condition that passes: the fix is to restore a backup. The store
// finds damage by an integrity check (CheckIntegrity: at serve's start and
// in `doctor`) and from the errors SQLite gives at run time
// (SQLITE_CORRUPT, SQLITE_NOTADB); from then on Ping fails with a
// *DamageError naming the backups, so /readyz turns 503, and an ERROR is
// logged once.

// maxProblems bounds the problems an integrity check lists.
const maxProblems = 10

// Damaged reports whether err is SQLite saying the database file is
// damaged or is not a database (SQLITE_CORRUPT, SQLITE_NOTADB).
func Damaged(err error) bool {
	if _, ok := errors.AsType[*DamageError](err); ok {
		return true
	}
	var se sqlite3.Error
	if errors.As(err, &se) {
		return se.Code == sqlite3.ErrCorrupt || se.Code == sqlite3.ErrNotADB
	}
	return false
}

// DamageError is a damaged SQLite database file: what the integrity check
// or SQLite said, and the fix, naming the backups beside the file.
type DamageError struct {
	Path     string
	Problems []string // what the integrity check found; empty when an error showed it
	Backups  []string // backups beside the file, newest last
	Err      error    // SQLite's error, when an error showed it
}

func (e *DamageError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the database file %s is damaged", e.Path)
	switch {
	case len(e.Problems) > 0:
		fmt.Fprintf(&b, " (integrity check: %s)", strings.Join(e.Problems, "; "))
	case e.Err != nil:
		fmt.Fprintf(&b, " (%v)", e.Err)
	}
	b.WriteString(": ")
	b.WriteString(e.Fix())
	return b.String()
}

func (e *DamageError) Unwrap() error { return e.Err }

// Fix is what to do about the damage.
func (e *DamageError) Fix() string {
	restore := fmt.Sprintf("stop switchboard and restore a backup: replace %s with a copy `switchboard backup` wrote (%s.backup-*) or serve took before an upgrade (%s.pre-v*), then delete %s-wal and %s-shm; writes since the backup are lost",
		e.Path, filepath.Base(e.Path), filepath.Base(e.Path), e.Path, e.Path)
	if n := len(e.Backups); n > 0 {
		restore += fmt.Sprintf(". The newest beside it is %s", e.Backups[n-1])
	} else {
		restore += ". None is beside it: without a backup, `sqlite3 " + e.Path + " .recover` may save part of the data into a new file"
	}
	return restore
}

// CheckIntegrity checks the SQLite database file: PRAGMA quick_check
// (every page read, in O(N)), or with deep PRAGMA integrity_check (also
// indexes against their tables). It returns a *DamageError when the
// file is damaged, which Ping reports from then on; nil on PostgreSQL.
func (s *Store) CheckIntegrity(ctx context.Context, deep bool) error {
	if s.d.postgres {
		return nil
	}
	pragma := fmt.Sprintf("PRAGMA quick_check(%d)", maxProblems)
	if deep {
		pragma = fmt.Sprintf("PRAGMA integrity_check(%d)", maxProblems)
	}
	rows, err := s.raw.QueryContext(ctx, pragma)
	if err != nil {
		if Damaged(err) {
			return s.noteDamage(err)
		}
		return fmt.Errorf("store: integrity check: %w", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("store: integrity check: %w", err)
		}
		for l := range strings.Lines(line) { // integrity_check puts several in one row
			if l = strings.TrimSpace(l); l != "ok" && l != "" && !strings.HasPrefix(l, "*** ") {
				problems = append(problems, l)
			}
		}
	}
	if err := rows.Err(); err != nil {
		if Damaged(err) {
			return s.noteDamage(err)
		}
		return fmt.Errorf("store: integrity check: %w", err)
	}
	if len(problems) == 0 {
		return nil
	}
	de := &DamageError{Path: s.path, Problems: problems, Backups: backupsBeside(s.path)}
	s.recordDamage(de)
	return de
}

// noteErr records an error of a statement: damage is kept for Ping.
func (s *Store) noteErr(err error) {
	if err != nil && !s.d.postgres && Damaged(err) {
		s.noteDamage(err)
	}
}

// noteDamage records the damage err shows and returns it as a *DamageError.
func (s *Store) noteDamage(err error) *DamageError {
	de, ok := errors.AsType[*DamageError](err)
	if !ok {
		de = &DamageError{Path: s.path, Err: err, Backups: backupsBeside(s.path)}
	}
	s.recordDamage(de)
	return de
}

// recordDamage keeps the first damage seen, and logs it at ERROR.
func (s *Store) recordDamage(de *DamageError) {
	if s.damage.CompareAndSwap(nil, de) {
		s.logger().Error("store: the database file is damaged", "path", de.Path, "err", de.Error())
	}
}

// damageSeen is the damage seen so far, if any.
type damageSeen = atomic.Pointer[DamageError]

// backupsBeside lists the backups beside the database at path that
// `switchboard backup` (path.backup-*) and serve before an upgrade
// (path.pre-v*) write, oldest first by modification time.
func backupsBeside(path string) []string {
	if path == "" {
		return nil
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return nil
	}
	type backup struct {
		path string
		mod  int64
	}
	var bs []backup
	base := filepath.Base(path)
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), base)
		if !ok || e.IsDir() || !(strings.HasPrefix(rest, ".backup-") || preUpgradeRE().MatchString(rest)) {
			continue
		}
		if strings.HasSuffix(rest, "-wal") || strings.HasSuffix(rest, "-shm") || strings.HasSuffix(rest, "-journal") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		bs = append(bs, backup{filepath.Join(filepath.Dir(path), e.Name()), info.ModTime().UnixNano()})
	}
	slices.SortStableFunc(bs, func(a, b backup) int { return int(a.mod - b.mod) })
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.path
	}
	return out
}
