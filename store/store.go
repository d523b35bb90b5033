// Package store keeps Switchboard's durable state in one SQLite file (the
// embedded default) or in a PostgreSQL database: chats, sessions, turns and
// their messages, the inbox of inbound platform messages, confirmed
// deliveries, compaction summaries and small key/value state.
//
// Every write that has to be all-or-nothing (a turn's first messages, one
// agent step) is a single transaction, so a crash leaves the store exactly as
// it was after the previous step. On SQLite it is IMMEDIATE: one writer at a
// time. On Postgres it is SERIALIZABLE and run again when a concurrent
// transaction wins (see inTx), so several processes sharing one database get
// the same all-or-nothing, one-after-the-other outcome. Timestamps are stored
// as UTC unix milliseconds and read back as UTC times.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mattn/go-sqlite3" // registers the "sqlite3" driver (cgo)
)

// ErrNotFound is matched (errors.Is) by errors for rows that do not exist.
var ErrNotFound = errors.New("store: not found")

// ErrTurnNotRunning is matched (errors.Is) when a step is committed to, or a
// finish recorded for, a turn that has already finished.
var ErrTurnNotRunning = errors.New("store: turn is not running")

// dsnOptions are applied by the driver to every pooled connection.
//   - WAL lets readers run alongside the one writer.
//   - busy_timeout makes a writer wait up to 5 s for the lock instead of
//     failing with "database is locked".
//   - _txlock=immediate takes the write lock at BEGIN: a deferred transaction
//     that reads and then writes cannot wait for the lock and fails at once
//     (LIBRARIES.md §4 measured 143 failures in 200 without it).
//   - synchronous=NORMAL is safe against process crashes in WAL mode; a power
//     cut may lose the last commits but never corrupts the file.
//   - _stmt_cache_size keeps each connection's prepared statements: parsing
//     the same SQL again was a tenth of a busy gateway's CPU.
//   - _cache_size bounds each connection's page cache at pageCacheKiB
//     (SQLite's default is 2000 KiB): it is C memory, which the Go
//     collector does not see and glibc keeps, and with maxIdleConns
//     connections it grew with the database, a few megabytes after a long
//     conversation. The pages a turn needs (the tables' upper levels, the
//     chat's latest rows) fit; the rest comes from the OS page cache.
const dsnOptions = "_journal_mode=WAL&_busy_timeout=5000&_foreign_keys=on&_synchronous=NORMAL&_txlock=immediate&_stmt_cache_size=128&_cache_size=-" + pageCacheKiB

// pageCacheKiB is each SQLite connection's page cache, in KiB.
const pageCacheKiB = "512"

// maxIdleConns keeps connections warm through a burst of turns: opening one
// costs a schema parse, and with only a few kept, a busy gateway spent a
// sixth of its CPU reopening them. On SQLite it is also the most open at
// once: one file takes one writer at a time, a thousand turns opening a
// connection each only to close it after cost a tenth of the CPU, and each
// connection's page cache and statements cost memory (8 held 1000 chats as
// fast as 16, with 10 MB less at the peak). (No
// store method holds a connection while it waits for another, so a bounded
// pool cannot deadlock.) ReleaseIdle closes them once quiet.
const maxIdleConns = 8

// keepWarm is how many idle SQLite connections ReleaseIdle keeps open, their
// page caches emptied: the connections a turn uses at once. Closed, the
// next turn opened them again (a schema parse, its statements prepared
// anew): the first reply after every quiet time was 15 ms slower than a
// warm one, 60 ms on a busy machine. Kept, they hold their schema and
// prepared statements, some hundreds of kilobytes of C memory.
const keepWarm = 2

