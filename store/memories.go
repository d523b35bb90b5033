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

// Learned is what a learning pass commits together with its cursor.
type Learned struct {
	Memories []NewMemory
	Profile  []ProfileEntry
}

// LearnPass stores what a learning pass learned from the messages after
// from up to upTo (memories, profile entries) and moves the cursor there,
// all in one transaction: a pass that fails leaves nothing behind.
func (s *Store) LearnPass(ctx context.Context, c Cursor, from, upTo int64, l Learned) ([]MemoryChange, error) {
	var out []MemoryChange
	err := s.learn(ctx, c, from, upTo, func(tx conn, now int64) error {
		out = out[:0]
		for i, nm := range l.Memories {
			ch, err := addMemoryTx(ctx, tx, nm, now)
			if err != nil {
				return fmt.Errorf("memory %d: %w", i, err)
			}
			out = append(out, ch)
		}
		for _, e := range l.Profile {
			if err := addProfileTx(ctx, tx, e, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: learn: %w", err)
	}
	return out, nil
}

// LearnMemories is LearnPass with memories only.
func (s *Store) LearnMemories(ctx context.Context, c Cursor, from, upTo int64, ms []NewMemory) ([]MemoryChange, error) {
	return s.LearnPass(ctx, c, from, upTo, Learned{Memories: ms})
}
