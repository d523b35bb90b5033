package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// What the bot learns after turns: memories (with a full-text index),
// profile entries, the cursors of the background jobs and skill proposals.
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

// ErrCursorMoved is matched (errors.Is) when a background job tries to
// commit from a cursor position that another run has already moved: its
// work is discarded, so nothing is learned twice.
var ErrCursorMoved = errors.New("store: learning cursor moved")

// UserKey identifies a user across channels: "<channel>:<user id>". Profiles,
// private memories and learning cursors are keyed by it.
func UserKey(channel, userID string) string { return channel + ":" + userID }

// ChatOwner is the owner of a chat's shared memories: the chat id in decimal.
func ChatOwner(chatID int64) string { return strconv.FormatInt(chatID, 10) }

// Memory scopes.
const (
	MemoryUser = "user" // private to one user; Owner is their UserKey
	MemoryChat = "chat" // shared by the members of a chat; Owner is ChatOwner
)

// Memory origins.
const (
	OriginExtracted = "extracted" // learned in the background from the user's own messages
	OriginTool      = "tool"      // saved by the model with the remember tool
)

// Memory is a durable fact the bot learned.
type Memory struct {
	ID           int64
	Scope        string // MemoryUser or MemoryChat
	Owner        string
	Text         string
	Origin       string
	ChatID       int64 // the chat it was learned in (0: unknown)
	SourceTurnID int64 // the turn it was learned from (0: unknown)
	SupersededBy int64 // 0 while active
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// Score is SearchMemories' relevance: the matched query terms weighted
	// by rarity, plus a bonus for recently updated memories.
	Score float64
}

// Owners is whose memories a query may see and change. A zero field sees
// nothing of that scope: group chats pass no User, so private memories never
// show there.
type Owners struct {
	User string // a UserKey
	Chat int64  // a chat id
}

func (o Owners) args() (string, string) {
	chat := ""
	if o.Chat != 0 {
		chat = ChatOwner(o.Chat)
	}
	// '' never matches: owner <> '' is a table constraint.
	return o.User, chat
}

// NewMemory is a memory to store.
type NewMemory struct {
	Scope, Owner, Text, Origin string
	ChatID, SourceTurnID       int64
	// Supersedes is an active memory of the same scope and owner that this
	// one replaces (0: none). Any other id is ignored.
	Supersedes int64
}

// MemoryChange reports what storing a NewMemory did.
type MemoryChange struct {
	ID         int64 // the new memory, or the existing one it merged into
	Merged     bool  // an active memory with the same text existed
	Superseded int64 // the memory it replaced, if any
}

