package store

import (
	"context"
	"database/sql"
	"fmt"
)

// migration is one schema change. Versions start at 1 and increase by one;
// a migration, once released, is never edited: add a new one instead.
//
// The SQL is SQLite's; on Postgres it runs after dialect.ddl, so one list of
// migrations serves both backends and a new migration must stay within what
// ddl rewrites (INTEGER, BLOB, "id INTEGER PRIMARY KEY", WITHOUT ROWID, an
// FTS4 table) and what both accept as is.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations are applied in order, the pending ones in one transaction.
var migrations = []migration{
	{1, "conversations, turns and inbox", migration1},
	{2, "summaries and state", migration2},
	{3, "pairing codes and approved users", migration3},
	{4, "schedules", migration4},
	{5, "approvals and plans", migrationApprovals},
	{6, "memories, profiles, learning cursors and skill proposals", migration6},
	{7, "replicas and leases", migrationCluster},
	{8, "reply parts", migrationReplyParts},
	{9, "outbox of undelivered replies", migrationOutbox},
	{10, "files and scheduled runs in the outbox", migrationOutboxFiles},
	{11, "request size of turns", migrationRequestSize},
	{12, "one learning pass for memory and profile", migrationLearningPass},
	{13, "untrusted scheduled jobs", migrationScheduleUntrusted},
	{14, "the chat of a pairing, and greetings owed to approved users", migrationPairingChat},
	{15, "delivery statuses", migrationDeliveryStatus},
	{16, "token kinds per step and turn", migrationTokenKinds},
	{17, "channel state", migrationChannelState},
}

// Times are INTEGER UTC unix milliseconds everywhere. Optional foreign keys
// (turns.inbox_id, messages.turn_id, deliveries.turn_id) are NULL when unset.
const migration1 = `
CREATE TABLE chats (
	id         INTEGER PRIMARY KEY,
	channel    TEXT    NOT NULL,
	chat_key   TEXT    NOT NULL,
	type       TEXT    NOT NULL DEFAULT '',
	title      TEXT    NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	UNIQUE (channel, chat_key)
);

CREATE TABLE sessions (
	id         INTEGER PRIMARY KEY,
	chat_id    INTEGER NOT NULL REFERENCES chats (id),
	started_at INTEGER NOT NULL,
	ended_at   INTEGER
);
CREATE INDEX sessions_chat ON sessions (chat_id, id);
-- At most one open session per chat.
CREATE UNIQUE INDEX sessions_open ON sessions (chat_id) WHERE ended_at IS NULL;

CREATE TABLE inbox (
	id          INTEGER PRIMARY KEY,
	channel     TEXT    NOT NULL,
	chat_key    TEXT    NOT NULL,
	message_id  TEXT    NOT NULL,
	user_id     TEXT    NOT NULL DEFAULT '',
	payload     BLOB    NOT NULL,
	status      TEXT    NOT NULL CHECK (status IN ('pending', 'done', 'skipped')),
	received_at INTEGER NOT NULL,
	finished_at INTEGER,
	UNIQUE (channel, chat_key, message_id)
);
CREATE INDEX inbox_pending ON inbox (id) WHERE status = 'pending';

CREATE TABLE turns (
	id                INTEGER PRIMARY KEY,
	chat_id           INTEGER NOT NULL REFERENCES chats (id),
	session_id        INTEGER NOT NULL REFERENCES sessions (id),
	inbox_id          INTEGER REFERENCES inbox (id),
	user_id           TEXT    NOT NULL DEFAULT '',
	channel           TEXT    NOT NULL DEFAULT '',
	kind              TEXT    NOT NULL CHECK (kind <> ''),
	status            TEXT    NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'cancelled')),
	stop_reason       TEXT    NOT NULL DEFAULT '',
	error             TEXT    NOT NULL DEFAULT '',
	model             TEXT    NOT NULL DEFAULT '',
	steps             INTEGER NOT NULL DEFAULT 0,
	prompt_tokens     INTEGER NOT NULL DEFAULT 0,
	completion_tokens INTEGER NOT NULL DEFAULT 0,
	total_tokens      INTEGER NOT NULL DEFAULT 0,
	started_at        INTEGER NOT NULL,
	ended_at          INTEGER,
	duration_ms       INTEGER
);
CREATE INDEX turns_chat ON turns (chat_id, id);
CREATE INDEX turns_session ON turns (session_id);
CREATE INDEX turns_running ON turns (id) WHERE status = 'running';
CREATE INDEX turns_inbox ON turns (inbox_id, id) WHERE inbox_id IS NOT NULL;
CREATE INDEX turns_user ON turns (user_id, started_at);

-- tool_calls: JSON array of llm.ToolCall, NULL when none.
-- images: JSON array of {mime, url, size}; image bytes are never stored.
CREATE TABLE messages (
	id           INTEGER PRIMARY KEY,
	session_id   INTEGER NOT NULL REFERENCES sessions (id),
	turn_id      INTEGER REFERENCES turns (id),
	role         TEXT    NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
	content      TEXT    NOT NULL DEFAULT '',
	tool_calls   TEXT,
	tool_call_id TEXT    NOT NULL DEFAULT '',
	name         TEXT    NOT NULL DEFAULT '',
	images       TEXT,
	hidden       INTEGER NOT NULL DEFAULT 0,
	created_at   INTEGER NOT NULL
);
CREATE INDEX messages_session ON messages (session_id, id);
CREATE INDEX messages_turn ON messages (turn_id);

CREATE TABLE deliveries (
	id              INTEGER PRIMARY KEY,
	inbox_id        INTEGER NOT NULL REFERENCES inbox (id),
	turn_id         INTEGER REFERENCES turns (id),
	platform_msg_id TEXT    NOT NULL DEFAULT '',
	delivered_at    INTEGER NOT NULL
);
CREATE INDEX deliveries_inbox ON deliveries (inbox_id);
-- A platform message confirmed twice is one delivery; unknown ids ('') are not merged.
CREATE UNIQUE INDEX deliveries_platform ON deliveries (inbox_id, platform_msg_id) WHERE platform_msg_id <> '';
`

