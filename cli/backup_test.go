package cli

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/store"
)

// `switchboard backup` copies a store another connection keeps writing to
// (as a serving gateway would) into a whole database with its rows, and
// never overwrites a file.
func TestBackupCommand(t *testing.T) {
	ctx := t.Context()
	db := filepath.Join(t.TempDir(), "switchboard.db")
	cfg := storeConfig(t, db, nil)
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 200 {
		if _, _, err := st.PairingCode(ctx, "telegram", fmt.Sprint(i), "u", fmt.Sprintf("CODE%04d", i), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	stopWriting := testkit.KeepWriting(st.DB(), "w")
	dest := filepath.Join(t.TempDir(), "copy.db")
	var out, errb bytes.Buffer
	code := run(ctx, []string{"backup", dest, "--config", cfg}, strings.NewReader(""), &out, &errb)
	// The default name, beside the store.
	var out2, errb2 bytes.Buffer
	code2 := run(ctx, []string{"--config", cfg, "backup"}, strings.NewReader(""), &out2, &errb2)
	if err := stopWriting(); err != nil {
		t.Fatalf("writer: %v", err)
	}
	fi, err := os.Stat(dest)
	if code != 0 || err != nil || !strings.Contains(out.String(), "to "+dest+" ("+fmt.Sprint(fi.Size())+" bytes)") {
		t.Fatalf("backup: code %d, stat %v\nstdout: %s\nstderr: %s", code, err, out.String(), errb.String())
	}
	m := regexp.MustCompile(`to (` + regexp.QuoteMeta(db) + `\.backup-\d{8}-\d{6}) \(`).FindStringSubmatch(out2.String())
	if code2 != 0 || m == nil {
		t.Fatalf("backup to the default path: code %d\nstdout: %s\nstderr: %s", code2, out2.String(), errb2.String())
	}
	for _, p := range []string{dest, m[1]} {
		copyDB, err := sql.Open("sqlite3", "file:"+p+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		var ok string
		var codes, writes int
		if err := copyDB.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
			t.Errorf("%s: integrity_check %q, %v", p, ok, err)
		}
		if err := copyDB.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM pairings), (SELECT COUNT(*) FROM state WHERE key LIKE 'w%')").Scan(&codes, &writes); err != nil {
			t.Fatal(err)
		}
		if codes != 200 || writes < 1 {
			t.Errorf("%s holds %d pairing codes (want 200) and %d concurrent writes (want at least 1)", p, codes, writes)
		}
		_ = copyDB.Close()
	}

	out.Reset()
	errb.Reset()
	if code := run(ctx, []string{"backup", dest, "--config", cfg}, strings.NewReader(""), &out, &errb); code != 1 || !strings.Contains(errb.String(), "file exists") {
		t.Errorf("backup onto an existing file: code %d\nstderr: %s", code, errb.String())
	}
	if after, _ := os.Stat(dest); after.Size() != fi.Size() || !after.ModTime().Equal(fi.ModTime()) {
		t.Errorf("the existing file was changed")
	}
	errb.Reset()
	if code := run(ctx, []string{"backup", "a", "b", "--config", cfg}, strings.NewReader(""), &out, &errb); code != 2 || !strings.Contains(errb.String(), "usage: switchboard backup [PATH]") {
		t.Errorf("backup a b: code %d\nstderr: %s", code, errb.String())
	}
}

// On PostgreSQL the command names pg_dump, without the password.
func TestBackupCommandPostgres(t *testing.T) {
	t.Setenv("PGPW", "sk-secret-value")
	cfg := writeConfig(t, "llm:\n  model: m\nstore:\n  driver: postgres\n  dsn: postgres://sb:${PGPW}@127.0.0.1:5432/sb\n")
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"backup", "--config", cfg}, strings.NewReader(""), &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "pg_dump --format=custom --file=switchboard-") ||
		!strings.Contains(errb.String(), "--dbname='postgres://sb:***@127.0.0.1:5432/sb'") {
		t.Fatalf("code %d (want 2)\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}
	if strings.Contains(out.String()+errb.String(), "sk-secret-value") {
		t.Fatal("the DSN's password was printed")
	}
}