// Store is the SQLite- or Postgres-backed store. It is safe for concurrent
// use, also by several processes sharing one database.
type Store struct {
	raw *sql.DB
	db  conn // raw, with each query rewritten for the dialect
	d   *dialect
	now func() time.Time

	maxPages int          // WithMaxPages; 0: no cap
	readOnly bool         // WithReadOnly
	log      *slog.Logger // WithLogger; nil: slog.Default()
	// group queues this process's SQLite transactions for groupCommit, and
	// groupLead is held by the caller running them. Left to SQLite's busy
	// handler, which polls with sleeps, some of a thousand concurrent
	// writers waited past busyTimeout and failed with "database is locked"
	// (TestLoadThousandChats); other processes still wait in it.
	groupMu   sync.Mutex
	group     []*groupTx
	groupLead chan struct{}
	// writeErr holds the last write that failed because the database could
	// not take writes (see Unavailable), until a write succeeds; Ping
	// reports it.
	writeErr atomic.Pointer[error]
	// damage is the damage to the SQLite file seen so far (damage.go);
	// path is the file.
	damage damageSeen
	path   string
	// created is set when Open made the schema of a new, empty SQLite
	// file (see Created).
	created bool
	// hbConn is the connection Heartbeat keeps for itself (see there).
	hbMu   sync.Mutex
	hbConn *sql.Conn
	// history caches recent messages (SQLite only; see historyCache).
	history *historyCache
	// noApproval and noPlan remember chats without a pending approval or
	// an open plan (SQLite only; see absentSet).
	noApproval, noPlan *absentSet
	// walDirty is set by every commit on SQLite and cleared by the
	// checkpointer, which stopCheckpoint ends.
	walDirty       atomic.Bool
	stopCheckpoint func()
	// hooks let this package's tests see the store's retries and groups.
	hooks hooks
	// txs counts the transactions callers asked for (inTx and the
	// writes), commits those the database ran (a group commit runs
	// several in one): see TxCounts.
	txs, commits atomic.Uint64
}

// TxCounts returns how many transactions callers asked for since Open,
// and how many the database committed (or tried to): on SQLite a group
// commit runs several callers' transactions in one.
func (s *Store) TxCounts() (transactions, commits uint64) {
	return s.txs.Load(), s.commits.Load()
}

// hooks are called, when set, at points the tests of this package wait on
// or count; they are set before the store is used (withHooks at Open).
type hooks struct {
	connectRetry func()         // before each retry in connect
	txRetry      func()         // before each retry in inTx
	migrateWait  func()         // when migrateLock finds the lock taken, before it waits
	group        func(size int) // the size of each group runGroup runs
}

// withHooks sets the store's test hooks (this package's tests).
func withHooks(set func(*hooks)) Option {
	return func(s *Store) { set(&s.hooks) }
}

// Option configures a Store at Open.
type Option func(*Store)

// newStore is a Store of the dialect with opts applied, before its pool is
// opened (setDB).
func newStore(d *dialect, opts []Option) *Store {
	s := &Store{d: d, now: time.Now, groupLead: make(chan struct{}, 1)}
	for _, o := range opts {
		o(s)
	}
	return s
}

// setDB makes raw the store's connection pool.
//
// On SQLite a statement outside a transaction runs to its end once
// started (uncancelled): it reads a local file and takes no lock that
// waits (writes go through groupCommit), so a cancellation could cut
// short only a long scan. For a cancellable context, database/sql watches
// each query's rows from a goroutine of its own, a wakeup and a context
// each; a message's reads started half a dozen, which waited in the run
// queue with everything else.
func (s *Store) setDB(raw *sql.DB) {
	s.raw = raw
	s.db = conn{q: raw, d: s.d}
	if !s.d.postgres {
		s.db.q = uncancelled{q: raw}
		s.db.seen = s.noteErr
	}
}

// WithClock sets the clock used for every timestamp the store writes
// (default time.Now). Tests pass a fake clock.
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.now = now }
}

// uriEscaper escapes the characters that would end the path part of the
// "file:" URI the driver hands to SQLite.
var uriEscaper = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// dsn is the driver's data source name for the database file at path.
func dsn(path string) string { return "file:" + uriEscaper.Replace(path) + "?" + dsnOptions }

// Driver names, as in the store.driver setting.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// OpenDriver opens the store with the named driver ("" means sqlite):
// source is the database file's path for sqlite and the connection string
// (DSN) for postgres.
func OpenDriver(ctx context.Context, driver, source string, opts ...Option) (*Store, error) {
	switch driver {
	case "", DriverSQLite:
		return Open(ctx, source, opts...)
	case DriverPostgres:
		return OpenPostgres(ctx, source, opts...)
	}
	return nil, fmt.Errorf("store: unknown driver %q (want %s or %s)", driver, DriverSQLite, DriverPostgres)
}

