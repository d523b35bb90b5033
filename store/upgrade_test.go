package store

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// fillEveryTable puts one row in every table of the database at path
// (foreign keys off: the rows need not refer to each other) and returns
// the tables. A TEXT column checked against a list gets its first value.
func fillEveryTable(t *testing.T, path string) []string {
	t.Helper()
	ctx := t.Context()
	db := rawDB(t, "sqlite3", "file:"+path+"?_foreign_keys=off")
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT name, sql FROM sqlite_master WHERE type = 'table'
		AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '%_fts_%' AND name <> 'schema_version' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	ddl := map[string]string{}
	var tables []string
	for rows.Next() {
		var name, sql string
		if err := rows.Scan(&name, &sql); err != nil {
			t.Fatal(err)
		}
		tables, ddl[name] = append(tables, name), sql
	}
	rows.Close()
	for _, table := range tables {
		cols, err := db.QueryContext(ctx, `SELECT name, type FROM pragma_table_info(?)`, table)
		if err != nil {
			t.Fatal(err)
		}
		var names, vals []string
		for cols.Next() {
			var name, typ string
			if err := cols.Scan(&name, &typ); err != nil {
				t.Fatal(err)
			}
			val := "1"
			switch {
			case strings.HasPrefix(typ, "TEXT"), typ == "":
				val = "'x'"
				if m := regexp.MustCompile(`CHECK \(\s*` + name + ` IN \(('[^']*')`).FindStringSubmatch(ddl[table]); m != nil {
					val = m[1]
				}
			case strings.HasPrefix(typ, "BLOB"):
				val = "x'01'"
			}
			names, vals = append(names, name), append(vals, val)
		}
		cols.Close()
		q := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", table, strings.Join(names, ", "), strings.Join(vals, ", "))
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return tables
}

// A store created by each earlier schema version, with a row in every
// table, upgrades with its rows kept, after a backup of it as it was.
func TestUpgradeFromEveryVersion(t *testing.T) {
	for v := 1; v < len(migrations); v++ {
		t.Run(fmt.Sprint("v", v), func(t *testing.T) {
			path := sqliteFile(t)
			db := rawDB(t, "sqlite3", dsn(path))
			if err := migrate(t.Context(), db, sqliteDialect, migrations[:v], 1, nil); err != nil {
				t.Fatal(err)
			}
			_ = db.Close()
			tables := fillEveryTable(t, path)
			t.Logf("%d tables: %s", len(tables), strings.Join(tables, " "))
			s, err := Open(t.Context(), path, WithClock(newClock().Now))
			if err != nil {
				t.Fatalf("Open of a version %d store: %v", v, err)
			}
			defer s.Close()
			backup := fmt.Sprintf("%s.pre-v%d-20260301-120000", path, v)
			if _, err := os.Stat(backup); err != nil {
				t.Fatalf("no backup before the upgrade: %v", err)
			}
			old := openBackup(t, backup)
			var ok string
			if err := s.DB().QueryRowContext(t.Context(), "PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
				t.Fatalf("integrity_check after the upgrade: %q, %v", ok, err)
			}
			for _, table := range tables {
				q := "SELECT COUNT(*) FROM " + table
				if n := countRows(t, s.DB(), q); n != 1 {
					t.Errorf("%s: %d rows after the upgrade, want 1", table, n)
				}
				if n := countRows(t, old, q); n != 1 {
					t.Errorf("%s: %d rows in the backup, want 1", table, n)
				}
			}
			if n := countRows(t, s.DB(), "SELECT MAX(version) FROM schema_version"); n != len(migrations) {
				t.Errorf("version %d after the upgrade, want %d", n, len(migrations))
			}
		})
	}
}
