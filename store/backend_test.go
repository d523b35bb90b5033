package store

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver for raw connections
)

// Every store test runs once per backend, as subtests "sqlite" and
// "postgres":
//
//	func TestX(t *testing.T) {
//		forEachBackend(t, func(t *testing.T, db backend) {
//			s, clk, loc := db.openTest(t)
//			…
//		})
//	}
//
// SQLite databases are files in t.TempDir(). PostgreSQL databases are
// schemas on the server named by SWITCHBOARD_TEST_PG_DSN (.ci/run starts
// one), one per test at a time. Migrating a new schema costs about three
// times as much as emptying a migrated one (TRUNCATE), so a test that does
// not test migrations (openTest, processes) gets a schema an earlier test
// used, emptied; TestMain drops them at the end. Without the variable the
// postgres subtests skip, or fail under CI=true.

// pgEnv names the DSN of the test server; the test may create and drop
// schemas there.
const pgEnv = "SWITCHBOARD_TEST_PG_DSN"

// backend is a database engine the store runs on. A location (loc) is what
// open takes: a file path for sqlite, a DSN for postgres.
type backend struct {
	name string
	// fresh returns the location of a new, empty database that is removed
	// when the test ends.
	fresh func(t testing.TB) string
	// migrated returns the location of a migrated database without rows,
	// for this test only.
	migrated func(t testing.TB) string
	open     func(ctx context.Context, loc string, opts ...Option) (*Store, error)
	// raw opens loc without the store, closed when the test ends.
	raw     func(t testing.TB, loc string) *sql.DB
	dialect *dialect
}

var backends = []backend{
	{
		name:     DriverSQLite,
		fresh:    sqliteFile,
		migrated: sqliteFile, // migrating a new file is as fast as emptying one
		open:     Open,
		raw: func(t testing.TB, loc string) *sql.DB {
			return rawDB(t, "sqlite3", dsn(loc))
		},
		dialect: sqliteDialect,
	},
	{
		name:     DriverPostgres,
		fresh:    freshSchema,
		migrated: migratedSchema,
		open:     OpenPostgres,
		raw: func(t testing.TB, loc string) *sql.DB {
			return rawDB(t, "pgx", loc)
		},
		dialect: postgresDialect,
	},
}

func sqliteFile(t testing.TB) string { return filepath.Join(t.TempDir(), "switchboard.db") }

func rawDB(t testing.TB, driver, name string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// forEachBackend runs test as a subtest per backend.
func forEachBackend(t *testing.T, test func(t *testing.T, db backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			if b.name == DriverPostgres {
				needPostgres(t)
			}
			test(t, b)
		})
	}
}

// forEachBackendB is forEachBackend for benchmarks.
func forEachBackendB(b *testing.B, bench func(b *testing.B, db backend)) {
	b.Helper()
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			if be.name == DriverPostgres {
				needPostgres(b)
			}
			bench(b, be)
		})
	}
}

// needPostgres skips the test without a test server, or fails it under
// CI=true (the house rule of testkit.Missing).
func needPostgres(t testing.TB) {
	t.Helper()
	if os.Getenv(pgEnv) != "" {
		return
	}
	msg := pgEnv + " is not set: start PostgreSQL: see .ci/run"
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: .ci/run should have started it)", msg)
	}
	testkit.SkipFor(t, "PostgreSQL", msg)
}

var (
	pgAdminOnce sync.Once
	pgAdmin     *sql.DB
	pgAdminErr  error
	pgSchemas   atomic.Int64
)

