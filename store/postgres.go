package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// PostgreSQL through pgx's database/sql driver, so both backends share every
// query (see dialect.go).
//
// Concurrency. On SQLite one writer at a time (IMMEDIATE transactions) makes
// every method safe against other processes on the same file. On Postgres,
// where several replicas write at once, each class of method keeps that
// guarantee this way:
//
//   - Read-check-write steps run in inTx, SERIALIZABLE, and are run again
//     when they lose to a concurrent transaction: BeginTurn (the session is
//     the chat's), CommitStep and FinishTurn (the turn is still running, else
//     ErrTurnNotRunning), AdvanceSchedule (the job's next run is still the
//     one read: the claim of a due job, else ErrScheduleChanged),
//     FinishScheduleRun, CancelSchedule, SyncConfigSchedule,
//     RetireConfigSchedules, the learning jobs' cursor (else ErrCursorMoved),
//     CurrentSession and NewSession (one open session per chat), memories,
//     profiles, pairing codes and skill proposals.
//   - Insert-once rows rely on a unique key with ON CONFLICT: Intake (the
//     inbox's channel, chat and message id; a duplicate returns the stored
//     id), RecordDelivery and RecordScheduleDelivery (a platform message
//     counts once), SetState and EnsureChat (upserts).
//   - Compare-and-set single statements need no transaction: DecideApproval
//     (WHERE status = 'pending') and ClaimPlan (WHERE status = 'waiting').
//     Under READ COMMITTED the second of two racing updates waits for the
//     first's row lock, re-checks its WHERE against the new row and changes
//     nothing, so exactly one wins.
//   - Reads see committed data as of their statement, as SQLite's WAL
//     readers do.

// pgMaxOpenConns bounds the pool: a busy gateway runs a few turns and
// background jobs at once, and several replicas share the server's
// max_connections (100 by default).
const pgMaxOpenConns = 16

// pgSessionDefaults are set on every connection unless the DSN sets them.
//   - lock_timeout plays the part of SQLite's busy_timeout: a statement
//     waiting longer than that for a row lock fails (55P03) rather than
//     hanging behind a stuck transaction.
//   - application_name names the connections in pg_stat_activity.
var pgSessionDefaults = map[string]string{
	"lock_timeout":     "5s",
	"application_name": "switchboard",
}

// OpenPostgres opens the PostgreSQL database that dsn names (a URL
// "postgres://user:password@host:5432/dbname?sslmode=disable" or
// "host=… user=… password=… dbname=…", as libpq takes it; PG* environment
// variables fill in what it leaves out) and applies any pending migrations.
// The tables go into the first schema of the search_path, which the DSN may
// set (search_path=…). Errors never contain the password.
func OpenPostgres(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	if strings.TrimSpace(dsn) == "" {
		return nil, errors.New("store: open postgres: empty DSN")
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open postgres: %w", redactErr(err, dsnPasswords(dsn)))
	}
	secrets := append(dsnPasswords(dsn), cfg.Password)
	where := fmt.Sprintf("postgres %s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
	for k, v := range pgSessionDefaults {
		if _, ok := cfg.RuntimeParams[k]; !ok {
			cfg.RuntimeParams[k] = v
		}
	}
	s := newStore(postgresDialect, opts)
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(pgMaxOpenConns)
	db.SetMaxIdleConns(maxIdleConns)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: open %s: %w", where, redactErr(err, secrets))
	}
	s.setDB(db)
	if err := migrate(ctx, db, postgresDialect, migrations, s.nowMS(), s.hooks.migrateWait); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: open %s: %w", where, redactErr(err, secrets))
	}
	return s, nil
}

// sqlMigrateLock serialises migrations of one schema across processes:
// CREATE TABLE on a table that does not exist yet takes no lock a second
// process would wait for. The key is per schema, so databases that hold
// several deployments (or tests) in separate schemas do not wait for each
// other.
const (
	sqlMigrateLockKey = `hashtextextended('switchboard/migrate:' || COALESCE(current_schema(), ''), 0)`
	sqlMigrateTryLock = `SELECT pg_try_advisory_lock(` + sqlMigrateLockKey + `)`
	sqlMigrateLock    = `SELECT pg_advisory_lock(` + sqlMigrateLockKey + `)`
	sqlMigrateUnlock  = `SELECT pg_advisory_unlock(` + sqlMigrateLockKey + `)`
)

