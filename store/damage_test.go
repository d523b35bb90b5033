package store

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// newDamagedFile makes a real database file with data, then damages it.
func newDamagedFile(t *testing.T, damage func(path string)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "switchboard.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	testkit.FillDatabase(t, path, 300)
	if damage != nil {
		damage(path)
	}
	return path
}

// truncate cuts the file at path to 60% of its size.
func truncate(t *testing.T) func(string) {
	return func(path string) {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, fi.Size()*6/10); err != nil {
			t.Fatal(err)
		}
	}
}

// The integrity check finds pages overwritten in the middle of a real
// database file and a file cut short, with a fix that restores a backup
// (naming the newest beside it), not one about permissions or disk space;
// from then on Ping fails with it.
func TestIntegrityCheckFindsDamage(t *testing.T) {
	tests := []struct {
		name   string
		damage func(string)
	}{
		{"four pages overwritten", func(p string) { testkit.OverwritePages(t, p, 0, 4) }},
		{"file cut short", truncate(t)},
	}
	for _, tc := range tests {
		for _, deep := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{false: " quick", true: " deep"}[deep], func(t *testing.T) {
				path := newDamagedFile(t, tc.damage)
				backup := path + ".backup-20261206-080000"
				if err := os.WriteFile(backup, []byte("a backup"), 0o600); err != nil {
					t.Fatal(err)
				}
				s, err := Open(t.Context(), path)
				if err == nil {
					defer s.Close()
					err = s.CheckIntegrity(t.Context(), deep)
				}
				de, ok := errors.AsType[*DamageError](err)
				if !ok {
					t.Fatalf("err = %v; want a *DamageError", err)
				}
				msg := err.Error()
				if !strings.Contains(msg, "damaged") || !strings.Contains(msg, "restore a backup") || !strings.Contains(msg, backup) ||
					strings.Contains(msg, "permission") || strings.Contains(msg, "free space") {
					t.Errorf("err = %q; want the damage and a restore naming %s", msg, backup)
				}
				if de.Path != path {
					t.Errorf("path = %q, want %q", de.Path, path)
				}
				if s != nil {
					if perr := s.Ping(t.Context()); !Damaged(perr) {
						t.Errorf("Ping after the check = %v; want the damage", perr)
					}
				}
			})
		}
	}
	t.Run("a whole file passes", func(t *testing.T) {
		s, err := Open(t.Context(), newDamagedFile(t, nil))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, deep := range []bool{false, true} {
			if err := s.CheckIntegrity(t.Context(), deep); err != nil {
				t.Errorf("CheckIntegrity(deep=%v) = %v", deep, err)
			}
		}
		if err := s.Ping(t.Context()); err != nil {
			t.Errorf("Ping = %v", err)
		}
	})
}

// Damage met at run time (SQLITE_CORRUPT from a statement, here on a
// table whose root page was overwritten), without an integrity check,
// turns Ping to the damage, so /readyz fails with the fix; Ping's own
// write meets it too.
func TestDamageAtRunTimeFailsPing(t *testing.T) {
	for _, via := range []string{"a statement", "ping"} {
		t.Run(via, func(t *testing.T) {
			path := newDamagedFile(t, nil)
			var root int64
			db, err := sql.Open("sqlite3", "file:"+path)
			if err != nil {
				t.Fatal(err)
			}
			err = db.QueryRow(`SELECT rootpage FROM sqlite_master WHERE name = 'state'`).Scan(&root)
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			testkit.OverwritePages(t, path, root, 1)
			s, err := Open(t.Context(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if via == "a statement" {
				_, err := s.db.ExecContext(t.Context(), `DELETE FROM state WHERE key = 'filler-00001'`)
				if !Damaged(err) {
					t.Fatalf("a statement on the damaged table: %v; want SQLITE_CORRUPT", err)
				}
			}
			if err := s.Ping(t.Context()); !Damaged(err) || !strings.Contains(err.Error(), "restore a backup") {
				t.Errorf("Ping = %v; want the damage with the fix", err)
			}
		})
	}
}
