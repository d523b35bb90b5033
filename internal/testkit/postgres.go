package testkit

// PostgreSQL for tests outside the store package: a fresh schema on the
// test server per test, which any number of processes can share through
// its DSN (search_path names the schema, so the store creates its tables
// there).

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// PostgresEnv names the DSN of the PostgreSQL test server; tests may create
// and drop schemas there. .ci/run starts one.
const PostgresEnv = "SWITCHBOARD_TEST_PG_DSN"

// NeedPostgres returns the test server's DSN. Without one the test is
// skipped (counted by SkipFor), or fails when CI is "true" (the rule of the
// store's and the HTTP API's tests).
func NeedPostgres(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(PostgresEnv)
	if dsn != "" {
		return dsn
	}
	msg := PostgresEnv + " is not set: start PostgreSQL: see .ci/run"
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: .ci/run should have started it)", msg)
	}
	SkipFor(t, "PostgreSQL", msg)
	return ""
}

// PostgresSchema is an empty schema on the test server.
type PostgresSchema struct {
	Name string
	// DSN is the server's DSN with search_path set to the schema: what a
	// store (store.dsn) opens.
	DSN string
	// DB is a connection pool on DSN, for the test's own queries; write
	// them with $1, $2 placeholders.
	DB *sql.DB
}

var pgSchemas atomic.Int64

// NewPostgresSchema creates an empty schema on the test server (see
// NeedPostgres) and drops it, with everything in it, when the test ends:
// register it before anything that must let go of it first (processes on
// it are killed by cleanups registered later, which run earlier).
func NewPostgresSchema(t testing.TB) *PostgresSchema {
	t.Helper()
	base := NeedPostgres(t)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("%s: %v", PostgresEnv, err)
	}
	name := fmt.Sprintf("sbe2e_%d_%d", os.Getpid(), pgSchemas.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+name); err != nil {
		admin.Close()
		t.Fatalf("create schema %s on %s: %v", name, PostgresEnv, err)
	}
	dsn, err := WithDSNParam(base, "search_path", name)
	if err != nil {
		admin.Close()
		t.Fatalf("%s: %v", PostgresEnv, err)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		admin.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
		admin.Close()
	})
	return &PostgresSchema{Name: name, DSN: dsn, DB: db}
}

// WithDSNParam sets a connection parameter in a postgres:// URL or a
// key=value DSN.
func WithDSNParam(dsn, key, value string) (string, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn + " " + key + "=" + value, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("the DSN does not parse as a URL")
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String(), nil
}