// freshSchema creates an empty schema on the test server and returns the
// test DSN with search_path set to it; the schema is dropped when the test
// ends.
func freshSchema(t testing.TB) string {
	t.Helper()
	schema, loc := newSchema(t)
	t.Cleanup(func() {
		if _, err := pgAdmin.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return loc
}

func newSchema(t testing.TB) (schema, loc string) {
	t.Helper()
	needPostgres(t)
	base := os.Getenv(pgEnv)
	pgAdminOnce.Do(func() {
		pgAdmin, pgAdminErr = sql.Open("pgx", base)
		if pgAdminErr == nil {
			pgAdminErr = pgAdmin.PingContext(context.Background())
		}
	})
	if pgAdminErr != nil {
		t.Fatalf("test server %s: %v", pgEnv, pgAdminErr)
	}
	schema = fmt.Sprintf("sbtest_%d_%d", os.Getpid(), pgSchemas.Add(1))
	if _, err := pgAdmin.ExecContext(t.Context(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	return schema, withParam(t, base, "search_path", schema)
}

// pgReady holds migrated schemas that finished tests emptied.
var pgReady struct {
	sync.Mutex
	free []readySchema
	all  []string
}

type readySchema struct{ name, loc string }

// migratedSchema returns the DSN of a migrated schema without rows; it is
// emptied when the test ends and given to a later test.
func migratedSchema(t testing.TB) string {
	t.Helper()
	pgReady.Lock()
	var r readySchema
	if n := len(pgReady.free); n > 0 {
		r, pgReady.free = pgReady.free[n-1], pgReady.free[:n-1]
	}
	pgReady.Unlock()
	if r.name == "" {
		r.name, r.loc = newSchema(t)
		pgReady.Lock()
		pgReady.all = append(pgReady.all, r.name)
		pgReady.Unlock()
		s, err := OpenPostgres(t.Context(), r.loc)
		if err != nil {
			t.Fatalf("migrate schema %s: %v", r.name, err)
		}
		s.Close()
	}
	t.Cleanup(func() {
		if err := emptySchema(r.name); err != nil {
			t.Errorf("empty schema %s: %v", r.name, err)
			return // not used again
		}
		pgReady.Lock()
		pgReady.free = append(pgReady.free, r)
		pgReady.Unlock()
	})
	return r.loc
}

// emptySchema deletes every row but the migrations' and resets the ids, so
// the schema is as a new one after Open.
func emptySchema(schema string) error {
	ctx := context.Background()
	rows, err := pgAdmin.QueryContext(ctx, `SELECT format('%I.%I', schemaname, tablename) FROM pg_tables
		WHERE schemaname = $1 AND tablename <> 'schema_version'`, schema)
	if err != nil {
		return err
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		tables = append(tables, name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if _, err := pgAdmin.ExecContext(ctx, "TRUNCATE "+strings.Join(tables, ", ")+" RESTART IDENTITY CASCADE"); err != nil {
		return err
	}
	_, err = pgAdmin.ExecContext(ctx, "DELETE FROM "+schema+".schema_version WHERE version > $1", len(migrations))
	return err
}

// TestMain drops the schemas migratedSchema made.
func TestMain(m *testing.M) {
	code := testkit.RunTests(m) // then says how many PostgreSQL tests skipped
	if pgAdmin != nil {
		for _, schema := range pgReady.all {
			if _, err := pgAdmin.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
				fmt.Fprintf(os.Stderr, "drop test schema %s: %v\n", schema, err)
				code = 1
			}
		}
		pgAdmin.Close()
	}
	os.Exit(code)
}

// withParam sets a connection parameter in a URL or key=value DSN.
func withParam(t testing.TB, dsn, key, value string) string {
	t.Helper()
	if _, ok := cutScheme(dsn); !ok {
		return dsn + " " + key + "=" + value
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("%s does not parse as a URL", pgEnv)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// tableCount counts the named tables in the database's (current) schema.
func (b backend) tableCount(t *testing.T, db *sql.DB, names ...string) int {
	t.Helper()
	q := "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('" + strings.Join(names, "', '") + "')"
	if b.dialect.postgres {
		q = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name IN ('" +
			strings.Join(names, "', '") + "')"
	}
	var n int
	if err := db.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