// migrateLock takes the schema's migration lock on c, waiting (within
// lock_timeout) while another process migrates, and returns its release.
// onWait, if set, runs when the lock is taken, before the wait (tests).
func migrateLock(ctx context.Context, c *sql.Conn, onWait func()) (unlock func(), err error) {
	var got bool
	if err := c.QueryRowContext(ctx, sqlMigrateTryLock).Scan(&got); err != nil {
		return nil, err
	}
	if !got {
		if onWait != nil {
			onWait()
		}
		if _, err := c.ExecContext(ctx, sqlMigrateLock); err != nil {
			return nil, fmt.Errorf("wait for another process's migration: %w", err)
		}
	}
	return func() {
		// A failed unlock leaves the lock to the session, which ends when
		// the connection closes: ErrBadConn makes the pool drop it.
		if _, err := c.ExecContext(context.WithoutCancel(ctx), sqlMigrateUnlock); err != nil {
			_ = c.Raw(func(any) error { return driver.ErrBadConn })
		}
	}, nil
}

// pgUnavailable is Unavailable for Postgres errors: the conditions outside
// the program that usually pass.
func pgUnavailable(err error) (string, bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "53100": // disk_full
			return "storage is full", true
		case pe.Code == "25006": // read_only_sql_transaction: a standby, or read-only by setting
			return "storage is read-only", true
		case pe.Code == "55P03", pe.Code == "53300", pe.Code == "57P03", // lock_not_available, too_many_connections, cannot_connect_now
			isSerialization(err): // still losing to concurrent transactions after inTx's retries
			return "storage is busy", true
		case strings.HasPrefix(pe.Code, "08"), pe.Code == "57P01", pe.Code == "58030": // connection exceptions, admin_shutdown, io_error
			return "storage cannot be written", true
		}
		return "", false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.Timeout(err) {
		return "storage cannot be reached", true
	}
	return "", false
}

// dsnPasswords finds the passwords a DSN may carry, even one that does not
// parse: the URL's user info, a password= query value, or a password=
// keyword (quoted or not).
func dsnPasswords(dsn string) []string {
	var out []string
	if rest, ok := cutScheme(dsn); ok {
		if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
				out = append(out, pw)
				if u, err := url.PathUnescape(pw); err == nil {
					out = append(out, u)
				}
			}
		}
		if _, query, ok := strings.Cut(rest, "?"); ok {
			if v, err := url.ParseQuery(query); err == nil {
				out = append(out, v["password"]...)
			}
			for _, kv := range strings.Split(query, "&") {
				if k, v, _ := strings.Cut(kv, "="); k == "password" {
					out = append(out, v)
				}
			}
		}
		return compact(out)
	}
	// key=value pairs: password=secret or password='sec ret' (\' and \\ escaped).
	for i := 0; ; {
		j := strings.Index(dsn[i:], "password")
		if j < 0 {
			break
		}
		i += j + len("password")
		rest := strings.TrimLeft(dsn[i:], " \t")
		if !strings.HasPrefix(rest, "=") {
			continue
		}
		rest = strings.TrimLeft(rest[1:], " \t")
		var val strings.Builder
		if strings.HasPrefix(rest, "'") {
			for k := 1; k < len(rest) && rest[k] != '\''; k++ {
				if rest[k] == '\\' && k+1 < len(rest) {
					k++
				}
				val.WriteByte(rest[k])
			}
		} else {
			end := strings.IndexAny(rest, " \t")
			if end < 0 {
				end = len(rest)
			}
			val.WriteString(rest[:end])
		}
		out = append(out, val.String())
	}
	return compact(out)
}

func cutScheme(dsn string) (string, bool) {
	for _, p := range []string{"postgres://", "postgresql://"} {
		if rest, ok := strings.CutPrefix(dsn, p); ok {
			return rest, true
		}
	}
	return "", false
}

func compact(ss []string) []string {
	out := ss[:0]
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// redactErr hides each secret in err's text; errors.Is and As still see
// through it.
func redactErr(err error, secrets []string) error {
	secrets = compact(secrets)
	if err == nil || len(secrets) == 0 {
		return err
	}
	// Longest first: a shorter secret inside a longer one must not leave
	// the longer one's tail.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	return &redactedError{err: err, secrets: secrets}
}

type redactedError struct {
	err     error
	secrets []string
}

func (e *redactedError) Error() string {
	msg := e.err.Error()
	for _, s := range e.secrets {
		msg = strings.ReplaceAll(msg, s, "***")
	}
	return msg
}

func (e *redactedError) Unwrap() error { return e.err }
