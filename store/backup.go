package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// keepPreUpgrade is how many pre-upgrade backups Open keeps beside the
// store: enough to step back over the last few upgrades, few enough that a
// large store does not fill its disk with copies.
const keepPreUpgrade = 3

// backupStamp is the time in a backup's file name (UTC).
const backupStamp = "20060102-150405"

// WithLogger sets the logger Open tells where it put the backup it takes
// before migrating (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(s *Store) { s.log = l }
}

// DefaultBackupPath is the file `switchboard backup` writes when it is not
// given one: beside the store, named by the time.
func DefaultBackupPath(storePath string, now time.Time) string {
	return storePath + ".backup-" + now.UTC().Format(backupStamp)
}

// Backup writes a consistent copy of the SQLite database to dest and
// returns its size. It runs VACUUM INTO through the store's pool, which
// reads one snapshot of the database (WAL), so it works while other
// connections and processes write. It refuses a dest that exists.
func (s *Store) Backup(ctx context.Context, dest string) (int64, error) {
	if s.d.postgres {
		return 0, errors.New("store: backup: the store is PostgreSQL; use pg_dump")
	}
	f, err := os.OpenFile(dest, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return 0, fmt.Errorf("store: backup: %w; name another file or remove it", err)
		}
		return 0, fmt.Errorf("store: backup: %w", err)
	}
	_ = f.Close()
	// VACUUM INTO writes into an empty file; creating it with O_EXCL
	// first claims the name against another backup started at once.
	if _, err := s.raw.ExecContext(ctx, "VACUUM INTO ?", dest); err != nil {
		_ = os.Remove(dest)
		return 0, fmt.Errorf("store: backup to %s: %w", dest, err)
	}
	fi, err := os.Stat(dest)
	if err != nil {
		return 0, fmt.Errorf("store: backup: %w", err)
	}
	return fi.Size(), nil
}

// schemaVersionOf is the schema version of an SQLite database without
// creating anything: 0 for a new or foreign database.
func schemaVersionOf(ctx context.Context, q querier) (int, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'`).Scan(&n); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	var have int
	err := q.QueryRowContext(ctx, sqlMaxSchemaVersion).Scan(&have)
	return have, err
}

// backupBeforeMigrate copies the database at path beside it, named with its
// schema version, when migrations are about to change an existing one
// (schema version 1 up to the latest less one), keeps the newest
// keepPreUpgrade of those copies, and logs where it put it. A new database
// gets none. A backup that fails stops the upgrade: the store is left as
// it was.
func (s *Store) backupBeforeMigrate(ctx context.Context, path string, have int) error {
	if have == 0 || have >= len(migrations) {
		return nil
	}
	stamp := s.now().UTC().Format(backupStamp)
	var (
		dest string
		size int64
		err  error
	)
	for i := 1; ; i++ {
		dest = fmt.Sprintf("%s.pre-v%d-%s", path, have, stamp)
		if i > 1 {
			dest += "-" + strconv.Itoa(i)
		}
		size, err = s.Backup(ctx, dest)
		if !errors.Is(err, fs.ErrExist) || i == 9 {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("backup before migrating from schema version %d to %d (free space beside %s, or upgrade after `switchboard backup` elsewhere): %w",
			have, len(migrations), path, err)
	}
	s.logger().Info("store: backed up before migrating", "backup", dest, "bytes", size, "from_version", have, "to_version", len(migrations))
	old := preUpgradeBackups(path)
	for _, p := range old[:max(0, len(old)-keepPreUpgrade)] {
		if err := os.Remove(p); err != nil {
			s.logger().Warn("store: remove old pre-upgrade backup", "backup", p, "err", err)
		}
	}
	return nil
}

func (s *Store) logger() *slog.Logger {
	if s.log != nil {
		return s.log
	}
	return slog.Default()
}

// preUpgradeRE matches the name of a pre-upgrade backup: the version, the
// time and a sequence number for backups taken in the same second.
var preUpgradeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\.pre-v(\d+)-(\d{8}-\d{6})(?:-(\d+))?$`) })

// preUpgradeBackups lists the pre-upgrade backups beside the database at
// path, oldest first.
func preUpgradeBackups(path string) []string {
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return nil
	}
	type backup struct {
		path, stamp string
		seq         int
	}
	var bs []backup
	base := filepath.Base(path)
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), base)
		if !ok || e.IsDir() {
			continue
		}
		m := preUpgradeRE().FindStringSubmatch(rest)
		if m == nil || m[0] != rest {
			continue
		}
		seq, _ := strconv.Atoi(m[3])
		bs = append(bs, backup{filepath.Join(filepath.Dir(path), e.Name()), m[2], seq})
	}
	slices.SortFunc(bs, func(a, b backup) int {
		if c := strings.Compare(a.stamp, b.stamp); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.path
	}
	return out
}

// NewerSchemaError is Open's refusal of a database migrated by a newer
// program. Backup, when set, is the newest pre-upgrade backup beside it.
type NewerSchemaError struct {
	Have, Latest int
	Path         string // the SQLite file; "" on PostgreSQL
	Backup       string
}

func (e *NewerSchemaError) Error() string {
	msg := fmt.Sprintf("database schema version %d is newer than this program's %d: run the newer switchboard that upgraded it (one whose schema version is %d or later)",
		e.Have, e.Latest, e.Have)
	switch {
	case e.Backup != "":
		msg += fmt.Sprintf(", or stop every switchboard on this store and restore the backup taken before the upgrade: replace %s with %s and delete %s-wal and %s-shm (writes since the upgrade are lost)",
			e.Path, e.Backup, e.Path, e.Path)
	case e.Path != "":
		msg += ", or restore a backup taken before the upgrade (none named " + filepath.Base(e.Path) + ".pre-v*-* is beside it)"
	default:
		msg += ", or restore the pg_dump taken before the upgrade"
	}
	return msg
}

// RedactDSN is a PostgreSQL connection string with its passwords replaced
// by ***, for printing.
func RedactDSN(dsn string) string {
	return redactErr(errors.New(dsn), dsnPasswords(dsn)).Error()
}
