package store

// What the bot learns after turns: memories (with a full-text index,
// memories.go), profile entries (profiles.go), the cursors of the background
// jobs (cursors.go) and skill proposals (proposals.go). This file holds
// their schema and the key they share.
//
// memories_fts is an FTS4 table: go-sqlite3 compiles FTS3/FTS4 in by default,
// FTS5 only with a build tag. It indexes the active memories only (docid =
// memories.id); a superseded or forgotten memory leaves it in the same
// transaction. unicode61 folds case and diacritics in every script. On
// Postgres the table holds the same documents as lexemes (see fts.go).
const migration6 = `
CREATE TABLE memories (
	id             INTEGER PRIMARY KEY,
	scope          TEXT    NOT NULL CHECK (scope IN ('user', 'chat')),
	owner          TEXT    NOT NULL CHECK (owner <> ''),
	text           TEXT    NOT NULL CHECK (text <> ''),
	norm           TEXT    NOT NULL,
	origin         TEXT    NOT NULL CHECK (origin IN ('extracted', 'tool')),
	chat_id        INTEGER REFERENCES chats (id),
	source_turn_id INTEGER REFERENCES turns (id),
	superseded_by  INTEGER REFERENCES memories (id),
	created_at     INTEGER NOT NULL,
	updated_at     INTEGER NOT NULL
);
CREATE INDEX memories_owner ON memories (owner, scope, norm) WHERE superseded_by IS NULL;
CREATE INDEX memories_superseded ON memories (superseded_by) WHERE superseded_by IS NOT NULL;
CREATE VIRTUAL TABLE memories_fts USING fts4 (text, tokenize=unicode61 "remove_diacritics=1");

CREATE TABLE profile_entries (
	id             INTEGER PRIMARY KEY,
	user_key       TEXT    NOT NULL,
	dimension      TEXT    NOT NULL CHECK (dimension IN ('name', 'language', 'timezone', 'preferences', 'style')),
	value          TEXT    NOT NULL CHECK (value <> ''),
	source_turn_id INTEGER REFERENCES turns (id),
	created_at     INTEGER NOT NULL
);
CREATE INDEX profile_user ON profile_entries (user_key, dimension, id);

-- The newest message each background job has processed, per user and chat.
CREATE TABLE learning_cursors (
	job        TEXT    NOT NULL,
	user_key   TEXT    NOT NULL,
	chat_id    INTEGER NOT NULL REFERENCES chats (id),
	message_id INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (job, user_key, chat_id)
) WITHOUT ROWID;

-- base_hash: InstructionsHash of the operator's instructions the proposal
-- improves on; an applied proposal is used only while they are unchanged.
CREATE TABLE skill_proposals (
	id             INTEGER PRIMARY KEY,
	skill          TEXT    NOT NULL,
	base_hash      TEXT    NOT NULL,
	instructions   TEXT    NOT NULL CHECK (instructions <> ''),
	assessment     TEXT    NOT NULL DEFAULT '',
	notes          TEXT    NOT NULL DEFAULT '',
	source_turn_id INTEGER REFERENCES turns (id),
	status         TEXT    NOT NULL CHECK (status IN ('proposed', 'applied', 'reverted', 'replaced')),
	created_at     INTEGER NOT NULL,
	updated_at     INTEGER NOT NULL
);
-- At most one applied proposal (the learned overlay) per skill.
CREATE UNIQUE INDEX skill_proposals_applied ON skill_proposals (skill) WHERE status = 'applied';
`

// UserKey identifies a user across channels: "<channel>:<user id>". Profiles,
// private memories and learning cursors are keyed by it.
func UserKey(channel, userID string) string { return channel + ":" + userID }