// Open opens (creating it and its parent directories if needed) the SQLite
// database file at path and applies any pending migrations. path must be a
// file path: WAL does not work on ":memory:".
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	if path == "" {
		return nil, errors.New("store: open: empty path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, openError(path, err)
	}
	s := newStore(sqliteDialect, opts)
	s.path = path
	s.history = newHistoryCache(historyBudget)
	s.noApproval, s.noPlan = newAbsentSet(), newAbsentSet()
	db := s.openDB(path)
	db.SetMaxOpenConns(maxIdleConns)
	db.SetMaxIdleConns(maxIdleConns)
	if err := connect(ctx, db, s.hooks.connectRetry); err != nil {
		_ = db.Close()
		if Damaged(err) {
			return nil, fmt.Errorf("store: open %s: %w", path, &DamageError{Path: path, Err: err, Backups: backupsBeside(path)})
		}
		return nil, openError(path, err)
	}
	s.setDB(db)
	if !s.readOnly {
		have, err := schemaVersionOf(ctx, s.raw)
		if err != nil {
			err = fmt.Errorf("read schema version: %w", err)
		} else {
			s.created = have == 0
			err = s.backupBeforeMigrate(ctx, path, have)
		}
		if err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("store: open %s: %w", path, err)
		}
	}
	// Like every statement on SQLite (see setDB), the migration runs to its
	// end once started: with a cancellable context go-sqlite3 runs each of
	// its hundred statements on a goroutine of its own, 12 % of the time a
	// new store takes.
	mctx := ctx
	if ctx.Err() == nil {
		mctx = context.WithoutCancel(ctx)
	}
	if err := migrate(mctx, db, sqliteDialect, migrations, s.nowMS(), s.hooks.migrateWait); err != nil {
		_ = db.Close()
		var ne *NewerSchemaError
		if errors.As(err, &ne) {
			ne.Path = path
			if bs := preUpgradeBackups(path); len(bs) > 0 {
				ne.Backup = bs[len(bs)-1]
			}
			return nil, fmt.Errorf("store: open %s: %w", path, ne)
		}
		if Damaged(err) {
			return nil, fmt.Errorf("store: open %s: %w", path, &DamageError{Path: path, Err: err, Backups: backupsBeside(path)})
		}
		return nil, openError(path, err)
	}
	if !s.readOnly {
		s.startCheckpointer()
	}
	return s, nil
}

// openError is the error of a failed Open: when the directory is the cause
// (SQLite only says "unable to open database file" when it cannot create
// its -shm on a read-only mount), a *DirError naming the cause and the
// fix, with what SQLite or the OS said after it.
func openError(path string, err error) error {
	if cause, fix := checkDir(path); cause != "" {
		return &DirError{Path: path, Cause: cause, Fix: fix, Err: err}
	}
	return fmt.Errorf("store: open %s: %w", path, err)
}

// busyTimeout matches _busy_timeout in dsnOptions.
const busyTimeout = 5 * time.Second

