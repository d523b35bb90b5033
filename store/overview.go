package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-gateway/switchboard/llm"
)

// Read-only queries across chats, for the dashboard and operators' tools.

// ChatSummary is a chat with its activity, for listings.
type ChatSummary struct {
	Chat
	Turns      int       // turns run in the chat
	LastActive time.Time // the latest turn's start, or the chat's creation
}

// UsagePoint is the token usage of the turns started in one time bucket.
type UsagePoint struct {
	Start time.Time // the bucket's start (UTC)
	Turns int
	Usage llm.Usage
}

const (
	sqlRecentTurns  = `SELECT ` + sqlTurnColumns + ` FROM turns ORDER BY id DESC LIMIT ?`
	sqlTurnMessages = `SELECT ` + sqlMsgColumns + ` FROM messages WHERE turn_id = ? ORDER BY id`
	sqlChatList     = `SELECT c.id, c.channel, c.chat_key, c.type, c.title, c.created_at,
			COUNT(t.id), COALESCE(MAX(t.started_at), c.created_at) AS last
		FROM chats c LEFT JOIN turns t ON t.chat_id = c.id
		GROUP BY c.id ORDER BY last DESC, c.id DESC LIMIT ?`
	// Buckets are whole multiples of the bucket length since the epoch, so
	// they line up across calls.
	sqlUsageSeries = `SELECT (started_at / ?) * ? AS bucket, COUNT(*),
			SUM(prompt_tokens), SUM(completion_tokens), SUM(total_tokens), SUM(cached_tokens), SUM(reasoning_tokens)
		FROM turns WHERE started_at >= ? GROUP BY bucket ORDER BY bucket`
	// Users the bot learned something about: a profile entry or a memory of
	// their own (user keys), the most recently learned first.
	sqlLearnedUsers = `SELECT key FROM (
			SELECT user_key AS key, MAX(created_at) AS at FROM profile_entries GROUP BY user_key
			UNION ALL
			SELECT owner AS key, MAX(updated_at) AS at FROM memories WHERE scope = 'user' AND superseded_by IS NULL GROUP BY owner) AS learned
		GROUP BY key ORDER BY MAX(at) DESC LIMIT ?`
)

// RecentTurns returns up to limit turns across all chats, newest first.
func (s *Store) RecentTurns(ctx context.Context, limit int) ([]Turn, error) {
	ts, err := s.queryTurns(ctx, sqlRecentTurns, s.d.limit(limit))
	if err != nil {
		return nil, fmt.Errorf("store: recent turns: %w", err)
	}
	return ts, nil
}

// TurnMessages returns the messages a turn wrote (its user message, the
// assistant's steps with their tool calls, and the tool results), in order.
func (s *Store) TurnMessages(ctx context.Context, turnID int64) ([]Message, error) {
	rows, err := s.db.QueryContext(ctx, sqlTurnMessages, turnID)
	if err != nil {
		return nil, fmt.Errorf("store: messages of turn %d: %w", turnID, err)
	}
	defer rows.Close()
	var out []Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, fmt.Errorf("store: messages of turn %d: %w", turnID, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: messages of turn %d: %w", turnID, err)
	}
	return out, nil
}

// Chats returns up to limit chats, the most recently active first.
func (s *Store) Chats(ctx context.Context, limit int) ([]ChatSummary, error) {
	out, err := queryAll(ctx, s.db, scanChatSummary, sqlChatList, s.d.limit(limit))
	if err != nil {
		return nil, fmt.Errorf("store: chats: %w", err)
	}
	return out, nil
}

func scanChatSummary(r rowScanner) (ChatSummary, error) {
	var c ChatSummary
	var created, last int64
	if err := r.Scan(&c.ID, &c.Channel, &c.Key, &c.Type, &c.Title, &created, &c.Turns, &last); err != nil {
		return c, err
	}
	c.CreatedAt, c.LastActive = fromMS(created), fromMS(last)
	return c, nil
}

// UsageSeries sums token usage of the turns started at or after since, per
// bucket of the given length (at least a second), oldest first. Buckets
// without turns are left out.
func (s *Store) UsageSeries(ctx context.Context, since time.Time, bucket time.Duration) ([]UsagePoint, error) {
	ms := bucket.Milliseconds()
	if ms < 1000 {
		return nil, fmt.Errorf("store: usage series: bucket %s is shorter than a second", bucket)
	}
	rows, err := s.db.QueryContext(ctx, sqlUsageSeries, ms, ms, since.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("store: usage series: %w", err)
	}
	defer rows.Close()
	var out []UsagePoint
	for rows.Next() {
		var p UsagePoint
		var start int64
		if err := rows.Scan(&start, &p.Turns, &p.Usage.PromptTokens, &p.Usage.CompletionTokens, &p.Usage.TotalTokens,
			&p.Usage.CachedTokens, &p.Usage.ReasoningTokens); err != nil {
			return nil, fmt.Errorf("store: usage series: %w", err)
		}
		p.Start = fromMS(start)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: usage series: %w", err)
	}
	return out, nil
}

// LearnedUsers returns up to limit user keys (see UserKey) with a profile
// entry or a memory of their own, the most recently learned about first.
func (s *Store) LearnedUsers(ctx context.Context, limit int) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, sqlLearnedUsers, s.d.limit(limit))
	if err != nil {
		return nil, fmt.Errorf("store: learned users: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("store: learned users: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: learned users: %w", err)
	}
	return out, nil
}

// sqlLastInbound is the stored message behind the chat's newest turn that
// came from one (turns_chat walks the chat's turns from the newest).
const sqlLastInbound = `SELECT i.payload FROM turns t JOIN inbox i ON i.id = t.inbox_id
	WHERE t.chat_id = ? ORDER BY t.id DESC LIMIT 1`

// LastInbound returns the payload (JSON of the normalised message) of the
// message that started the chat's newest turn, for the name of who wrote
// it; an error matching ErrNotFound when no turn of the chat came from a
// stored message.
func (s *Store) LastInbound(ctx context.Context, chatID int64) ([]byte, error) {
	var payload []byte
	err := s.db.QueryRowContext(ctx, sqlLastInbound, chatID).Scan(&payload)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: last inbound of chat %d: %w", chatID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: last inbound of chat %d: %w", chatID, err)
	}
	return payload, nil
}