const (
	sqlMemCols = `m.id, m.scope, m.owner, m.text, m.origin, COALESCE(m.chat_id, 0), COALESCE(m.source_turn_id, 0),
		COALESCE(m.superseded_by, 0), m.created_at, m.updated_at`
	sqlMemOwned = `((m.scope = 'user' AND m.owner = ?) OR (m.scope = 'chat' AND m.owner = ?))`
	sqlMemDup   = `SELECT id FROM memories WHERE owner = ? AND scope = ? AND norm = ? AND superseded_by IS NULL ORDER BY id LIMIT 1`
	sqlMemMerge = `UPDATE memories SET updated_at = ?, source_turn_id = COALESCE(?, source_turn_id) WHERE id = ?`
	sqlMemIns   = `INSERT INTO memories (scope, owner, text, norm, origin, chat_id, source_turn_id, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlMemActiveOwner = `SELECT scope, owner FROM memories WHERE id = ? AND superseded_by IS NULL`
	sqlMemSupersede   = `UPDATE memories SET superseded_by = ?, updated_at = ? WHERE id = ? AND superseded_by IS NULL`
	sqlFTSInsert      = `INSERT INTO memories_fts (docid, text) VALUES (?, ?)`
	sqlFTSDelete      = `DELETE FROM memories_fts WHERE docid = ?`
	// Two indexed halves rather than one OR, which would scan the table.
	sqlMemList = `SELECT ` + sqlMemCols + ` FROM memories m WHERE m.owner = ? AND m.scope = 'user' AND m.superseded_by IS NULL
		UNION ALL SELECT ` + sqlMemCols + ` FROM memories m WHERE m.owner = ? AND m.scope = 'chat' AND m.superseded_by IS NULL
		ORDER BY 1 LIMIT ?`
	sqlMemGet    = `SELECT ` + sqlMemCols + ` FROM memories m WHERE m.id = ?`
	sqlMemSearch = `SELECT ` + sqlMemCols + `, matchinfo(memories_fts, 'pcnx') FROM memories_fts
		JOIN memories m ON m.id = memories_fts.docid
		WHERE memories_fts MATCH ? AND m.superseded_by IS NULL AND ` + sqlMemOwned
	// The memory and every older version it superseded, directly or not.
	sqlMemChain = `WITH RECURSIVE chain (id) AS (
			SELECT CAST(? AS BIGINT) UNION SELECT m.id FROM memories m JOIN chain c ON m.superseded_by = c.id)
		SELECT id FROM chain`
	sqlMemDelete = `DELETE FROM memories WHERE id = ?`
)

// maxMemoryRunes bounds one memory: a fact is a sentence, not a document.
const maxMemoryRunes = 500

func scanMemory(r rowScanner, extra ...any) (Memory, error) {
	var m Memory
	var created, updated int64
	dest := append([]any{&m.ID, &m.Scope, &m.Owner, &m.Text, &m.Origin, &m.ChatID, &m.SourceTurnID,
		&m.SupersededBy, &created, &updated}, extra...)
	if err := r.Scan(dest...); err != nil {
		return Memory{}, err
	}
	m.CreatedAt, m.UpdatedAt = fromMS(created), fromMS(updated)
	return m, nil
}

// normMemory folds a memory's text for duplicate detection: case, spacing
// and final punctuation do not make a fact new.
func normMemory(text string) string {
	return strings.TrimRight(strings.ToLower(strings.Join(strings.Fields(text), " ")), ".!;, ")
}

func (nm NewMemory) check() error {
	switch {
	case nm.Scope != MemoryUser && nm.Scope != MemoryChat:
		return fmt.Errorf("scope %q is not %q or %q", nm.Scope, MemoryUser, MemoryChat)
	case nm.Owner == "":
		return errors.New("owner is empty")
	case normMemory(nm.Text) == "":
		return errors.New("text is empty")
	case len([]rune(nm.Text)) > maxMemoryRunes:
		return fmt.Errorf("text is longer than %d characters", maxMemoryRunes)
	case nm.Origin != OriginExtracted && nm.Origin != OriginTool:
		return fmt.Errorf("origin %q is unknown", nm.Origin)
	}
	return nil
}

// AddMemory stores one memory (the remember tool). An active memory of the
// same owner with the same text is refreshed instead of duplicated.
func (s *Store) AddMemory(ctx context.Context, nm NewMemory) (MemoryChange, error) {
	var ch MemoryChange
	err := s.inTx(ctx, func(tx conn) error {
		var err error
		ch, err = addMemoryTx(ctx, tx, nm, s.nowMS())
		return err
	})
	if err != nil {
		return MemoryChange{}, fmt.Errorf("store: add memory: %w", err)
	}
	return ch, nil
}

func addMemoryTx(ctx context.Context, tx conn, nm NewMemory, now int64) (MemoryChange, error) {
	if err := nm.check(); err != nil {
		return MemoryChange{}, err
	}
	text := strings.TrimSpace(nm.Text)
	norm := normMemory(text)
	var ch MemoryChange
	err := tx.QueryRowContext(ctx, sqlMemDup, nm.Owner, nm.Scope, norm).Scan(&ch.ID)
	switch {
	case err == nil:
		ch.Merged = true
		if _, err := tx.ExecContext(ctx, sqlMemMerge, now, nullID(nm.SourceTurnID), ch.ID); err != nil {
			return MemoryChange{}, err
		}
	case errors.Is(err, sql.ErrNoRows):
		if ch.ID, err = tx.insertID(ctx, sqlMemIns, nm.Scope, nm.Owner, text, norm, nm.Origin,
			nullID(nm.ChatID), nullID(nm.SourceTurnID), now, now); err != nil {
			return MemoryChange{}, err
		}
		if err := ftsInsert(ctx, tx, ch.ID, text); err != nil {
			return MemoryChange{}, err
		}
	default:
		return MemoryChange{}, err
	}
	if old := nm.Supersedes; old != 0 && old != ch.ID {
		var scope, owner string
		err := tx.QueryRowContext(ctx, sqlMemActiveOwner, old).Scan(&scope, &owner)
		if errors.Is(err, sql.ErrNoRows) {
			return ch, nil // gone or already superseded
		}
		if err != nil {
			return MemoryChange{}, err
		}
		if scope != nm.Scope || owner != nm.Owner {
			return ch, nil // never someone else's memory
		}
		if _, err := tx.ExecContext(ctx, sqlMemSupersede, ch.ID, now, old); err != nil {
			return MemoryChange{}, err
		}
		if _, err := tx.ExecContext(ctx, sqlFTSDelete, old); err != nil {
			return MemoryChange{}, err
		}
		ch.Superseded = old
	}
	return ch, nil
}

// Memories lists the active memories the owners may see, oldest first, up
// to limit (<= 0: all).
func (s *Store) Memories(ctx context.Context, o Owners, limit int) ([]Memory, error) {
	user, chat := o.args()
	rows, err := s.db.QueryContext(ctx, sqlMemList, user, chat, s.d.limit(limit))
	if err != nil {
		return nil, fmt.Errorf("store: memories: %w", err)
	}
	defer rows.Close()
	var out []Memory
	for rows.Next() {
		m, err := scanMemory(rows)
		if err != nil {
			return nil, fmt.Errorf("store: memories: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: memories: %w", err)
	}
	return out, nil
}

// Memory returns one memory (active or superseded) by id.
func (s *Store) Memory(ctx context.Context, id int64) (Memory, error) {
	m, err := scanMemory(s.db.QueryRowContext(ctx, sqlMemGet, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Memory{}, fmt.Errorf("store: memory %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Memory{}, fmt.Errorf("store: memory %d: %w", id, err)
	}
	return m, nil
}

// Relevance weights of SearchMemories. A matched term is worth its inverse
// document frequency (a rare word says more than a common one); recency adds
// at most recencyWeight, halving every recencyHalfLife, so it orders
// memories that match equally well but never outranks a better match much.
const (
	recencyWeight   = 0.5
	recencyHalfLife = 30 * 24 * time.Hour
)

// SearchMemories returns the active memories the owners may see that match
// any of terms, most relevant first, up to limit (<= 0: all). A term is
// letters and digits, optionally ending in * for a prefix match; other terms
// are ignored. Matching folds case and diacritics.
func (s *Store) SearchMemories(ctx context.Context, o Owners, terms []string, limit int) ([]Memory, error) {
	terms = ftsTerms(terms)
	if len(terms) == 0 {
		return nil, nil
	}
	user, chat := o.args()
	var out []Memory
	var err error
	if s.d.postgres {
		out, err = s.searchPostgres(ctx, user, chat, terms)
	} else {
		out, err = s.searchSQLite(ctx, user, chat, strings.Join(terms, " OR "))
	}
	if err != nil {
		return nil, fmt.Errorf("store: search memories: %w", err)
	}
	now := s.now()
	for i, m := range out {
		age := max(now.Sub(m.UpdatedAt), 0)
		out[i].Score += recencyWeight * math.Exp2(-float64(age)/float64(recencyHalfLife))
	}
	slices.SortStableFunc(out, func(a, b Memory) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		return int(b.ID - a.ID)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// searchSQLite runs an FTS4 MATCH query (from ftsQuery) over the memories
// the owners may see, with Score the terms' weights from matchinfo.
func (s *Store) searchSQLite(ctx context.Context, user, chat, query string) ([]Memory, error) {
	rows, err := s.db.QueryContext(ctx, sqlMemSearch, query, user, chat)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Memory
	for rows.Next() {
		var info []byte
		m, err := scanMemory(rows, &info)
		if err != nil {
			return nil, err
		}
		m.Score = matchScore(info)
		out = append(out, m)
	}
	return out, rows.Err()
}

// matchScore reads matchinfo(…, 'pcnx'): phrases p, columns c, rows n, then
// for each phrase and column the hits in this row, in all rows, and the
// number of rows with a hit. Each phrase found in the row adds ln(1 + n/rows).
func matchScore(info []byte) float64 {
	v := make([]uint32, len(info)/4)
	for i := range v {
		v[i] = binary.NativeEndian.Uint32(info[4*i:])
	}
	if len(v) < 3 {
		return 0
	}
	p, c, n := int(v[0]), int(v[1]), float64(v[2])
	score := 0.0
	for i := range p {
		for j := range c {
			k := 3 + 3*(i*c+j)
			if k+2 >= len(v) || v[k] == 0 || v[k+2] == 0 {
				continue
			}
			score += math.Log1p(n / float64(v[k+2]))
		}
	}
	return score
}

// DeleteMemory forgets an active memory the owners may see, with every older
// version it superseded. It reports whether there was such a memory.
func (s *Store) DeleteMemory(ctx context.Context, o Owners, id int64) (bool, error) {
	user, chat := o.args()
	found := false
	err := s.inTx(ctx, func(tx conn) error {
		found = false
		var scope, owner string
		err := tx.QueryRowContext(ctx, sqlMemActiveOwner, id).Scan(&scope, &owner)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if !(scope == MemoryUser && owner == user && user != "") && !(scope == MemoryChat && owner == chat && chat != "") {
			return nil
		}
		rows, err := tx.QueryContext(ctx, sqlMemChain, id)
		if err != nil {
			return err
		}
		var ids []int64
		for rows.Next() {
			var x int64
			if err := rows.Scan(&x); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, x)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		// An older version points at the one that superseded it, so the
		// oldest goes first (foreign keys are checked per statement).
		slices.Reverse(ids)
		for _, x := range ids {
			if _, err := tx.ExecContext(ctx, sqlFTSDelete, x); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, sqlMemDelete, x); err != nil {
				return err
			}
		}
		found = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("store: delete memory %d: %w", id, err)
	}
	return found, nil
}

// Cursor names a background job's position for one user in one chat.
type Cursor struct {
	Job     string // "memory", "profile", "skills", …
	Channel string
	UserID  string // the platform user id
	ChatID  int64
}

// UserKey is the cursor's user as a UserKey.
func (c Cursor) UserKey() string { return UserKey(c.Channel, c.UserID) }

const (
	sqlCursorGet = `SELECT message_id FROM learning_cursors WHERE job = ? AND user_key = ? AND chat_id = ?`
	sqlCursorSet = `INSERT INTO learning_cursors (job, user_key, chat_id, message_id, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (job, user_key, chat_id) DO UPDATE SET message_id = excluded.message_id, updated_at = excluded.updated_at`
	// The user's messages in the chat: their own turns (not scheduled jobs),
	// finished ones only, and never past a turn that is still running.
	sqlLearnWhere = `FROM messages m JOIN turns t ON t.id = m.turn_id
		WHERE t.chat_id = ? AND t.channel = ? AND t.user_id = ? AND t.kind = 'user'
			AND m.hidden = 0 AND m.role IN ('user', 'assistant')
			AND m.turn_id < COALESCE((SELECT MIN(id) FROM turns
				WHERE chat_id = ? AND channel = ? AND user_id = ? AND status = 'running'), 9223372036854775807)`
	sqlLearnMsgs    = `SELECT ` + sqlMsgColumnsM + ` ` + sqlLearnWhere + ` AND m.id > ? ORDER BY m.id LIMIT ?`
	sqlLearnBacklog = `SELECT COALESCE(MIN(id), 1) - 1 FROM (SELECT m.id ` + sqlLearnWhere + ` ORDER BY m.id DESC LIMIT ?) AS backlog`
	sqlMsgColumnsM  = `m.id, m.session_id, COALESCE(m.turn_id, 0), m.role, m.content, m.tool_calls, m.tool_call_id, m.name,
		m.images, m.hidden, m.created_at`
)

func (c Cursor) check() error {
	if c.Job == "" || c.Channel == "" || c.UserID == "" || c.ChatID == 0 {
		return fmt.Errorf("cursor %+v: job, channel, user and chat are required", c)
	}
	return nil
}

// LearningCursor returns the job's position: the id of the newest message it
// has processed. A job that has never run for this user and chat starts
// before the user's last backlog messages there, so switching learning on
// for an old conversation costs a bounded amount of work.
func (s *Store) LearningCursor(ctx context.Context, c Cursor, backlog int) (int64, error) {
	if err := c.check(); err != nil {
		return 0, fmt.Errorf("store: learning cursor: %w", err)
	}
	var pos int64
	err := s.db.QueryRowContext(ctx, sqlCursorGet, c.Job, c.UserKey(), c.ChatID).Scan(&pos)
	if err == nil {
		return pos, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("store: learning cursor %s: %w", c.Job, err)
	}
	err = s.inTx(ctx, func(tx conn) error {
		err := tx.QueryRowContext(ctx, sqlCursorGet, c.Job, c.UserKey(), c.ChatID).Scan(&pos)
		if err == nil || !errors.Is(err, sql.ErrNoRows) {
			return err // another run created it meanwhile
		}
		if err := tx.QueryRowContext(ctx, sqlLearnBacklog, c.ChatID, c.Channel, c.UserID,
			c.ChatID, c.Channel, c.UserID, max(backlog, 0)).Scan(&pos); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, sqlCursorSet, c.Job, c.UserKey(), c.ChatID, pos, s.nowMS())
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: learning cursor %s: %w", c.Job, err)
	}
	return pos, nil
}

// LearningMessages returns up to limit of the user's visible user and
// assistant messages in the chat after message id after, oldest first: the
// messages of the user's finished turns, never tool results, hidden nudges
// or other users' turns.
func (s *Store) LearningMessages(ctx context.Context, c Cursor, after int64, limit int) ([]Message, error) {
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("store: learning messages: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, sqlLearnMsgs, c.ChatID, c.Channel, c.UserID, c.ChatID, c.Channel, c.UserID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: learning messages: %w", err)
	}
	defer rows.Close()
	var out []Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, fmt.Errorf("store: learning messages: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: learning messages: %w", err)
	}
	return out, nil
}

// learn runs a job's writes and moves its cursor from from to upTo in one
// transaction. If the cursor is no longer at from, nothing is written and
// the error matches ErrCursorMoved.
func (s *Store) learn(ctx context.Context, c Cursor, from, upTo int64, fn func(tx conn, now int64) error) error {
	if err := c.check(); err != nil {
		return err
	}
	if upTo < from {
		return fmt.Errorf("cursor would move back from %d to %d", from, upTo)
	}
	return s.inTx(ctx, func(tx conn) error {
		var pos int64
		err := tx.QueryRowContext(ctx, sqlCursorGet, c.Job, c.UserKey(), c.ChatID).Scan(&pos)
		if errors.Is(err, sql.ErrNoRows) {
			pos = 0
		} else if err != nil {
			return err
		}
		if pos != from {
			return fmt.Errorf("%w: at %d, not %d", ErrCursorMoved, pos, from)
		}
		now := s.nowMS()
		if fn != nil {
			if err := fn(tx, now); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, sqlCursorSet, c.Job, c.UserKey(), c.ChatID, upTo, now)
		return err
	})
}

// AdvanceCursor moves a job's cursor from from to upTo without other writes
// (a batch with nothing to learn).
func (s *Store) AdvanceCursor(ctx context.Context, c Cursor, from, upTo int64) error {
	if err := s.learn(ctx, c, from, upTo, nil); err != nil {
		return fmt.Errorf("store: advance %s cursor: %w", c.Job, err)
	}
	return nil
}

// LearnMemories stores the memories extracted from the messages after from
// up to upTo and moves the cursor there, all in one transaction.
func (s *Store) LearnMemories(ctx context.Context, c Cursor, from, upTo int64, ms []NewMemory) ([]MemoryChange, error) {
	var out []MemoryChange
	err := s.learn(ctx, c, from, upTo, func(tx conn, now int64) error {
		out = out[:0]
		for i, nm := range ms {
			ch, err := addMemoryTx(ctx, tx, nm, now)
			if err != nil {
				return fmt.Errorf("memory %d: %w", i, err)
			}
			out = append(out, ch)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: learn memories: %w", err)
	}
	return out, nil
}

// Profile dimensions, in the order a profile lists them.
const (
	ProfileName        = "name"
	ProfileLanguage    = "language"
	ProfileTimezone    = "timezone"
	ProfilePreferences = "preferences"
	ProfileStyle       = "style"
)

// ProfileDimensions lists the dimensions in display order.
var ProfileDimensions = []string{ProfileName, ProfileLanguage, ProfileTimezone, ProfilePreferences, ProfileStyle}

// ProfileEntry is one dated value of a profile dimension; the newest entry
// of a dimension is in force.
type ProfileEntry struct {
	ID           int64
	UserKey      string
	Dimension    string
	Value        string
	SourceTurnID int64
	CreatedAt    time.Time
}

const (
	sqlProfileCols = `id, user_key, dimension, value, COALESCE(source_turn_id, 0), created_at`
	sqlProfile     = `SELECT ` + sqlProfileCols + ` FROM profile_entries p WHERE user_key = ?
		AND id = (SELECT MAX(id) FROM profile_entries q WHERE q.user_key = p.user_key AND q.dimension = p.dimension)`
	sqlProfileCurrent = `SELECT value FROM profile_entries WHERE user_key = ? AND dimension = ? ORDER BY id DESC LIMIT 1`
	sqlProfileInsert  = `INSERT INTO profile_entries (user_key, dimension, value, source_turn_id, created_at) VALUES (?, ?, ?, ?, ?)`
	sqlProfileForget  = `DELETE FROM profile_entries WHERE user_key = ? AND (dimension = ? OR ? = '')`
	sqlProfileKeysFor = `SELECT DISTINCT user_key FROM profile_entries WHERE dimension = ?
		AND substr(user_key, instr(user_key, ':') + 1) = ? ORDER BY user_key`
)

// Profile returns the entries in force for the user, in ProfileDimensions
// order; dimensions without an entry are left out.
func (s *Store) Profile(ctx context.Context, userKey string) ([]ProfileEntry, error) {
	rows, err := s.db.QueryContext(ctx, sqlProfile, userKey)
	if err != nil {
		return nil, fmt.Errorf("store: profile: %w", err)
	}
	defer rows.Close()
	var out []ProfileEntry
	for rows.Next() {
		var e ProfileEntry
		var created int64
		if err := rows.Scan(&e.ID, &e.UserKey, &e.Dimension, &e.Value, &e.SourceTurnID, &created); err != nil {
			return nil, fmt.Errorf("store: profile: %w", err)
		}
		e.CreatedAt = fromMS(created)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: profile: %w", err)
	}
	slices.SortFunc(out, func(a, b ProfileEntry) int {
		return slices.Index(ProfileDimensions, a.Dimension) - slices.Index(ProfileDimensions, b.Dimension)
	})
	return out, nil
}

func addProfileTx(ctx context.Context, tx conn, e ProfileEntry, now int64) error {
	if !slices.Contains(ProfileDimensions, e.Dimension) {
		return fmt.Errorf("unknown profile dimension %q", e.Dimension)
	}
	value := strings.TrimSpace(e.Value)
	if e.UserKey == "" || value == "" {
		return errors.New("profile entry: user and value are required")
	}
	var cur string
	err := tx.QueryRowContext(ctx, sqlProfileCurrent, e.UserKey, e.Dimension).Scan(&cur)
	if err == nil && cur == value {
		return nil // unchanged: no new entry
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	_, err = tx.ExecContext(ctx, sqlProfileInsert, e.UserKey, e.Dimension, value, nullID(e.SourceTurnID), now)
	return err
}

// SetProfile records a new entry for a dimension (an unchanged value adds
// nothing).
func (s *Store) SetProfile(ctx context.Context, e ProfileEntry) error {
	err := s.inTx(ctx, func(tx conn) error { return addProfileTx(ctx, tx, e, s.nowMS()) })
	if err != nil {
		return fmt.Errorf("store: set profile: %w", err)
	}
	return nil
}

// LearnProfile records profile entries learned from the messages after from
// up to upTo and moves the cursor there, in one transaction.
func (s *Store) LearnProfile(ctx context.Context, c Cursor, from, upTo int64, es []ProfileEntry) error {
	err := s.learn(ctx, c, from, upTo, func(tx conn, now int64) error {
		for _, e := range es {
			if err := addProfileTx(ctx, tx, e, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: learn profile: %w", err)
	}
	return nil
}

// ProfileUsers returns the UserKeys, on any channel, of the users with the
// platform id userID who have entries of the dimension.
func (s *Store) ProfileUsers(ctx context.Context, userID, dimension string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, sqlProfileKeysFor, dimension, userID)
	if err != nil {
		return nil, fmt.Errorf("store: profile users: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("store: profile users: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: profile users: %w", err)
	}
	return out, nil
}

// ForgetProfile deletes every entry of the dimension ("" for all) of the
// user's profile and returns how many there were.
func (s *Store) ForgetProfile(ctx context.Context, userKey, dimension string) (int64, error) {
	res, err := s.write(ctx, sqlProfileForget, userKey, dimension, dimension)
	if err != nil {
		return 0, fmt.Errorf("store: forget profile: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("store: forget profile: %w", err)
	}
	return n, nil
}

// Skill proposal statuses.
const (
	ProposalProposed = "proposed" // waiting for the operator
	ProposalApplied  = "applied"  // the skill's learned overlay
	ProposalReverted = "reverted" // was applied, then reverted
	ProposalReplaced = "replaced" // was applied, then a newer proposal was
)

// SkillProposal is a suggested improvement of a skill's instructions.
type SkillProposal struct {
	ID           int64
	Skill        string
	BaseHash     string // of the operator's instructions it improves on
	Instructions string // the full proposed instructions
	Assessment   string // worked, failed or mixed
	Notes        string // what worked or failed, and why the change
	SourceTurnID int64
	Status       string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

const (
	sqlPropCols = `id, skill, base_hash, instructions, assessment, notes, COALESCE(source_turn_id, 0), status, created_at, updated_at`
	sqlPropIns  = `INSERT INTO skill_proposals (skill, base_hash, instructions, assessment, notes, source_turn_id, status, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, 'proposed', ?, ?)`
	sqlPropGet     = `SELECT ` + sqlPropCols + ` FROM skill_proposals WHERE id = ?`
	sqlPropList    = `SELECT ` + sqlPropCols + ` FROM skill_proposals ORDER BY id DESC LIMIT ?`
	sqlPropApplied = `SELECT ` + sqlPropCols + ` FROM skill_proposals WHERE status = 'applied' ORDER BY skill`
	sqlPropOfSkill = `SELECT ` + sqlPropCols + ` FROM skill_proposals WHERE skill = ? AND status = 'applied'`
	sqlPropReplace = `UPDATE skill_proposals SET status = 'replaced', updated_at = ? WHERE skill = ? AND status = 'applied'`
	sqlPropStatus  = `UPDATE skill_proposals SET status = ?, updated_at = ? WHERE id = ?`
)

func scanProposal(r rowScanner) (SkillProposal, error) {
	var p SkillProposal
	var created, updated int64
	if err := r.Scan(&p.ID, &p.Skill, &p.BaseHash, &p.Instructions, &p.Assessment, &p.Notes, &p.SourceTurnID,
		&p.Status, &created, &updated); err != nil {
		return SkillProposal{}, err
	}
	p.CreatedAt, p.UpdatedAt = fromMS(created), fromMS(updated)
	return p, nil
}

func applyProposalTx(ctx context.Context, tx conn, id int64, skill string, now int64) error {
	if _, err := tx.ExecContext(ctx, sqlPropReplace, now, skill); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, sqlPropStatus, ProposalApplied, now, id)
	return err
}

// LearnSkillProposals stores proposals made from the messages after from up
// to upTo and moves the cursor there, in one transaction; with apply, each
// becomes its skill's applied overlay at once. It returns the new ids.
func (s *Store) LearnSkillProposals(ctx context.Context, c Cursor, from, upTo int64, ps []SkillProposal, apply bool) ([]int64, error) {
	var ids []int64
	err := s.learn(ctx, c, from, upTo, func(tx conn, now int64) error {
		ids = ids[:0]
		for _, p := range ps {
			if p.Skill == "" || strings.TrimSpace(p.Instructions) == "" {
				return errors.New("skill proposal: skill and instructions are required")
			}
			id, err := tx.insertID(ctx, sqlPropIns, p.Skill, p.BaseHash, p.Instructions, p.Assessment, p.Notes,
				nullID(p.SourceTurnID), now, now)
			if err != nil {
				return err
			}
			if apply {
				if err := applyProposalTx(ctx, tx, id, p.Skill, now); err != nil {
					return err
				}
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: learn skill proposals: %w", err)
	}
	return ids, nil
}

func (s *Store) queryProposals(ctx context.Context, query string, args ...any) ([]SkillProposal, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SkillProposal
	for rows.Next() {
		p, err := scanProposal(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// SkillProposals lists up to limit proposals (<= 0: all), newest first.
func (s *Store) SkillProposals(ctx context.Context, limit int) ([]SkillProposal, error) {
	ps, err := s.queryProposals(ctx, sqlPropList, s.d.limit(limit))
	if err != nil {
		return nil, fmt.Errorf("store: skill proposals: %w", err)
	}
	return ps, nil
}

// SkillProposal returns one proposal, or an error matching ErrNotFound.
func (s *Store) SkillProposal(ctx context.Context, id int64) (SkillProposal, error) {
	p, err := scanProposal(s.db.QueryRowContext(ctx, sqlPropGet, id))
	if errors.Is(err, sql.ErrNoRows) {
		return SkillProposal{}, fmt.Errorf("store: skill proposal %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return SkillProposal{}, fmt.Errorf("store: skill proposal %d: %w", id, err)
	}
	return p, nil
}

// AppliedSkillProposals returns the learned overlay: the applied proposal of
// each skill that has one, by skill name.
func (s *Store) AppliedSkillProposals(ctx context.Context) ([]SkillProposal, error) {
	ps, err := s.queryProposals(ctx, sqlPropApplied)
	if err != nil {
		return nil, fmt.Errorf("store: applied skill proposals: %w", err)
	}
	return ps, nil
}

// ApplySkillProposal makes the proposal its skill's overlay, replacing the
// one applied before (if any).
func (s *Store) ApplySkillProposal(ctx context.Context, id int64) (SkillProposal, error) {
	var p SkillProposal
	err := s.inTx(ctx, func(tx conn) error {
		var err error
		p, err = scanProposal(tx.QueryRowContext(ctx, sqlPropGet, id))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil || p.Status == ProposalApplied {
			return err
		}
		now := s.nowMS()
		if err := applyProposalTx(ctx, tx, id, p.Skill, now); err != nil {
			return err
		}
		p.Status, p.UpdatedAt = ProposalApplied, fromMS(now)
		return nil
	})
	if err != nil {
		return SkillProposal{}, fmt.Errorf("store: apply skill proposal %d: %w", id, err)
	}
	return p, nil
}

// RevertSkill removes the skill's learned overlay, so the operator's
// instructions apply again. It returns the proposal that was applied, or an
// error matching ErrNotFound when there was none.
func (s *Store) RevertSkill(ctx context.Context, skill string) (SkillProposal, error) {
	var p SkillProposal
	err := s.inTx(ctx, func(tx conn) error {
		var err error
		p, err = scanProposal(tx.QueryRowContext(ctx, sqlPropOfSkill, skill))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		now := s.nowMS()
		if _, err := tx.ExecContext(ctx, sqlPropStatus, ProposalReverted, now, p.ID); err != nil {
			return err
		}
		p.Status, p.UpdatedAt = ProposalReverted, fromMS(now)
		return nil
	})
	if err != nil {
		return SkillProposal{}, fmt.Errorf("store: revert skill %q: %w", skill, err)
	}
	return p, nil
}