// connect opens the pool's first connection. The driver runs PRAGMA
// journal_mode=WAL on each new connection; converting a new file needs
// exclusive access, and while another process holds the write lock SQLite
// answers SQLITE_BUSY at once instead of running the busy handler (waiting
// could deadlock). Two processes creating the same file at once hit this
// (about one race in twelve when measured), so the loser retries for up to
// busyTimeout. Once the file is in WAL mode the pragma takes no lock.
// onRetry, if set, runs before each retry (tests).
func connect(ctx context.Context, db *sql.DB, onRetry func()) error {
	deadline := time.Now().Add(busyTimeout)
	wait := 5 * time.Millisecond
	for {
		err := db.PingContext(ctx)
		var se sqlite3.Error
		if err == nil || !errors.As(err, &se) || se.Code != sqlite3.ErrBusy || time.Now().After(deadline) {
			return err
		}
		if onRetry != nil {
			onRetry()
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// Created reports whether Open made this SQLite database's schema: the
// file was new or empty, so there is no data to check or back up.
func (s *Store) Created() bool { return s.created }

// Close closes the database.
func (s *Store) Close() error {
	if s.stopCheckpoint != nil {
		s.stopCheckpoint()
	}
	s.hbMu.Lock()
	if s.hbConn != nil {
		_ = s.hbConn.Close()
		s.hbConn = nil
	}
	s.hbMu.Unlock()
	if err := s.raw.Close(); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// ReleaseIdle closes the pool's idle connections, with their page caches
// and prepared statements (C memory on SQLite, server sessions on
// PostgreSQL), but one on PostgreSQL and keepWarm on SQLite, whose page
// caches it empties (PRAGMA shrink_memory); the pool opens connections
// again as turns need them. The gateway calls it when it goes quiet
// (internal/gcpace).
func (s *Store) ReleaseIdle() {
	keep := 1
	if s.d.name == DriverSQLite {
		keep = keepWarm
	}
	s.raw.SetMaxIdleConns(keep)
	s.raw.SetMaxIdleConns(maxIdleConns)
	if keep == 1 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var conns []*sql.Conn
	for range min(s.raw.Stats().Idle, keep) {
		c, err := s.raw.Conn(ctx)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		_, _ = c.ExecContext(ctx, "PRAGMA shrink_memory")
		_ = c.Close()
	}
}

// DB returns the underlying database, for packages that own their own
// tables. Its SQL dialect is Driver's.
func (s *Store) DB() *sql.DB { return s.raw }

// Driver names the backend: DriverSQLite or DriverPostgres.
func (s *Store) Driver() string { return s.d.name }

// Bounds of inTx's retries on Postgres: like a writer waiting for SQLite's
// lock, a transaction gives up after losing to concurrent ones for
// busyTimeout.
const (
	retryFirstWait = time.Millisecond
	retryMaxWait   = 50 * time.Millisecond
)

// inTx runs fn in one transaction and commits it if fn returns nil.
//
// On SQLite the transaction is IMMEDIATE (_txlock): it holds the write lock
// from BEGIN, so transactions run one after the other; this process's
// concurrent ones share one (see groupCommit).
//
// On Postgres it is SERIALIZABLE: the outcome is that of some one-at-a-time
// order, which is what IMMEDIATE transactions give on SQLite, so every
// read-check-write in fn (a turn still running, a job still due when it was
// read, a cursor still where it was, an open session still missing) holds at
// commit even with other processes writing the same rows. A transaction
// that loses to a concurrent one fails with a serialization failure (40001,
// or 40P01 for a deadlock) and none of it is stored; it is then run again
// from the start after a short jittered backoff, for up to busyTimeout. fn
// must therefore set everything it reports afresh on each run.
func (s *Store) inTx(ctx context.Context, fn func(tx conn) error) error {
	return s.tx(ctx, sql.LevelSerializable, fn)
}

// inTxSimple is inTx for a transaction whose every check is made by the
// statement that writes (an UPDATE's WHERE on one row, which PostgreSQL
// evaluates again on the row it locks) or reads what never changes (the
// chat a session belongs to): on Postgres it runs at READ COMMITTED.
// SERIALIZABLE tracks reads by index page, so a burst of turns beginning
// and ending in different chats failed each other's transactions: 250–400
// retries for 300 turns (TestBurstOfTurnsNeedsFewRetries).
func (s *Store) inTxSimple(ctx context.Context, fn func(tx conn) error) error {
	return s.tx(ctx, sql.LevelReadCommitted, fn)
}

// tx is inTx with the isolation level Postgres runs fn at.
func (s *Store) tx(ctx context.Context, iso sql.IsolationLevel, fn func(tx conn) error) (err error) {
	defer func() { s.noteWrite(err) }()
	s.txs.Add(1)
	if !s.d.postgres {
		return s.groupCommit(ctx, fn)
	}
	opts := &sql.TxOptions{Isolation: iso}
	deadline := time.Now().Add(busyTimeout)
	wait := retryFirstWait
	for {
		err := s.txOnce(ctx, opts, fn)
		if err == nil || !isSerialization(err) || time.Now().After(deadline) {
			return err
		}
		if s.hooks.txRetry != nil {
			s.hooks.txRetry()
		}
		t := time.NewTimer(wait/2 + rand.N(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, retryMaxWait)
	}
}

// txOnce runs fn in one transaction and commits it if fn returns nil.
func (s *Store) txOnce(ctx context.Context, opts *sql.TxOptions, fn func(tx conn) error) error {
	s.commits.Add(1)
	tx, err := s.raw.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(conn{q: tx, d: s.d}); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// nowMS is the store clock as UTC unix milliseconds.
func (s *Store) nowMS() int64 { return s.now().UnixMilli() }

// fromMS turns stored unix milliseconds into a UTC time.
func fromMS(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// fromNullMS is fromMS for nullable columns.
func fromNullMS(ms sql.NullInt64) *time.Time {
	if !ms.Valid {
		return nil
	}
	t := fromMS(ms.Int64)
	return &t
}

// nullID stores 0 as NULL, for optional foreign keys.
func nullID(id int64) sql.NullInt64 { return sql.NullInt64{Int64: id, Valid: id != 0} }

// rowScanner is *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

// Stats are row counts for metrics and the status page.
type Stats struct {
	Chats    int
	Sessions int
	Messages int
	Turns    map[string]int // by status: running, completed, failed, cancelled
	Inbox    map[string]int // by status: pending, done, skipped
}

const (
	sqlStatsCounts = `SELECT (SELECT COUNT(*) FROM chats), (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM messages)`
	sqlStatsTurns  = `SELECT status, COUNT(*) FROM turns GROUP BY status`
	sqlStatsInbox  = `SELECT status, COUNT(*) FROM inbox GROUP BY status`
)

// Stats counts chats, sessions, messages, and turns and inbox items by status.
// The counts are read without a transaction and may be mutually a few rows
// apart under concurrent writes.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	st := Stats{Turns: map[string]int{}, Inbox: map[string]int{}}
	if err := s.db.QueryRowContext(ctx, sqlStatsCounts).Scan(&st.Chats, &st.Sessions, &st.Messages); err != nil {
		return Stats{}, fmt.Errorf("store: stats: %w", err)
	}
	for _, q := range []struct {
		sql string
		to  map[string]int
	}{{sqlStatsTurns, st.Turns}, {sqlStatsInbox, st.Inbox}} {
		if err := countByStatus(ctx, s.db, q.sql, q.to); err != nil {
			return Stats{}, fmt.Errorf("store: stats: %w", err)
		}
	}
	return st, nil
}

func countByStatus(ctx context.Context, db conn, query string, to map[string]int) error {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			return err
		}
		to[status] = n
	}
	return rows.Err()
}

const (
	sqlGetState = `SELECT value FROM state WHERE key = ?`
	sqlSetState = `INSERT INTO state (key, value, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`
)

// GetState returns the value stored under key. Keys are free-form; scope them
// by prefix, e.g. "telegram/offset".
func (s *Store) GetState(ctx context.Context, key string) (string, bool, error) {
	var v string
	err := s.db.QueryRowContext(ctx, sqlGetState, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("store: get state %q: %w", key, err)
	}
	return v, true, nil
}

// SetState stores value under key, replacing any previous value.
func (s *Store) SetState(ctx context.Context, key, value string) error {
	if key == "" {
		return errors.New("store: set state: empty key")
	}
	if _, err := s.write(ctx, sqlSetState, key, value, s.nowMS()); err != nil {
		return fmt.Errorf("store: set state %q: %w", key, err)
	}
	return nil
}

const (
	sqlInsertSummary    = `INSERT INTO summaries (session_id, up_to_message_id, text, created_at) VALUES (?, ?, ?, ?)`
	sqlLatestSummary    = `SELECT text, up_to_message_id FROM summaries WHERE session_id = ? ORDER BY id DESC LIMIT 1`
	sqlMessageInSession = `SELECT session_id FROM messages WHERE id = ?`
)

// SaveSummary records that the session's history up to and including message
// upToMessageID is folded into text. Earlier summaries stay (the newest wins).
// The message must belong to the session.
func (s *Store) SaveSummary(ctx context.Context, sessionID, upToMessageID int64, text string) error {
	err := s.inTx(ctx, func(tx conn) error {
		var got int64
		err := tx.QueryRowContext(ctx, sqlMessageInSession, upToMessageID).Scan(&got)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("message %d: %w", upToMessageID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if got != sessionID {
			return fmt.Errorf("message %d belongs to session %d", upToMessageID, got)
		}
		_, err = tx.ExecContext(ctx, sqlInsertSummary, sessionID, upToMessageID, text, s.nowMS())
		return err
	})
	if err != nil {
		return fmt.Errorf("store: save summary of session %d: %w", sessionID, err)
	}
	return nil
}

// LatestSummary returns the newest summary of the session; ok is false if
// there is none.
func (s *Store) LatestSummary(ctx context.Context, sessionID int64) (text string, upToMessageID int64, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, sqlLatestSummary, sessionID).Scan(&text, &upToMessageID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, fmt.Errorf("store: latest summary of session %d: %w", sessionID, err)
	}
	return text, upToMessageID, true, nil
}
