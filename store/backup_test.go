package store

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// openBackup opens a backup file read-only and checks it is whole.
func openBackup(t *testing.T, path string) *sql.DB {
	t.Helper()
	db := rawDB(t, "sqlite3", "file:"+path+"?mode=ro")
	var ok string
	if err := db.QueryRowContext(t.Context(), "PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check of %s: %q, %v; want ok", path, ok, err)
	}
	return db
}

func countRows(t *testing.T, db *sql.DB, q string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A backup taken while another connection (as another process would)
// keeps writing is a whole database holding every row committed before it.
func TestBackupWhileWriting(t *testing.T) {
	ctx := t.Context()
	path := sqliteFile(t)
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const before = 300
	for i := range before {
		if _, err := s.DB().ExecContext(ctx, "INSERT INTO state (key, value, updated_at) VALUES (?, ?, 0)",
			fmt.Sprintf("before-%d", i), strings.Repeat("x", 200)); err != nil {
			t.Fatal(err)
		}
	}
	w, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	stopWriting := testkit.KeepWriting(w.DB(), "during-")
	dest := filepath.Join(t.TempDir(), "copy.db")
	size, err := s.Backup(ctx, dest)
	writeErr := stopWriting()
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	if writeErr != nil {
		t.Fatalf("writer: %v", writeErr)
	}
	if fi, err := os.Stat(dest); err != nil || fi.Size() != size || size == 0 {
		t.Fatalf("backup file: %v, size %d; Backup said %d", err, fi.Size(), size)
	}
	db := openBackup(t, dest)
	if n := countRows(t, db, "SELECT COUNT(*) FROM state WHERE key LIKE 'before-%'"); n != before {
		t.Errorf("backup holds %d of the %d rows written before it", n, before)
	}
	if n := countRows(t, db, "SELECT COUNT(*) FROM state WHERE key LIKE 'during-%'"); n < 1 {
		t.Errorf("backup holds %d rows of the writer, want at least the first, committed before it", n)
	}

	// An existing file is never overwritten.
	if err := os.WriteFile(dest, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Backup(ctx, dest); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Backup onto an existing file: err = %v, want ErrExist", err)
	}
	if b, _ := os.ReadFile(dest); string(b) != "keep" {
		t.Errorf("existing file changed to %d bytes", len(b))
	}
}

// oldStore is a SQLite store at schema version v with a chat in it.
func oldStore(t *testing.T, v int) string {
	t.Helper()
	path := sqliteFile(t)
	db := rawDB(t, "sqlite3", dsn(path))
	if err := migrate(t.Context(), db, sqliteDialect, migrations[:v], 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(),
		`INSERT INTO chats (id, channel, chat_key, created_at, updated_at) VALUES (1, 'telegram', 'old-chat', 0, 0)`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// Before migrating an existing store Open copies it beside itself, named
// by the old version, logs where, and keeps the newest three such copies.
func TestOpenBacksUpBeforeMigrating(t *testing.T) {
	const v = 10
	path := oldStore(t, v)
	// Two older upgrades left their backups; one more is unrelated.
	stale := []string{path + ".pre-v3-20250101-000000", path + ".pre-v5-20250601-000000", path + ".pre-v7-20251201-000000"}
	for _, p := range append(slices.Clone(stale), path+".backup-20250101-000000") {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	clk := newClock()
	s, err := Open(t.Context(), path, WithClock(clk.Now), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := path + ".pre-v10-20260301-120000"
	if !strings.Contains(logs.String(), want) {
		t.Errorf("log does not say where the backup is (%s):\n%s", want, logs.String())
	}
	db := openBackup(t, want)
	if got := countRows(t, db, "SELECT MAX(version) FROM schema_version"); got != v {
		t.Errorf("backup at schema version %d, want the old %d", got, v)
	}
	if n := countRows(t, db, "SELECT COUNT(*) FROM chats WHERE chat_key = 'old-chat'"); n != 1 {
		t.Errorf("backup holds %d of the old chat, want 1", n)
	}
	if got := countRows(t, s.DB(), "SELECT MAX(version) FROM schema_version"); got != len(migrations) {
		t.Errorf("store at version %d after Open, want %d", got, len(migrations))
	}
	if got, want := preUpgradeBackups(path), []string{stale[1], stale[2], want}; !slices.Equal(got, want) {
		t.Errorf("pre-upgrade backups kept %q, want the newest three %q", got, want)
	}
	if _, err := os.Stat(path + ".backup-20250101-000000"); err != nil {
		t.Errorf("an unrelated backup was removed: %v", err)
	}

	// Opening it again, up to date, takes no backup.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(3600e9)
	s2, err := Open(t.Context(), path, WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	_ = s2.Close()
	if got := preUpgradeBackups(path); len(got) != 3 || got[2] != want {
		t.Errorf("after an up-to-date open: backups %q", got)
	}
}

func TestNewStoreGetsNoBackup(t *testing.T) {
	path := sqliteFile(t)
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		if strings.Contains(e.Name(), ".pre-v") {
			t.Errorf("a new store got a backup: %s", e.Name())
		}
	}
}

// The refusal of a store from a newer program says what to run or which
// backup to restore.
func TestNewerSchemaRefusalNamesTheFix(t *testing.T) {
	path := oldStore(t, len(migrations))
	db := rawDB(t, "sqlite3", dsn(path))
	if _, err := db.ExecContext(t.Context(), "INSERT INTO schema_version (version, name, applied_at) VALUES (?, 'future', 0)", len(migrations)+1); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	_, err := Open(t.Context(), path)
	if err == nil {
		t.Fatal("Open of a newer schema succeeded")
	}
	for _, want := range []string{"newer", "run the newer switchboard", fmt.Sprintf("schema version is %d or later", len(migrations)+1), "none named"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal without a backup %q lacks %q", err, want)
		}
	}
	backup := fmt.Sprintf("%s.pre-v%d-20260301-120000", path, len(migrations))
	if err := os.WriteFile(backup, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(t.Context(), path)
	var ne *NewerSchemaError
	if !errors.As(err, &ne) || ne.Backup != backup {
		t.Fatalf("err = %v, want a NewerSchemaError naming %s", err, backup)
	}
	for _, want := range []string{"restore the backup taken before the upgrade", "replace " + path + " with " + backup, path + "-wal"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
}

func TestRedactDSN(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://sb:s3cret@db:5432/sb?sslmode=disable": "postgres://sb:***@db:5432/sb?sslmode=disable",
		"host=db user=sb password='pa ss' dbname=sb":      "host=db user=sb password='***' dbname=sb",
	} {
		if got := RedactDSN(dsn); got != want {
			t.Errorf("RedactDSN(%q) = %q, want %q", dsn, got, want)
		}
	}
}