const migration2 = `
CREATE TABLE summaries (
	id               INTEGER PRIMARY KEY,
	session_id       INTEGER NOT NULL REFERENCES sessions (id),
	up_to_message_id INTEGER NOT NULL REFERENCES messages (id),
	text             TEXT    NOT NULL,
	created_at       INTEGER NOT NULL
);
CREATE INDEX summaries_session ON summaries (session_id, id);

CREATE TABLE state (
	key        TEXT    PRIMARY KEY,
	value      TEXT    NOT NULL,
	updated_at INTEGER NOT NULL
) WITHOUT ROWID;
`

const (
	sqlCreateSchemaVersion = `CREATE TABLE IF NOT EXISTS schema_version (
	version    INTEGER PRIMARY KEY,
	name       TEXT    NOT NULL,
	applied_at INTEGER NOT NULL
)`
	sqlMaxSchemaVersion = `SELECT COALESCE(MAX(version), 0) FROM schema_version`
	// Postgres only.
	sqlSchemaVersionExists = `SELECT to_regclass('schema_version') IS NOT NULL`
	sqlInsertVersion       = `INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)`
)

// migrator is what *sql.DB and *sql.Conn have in common.
type migrator interface {
	querier
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// migrate applies the migrations newer than the database's schema version.
// They run in one transaction that re-reads the version first. On
// SQLite the transaction is IMMEDIATE, so two processes opening the same
// file at once apply each migration once. On Postgres, where DDL takes no
// lock on tables that do not exist yet, the whole run holds an advisory
// lock per schema (migrateLock) instead.
func migrate(ctx context.Context, db *sql.DB, d *dialect, ms []migration, nowMS int64, onLockWait func()) error {
	if !d.postgres {
		return migrateOn(ctx, db, d, ms, nowMS)
	}
	c, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer c.Close()
	unlock, err := migrateLock(ctx, c, onLockWait)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer unlock()
	return migrateOn(ctx, c, d, ms, nowMS)
}

func migrateOn(ctx context.Context, db migrator, d *dialect, ms []migration, nowMS int64) error {
	// Postgres refuses CREATE TABLE IF NOT EXISTS in a read-only session
	// even when the table exists; such a database is up to date or not
	// usable, and Ping reports it.
	exists := false
	if d.postgres {
		if err := db.QueryRowContext(ctx, sqlSchemaVersionExists).Scan(&exists); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	if !exists {
		if _, err := db.ExecContext(ctx, d.ddl(sqlCreateSchemaVersion)); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	var have int
	if err := db.QueryRowContext(ctx, sqlMaxSchemaVersion).Scan(&have); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if latest := len(ms); have > latest {
		return &NewerSchemaError{Have: have, Latest: latest}
	}
	for i, m := range ms {
		if m.version != i+1 {
			return fmt.Errorf("migrate: migration %q has version %d, want %d", m.name, m.version, i+1)
		}
	}
	if have == len(ms) {
		return nil
	}
	return applyMigrations(ctx, db, d, ms, nowMS)
}

// applyMigrations applies the migrations newer than the version it reads
// in its transaction, all in that one transaction: an upgrade (or a fresh
// store's schema) is whole or not at all, and costs one commit, not one a
// version.
func applyMigrations(ctx context.Context, db migrator, d *dialect, ms []migration, nowMS int64) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	var have int
	if err := tx.QueryRowContext(ctx, sqlMaxSchemaVersion).Scan(&have); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, m := range ms[min(have, len(ms)):] { // another process may have got here first
		if _, err := tx.ExecContext(ctx, d.ddl(m.sql)); err != nil {
			return fmt.Errorf("migrate: version %d (%s): %w", m.version, m.name, err)
		}
		if _, err := tx.ExecContext(ctx, d.rebind(sqlInsertVersion), m.version, m.name, nowMS); err != nil {
			return fmt.Errorf("migrate: version %d (%s): %w", m.version, m.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
