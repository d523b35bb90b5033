package store

import (
	"context"
	"fmt"
	"strings"
)

// Search for the dashboard: chats by their key or title, turns by the text
// of their messages (the user's message and the assistant's replies). Both
// are a plain substring match, letters compared without case (in SQLite
// only ASCII letters fold), over a scan of the table: an operator's look-up,
// not a query the gateway runs per message.

// MaxSearchLen bounds a search's text, in bytes.
const MaxSearchLen = 200

const (
	sqlSearchTurns = `SELECT ` + sqlTurnColumns + ` FROM turns WHERE id IN (
			SELECT turn_id FROM messages WHERE turn_id IS NOT NULL AND role IN ('user', 'assistant')
				AND LOWER(content) LIKE ? ESCAPE '\')
		ORDER BY id DESC LIMIT ?`
	sqlSearchChats = `SELECT c.id, c.channel, c.chat_key, c.type, c.title, c.created_at,
			COUNT(t.id), COALESCE(MAX(t.started_at), c.created_at) AS last
		FROM chats c LEFT JOIN turns t ON t.chat_id = c.id
		WHERE LOWER(c.chat_key) LIKE ? ESCAPE '\' OR LOWER(c.title) LIKE ? ESCAPE '\'
		GROUP BY c.id ORDER BY last DESC, c.id DESC LIMIT ?`
)

// likePattern is a LIKE pattern matching text anywhere, lowercased, with
// LIKE's wildcards in it escaped.
func likePattern(text string) string {
	esc := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(strings.ToLower(text))
	return "%" + esc + "%"
}

func checkSearch(text string) (string, error) {
	text = strings.TrimSpace(text)
	switch {
	case text == "":
		return "", fmt.Errorf("store: search: the text is empty")
	case len(text) > MaxSearchLen:
		return "", fmt.Errorf("store: search: the text is %d bytes, more than %d", len(text), MaxSearchLen)
	}
	return text, nil
}

// SearchTurns returns up to limit turns, newest first, whose user message
// or assistant replies contain text.
func (s *Store) SearchTurns(ctx context.Context, text string, limit int) ([]Turn, error) {
	text, err := checkSearch(text)
	if err != nil {
		return nil, err
	}
	ts, err := s.queryTurns(ctx, sqlSearchTurns, likePattern(text), s.d.limit(limit))
	if err != nil {
		return nil, fmt.Errorf("store: search turns: %w", err)
	}
	return ts, nil
}

// SearchChats returns up to limit chats, the most recently active first,
// whose key or title contains text.
func (s *Store) SearchChats(ctx context.Context, text string, limit int) ([]ChatSummary, error) {
	text, err := checkSearch(text)
	if err != nil {
		return nil, err
	}
	p := likePattern(text)
	out, err := queryAll(ctx, s.db, scanChatSummary, sqlSearchChats, p, p, s.d.limit(limit))
	if err != nil {
		return nil, fmt.Errorf("store: search chats: %w", err)
	}
	return out, nil
}
