package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Chat is a conversation place on one platform (a DM, a group, a channel).
type Chat struct {
	ID        int64
	Channel   string // adapter name: "telegram", "discord", "console"
	Key       string // the platform's chat id, unique within Channel
	Type      string // "private", "group", … as the adapter reports it
	Title     string
	CreatedAt time.Time
}

// Session is one stretch of a chat's history; /new ends it and opens another.
type Session struct {
	ID, ChatID int64
	StartedAt  time.Time
	EndedAt    *time.Time // nil while open
	Messages   int        // stored messages, hidden ones included
}

const (
	// An empty type or title never erases a known one: some platform events
	// carry no title.
	sqlUpsertChat = `INSERT INTO chats (channel, chat_key, type, title, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (channel, chat_key) DO UPDATE SET
			type = CASE WHEN excluded.type <> '' THEN excluded.type ELSE chats.type END,
			title = CASE WHEN excluded.title <> '' THEN excluded.title ELSE chats.title END,
			updated_at = excluded.updated_at
		WHERE (excluded.type <> '' AND excluded.type <> chats.type)
			OR (excluded.title <> '' AND excluded.title <> chats.title)`
	sqlChatColumns = `id, channel, chat_key, type, title, created_at`
	sqlChatByKey   = `SELECT ` + sqlChatColumns + ` FROM chats WHERE channel = ? AND chat_key = ?`
	sqlChatByID    = `SELECT ` + sqlChatColumns + ` FROM chats WHERE id = ?`
	sqlChatExists  = `SELECT 1 FROM chats WHERE id = ?`
	sqlSessionCols = `s.id, s.chat_id, s.started_at, s.ended_at, (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id)`
	sqlOpenSession = `SELECT ` + sqlSessionCols + ` FROM sessions s WHERE s.chat_id = ? AND s.ended_at IS NULL`
	// sqlOpenSessionLite is sqlOpenSession without counting its messages
	// (Messages is 0): for every turn, where only the id matters and the
	// count grew with the conversation.
	sqlOpenSessionLite = `SELECT s.id, s.chat_id, s.started_at, s.ended_at, 0 FROM sessions s WHERE s.chat_id = ? AND s.ended_at IS NULL`
	sqlSessionByID     = `SELECT ` + sqlSessionCols + ` FROM sessions s WHERE s.id = ?`
	sqlSessions        = `SELECT ` + sqlSessionCols + ` FROM sessions s WHERE s.chat_id = ? ORDER BY s.id DESC`
	sqlInsertSess      = `INSERT INTO sessions (chat_id, started_at) VALUES (?, ?)`
	// sqlOpenSessionOnce opens a session for an existing chat without one
	// open (sessions_open is unique on chat_id WHERE ended_at IS NULL).
	sqlOpenSessionOnce = `INSERT INTO sessions (chat_id, started_at) SELECT ?, ? WHERE EXISTS (SELECT 1 FROM chats WHERE id = ?)
		ON CONFLICT (chat_id) WHERE ended_at IS NULL DO NOTHING`
	sqlEndOpenSess = `UPDATE sessions SET ended_at = ? WHERE chat_id = ? AND ended_at IS NULL`
)

func scanChat(r rowScanner) (Chat, error) {
	var c Chat
	var created int64
	if err := r.Scan(&c.ID, &c.Channel, &c.Key, &c.Type, &c.Title, &created); err != nil {
		return Chat{}, err
	}
	c.CreatedAt = fromMS(created)
	return c, nil
}

func scanSession(r rowScanner) (Session, error) {
	var s Session
	var started int64
	var ended sql.NullInt64
	if err := r.Scan(&s.ID, &s.ChatID, &started, &ended, &s.Messages); err != nil {
		return Session{}, err
	}
	s.StartedAt = fromMS(started)
	s.EndedAt = fromNullMS(ended)
	return s, nil
}

// EnsureChat returns the chat (channel, key), creating it if needed. A
// non-empty chatType or title that differs from the stored one replaces it.
func (s *Store) EnsureChat(ctx context.Context, channel, key, chatType, title string) (Chat, error) {
	if channel == "" || key == "" {
		return Chat{}, fmt.Errorf("store: ensure chat %q/%q: channel and key are required", channel, key)
	}
	// Fast path without the write lock: the chat usually exists unchanged.
	c, err := scanChat(s.db.QueryRowContext(ctx, sqlChatByKey, channel, key))
	if err == nil && (chatType == "" || chatType == c.Type) && (title == "" || title == c.Title) {
		return c, nil
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Chat{}, fmt.Errorf("store: ensure chat %s/%s: %w", channel, key, err)
	}
	err = s.inTx(ctx, func(tx conn) error {
		now := s.nowMS()
		if _, err := tx.ExecContext(ctx, sqlUpsertChat, channel, key, chatType, title, now, now); err != nil {
			return err
		}
		var err error
		c, err = scanChat(tx.QueryRowContext(ctx, sqlChatByKey, channel, key))
		return err
	})
	if err != nil {
		return Chat{}, fmt.Errorf("store: ensure chat %s/%s: %w", channel, key, err)
	}
	return c, nil
}

// ChatByID returns the chat with the id, or an error matching ErrNotFound.
func (s *Store) ChatByID(ctx context.Context, id int64) (Chat, error) {
	c, err := scanChat(s.db.QueryRowContext(ctx, sqlChatByID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Chat{}, fmt.Errorf("store: chat %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Chat{}, fmt.Errorf("store: chat %d: %w", id, err)
	}
	return c, nil
}

// CurrentSession returns the chat's open session, opening one if there is
// none, with its message count. It fails with ErrNotFound if the chat does
// not exist.
func (s *Store) CurrentSession(ctx context.Context, chatID int64) (Session, error) {
	return s.currentSession(ctx, chatID, sqlOpenSession)
}

// OpenSession is CurrentSession without the message count (Messages is
// 0), which costs a scan of the session's messages: what a turn uses.
func (s *Store) OpenSession(ctx context.Context, chatID int64) (Session, error) {
	return s.currentSession(ctx, chatID, sqlOpenSessionLite)
}

func (s *Store) currentSession(ctx context.Context, chatID int64, query string) (Session, error) {
	// Fast path without the write lock: the session usually exists.
	sess, err := scanSession(s.db.QueryRowContext(ctx, query, chatID))
	if err == nil {
		return sess, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("store: current session of chat %d: %w", chatID, err)
	}
	// One statement that opens it unless another process just did (the
	// unique index on a chat's open session): no transaction to retry,
	// which on PostgreSQL a burst of new chats made abort each other. On
	// SQLite it joins the group commit: on its own it would wait for the
	// write lock in SQLite's busy handler, which sleeps.
	if _, err := s.write(ctx, sqlOpenSessionOnce, chatID, s.nowMS(), chatID); err != nil {
		return Session{}, fmt.Errorf("store: current session of chat %d: %w", chatID, err)
	}
	sess, err = scanSession(s.db.QueryRowContext(ctx, query, chatID))
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("store: current session of chat %d: chat %d: %w", chatID, chatID, ErrNotFound)
	}
	if err != nil {
		return Session{}, fmt.Errorf("store: current session of chat %d: %w", chatID, err)
	}
	return sess, nil
}

// currentSessionTx returns the chat's open session, opening one if needed.
func currentSessionTx(ctx context.Context, tx conn, chatID, nowMS int64) (Session, error) {
	sess, err := scanSession(tx.QueryRowContext(ctx, sqlOpenSessionLite, chatID))
	if !errors.Is(err, sql.ErrNoRows) {
		return sess, err
	}
	return openSessionTx(ctx, tx, chatID, nowMS)
}

func openSessionTx(ctx context.Context, tx conn, chatID, nowMS int64) (Session, error) {
	var one int
	err := tx.QueryRowContext(ctx, sqlChatExists, chatID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("chat %d: %w", chatID, ErrNotFound)
	}
	if err != nil {
		return Session{}, err
	}
	id, err := tx.insertID(ctx, sqlInsertSess, chatID, nowMS)
	if err != nil {
		return Session{}, err
	}
	return Session{ID: id, ChatID: chatID, StartedAt: fromMS(nowMS)}, nil
}

// NewSession ends the chat's open session (if any) and opens a new one. The
// old session's messages stay readable through Messages.
func (s *Store) NewSession(ctx context.Context, chatID int64) (Session, error) {
	var sess Session
	err := s.inTx(ctx, func(tx conn) error {
		now := s.nowMS()
		if _, err := tx.ExecContext(ctx, sqlEndOpenSess, now, chatID); err != nil {
			return err
		}
		var err error
		sess, err = openSessionTx(ctx, tx, chatID, now)
		return err
	})
	if err != nil {
		return Session{}, fmt.Errorf("store: new session of chat %d: %w", chatID, err)
	}
	return sess, nil
}

// Session returns the session with the id, or an error matching ErrNotFound.
func (s *Store) Session(ctx context.Context, id int64) (Session, error) {
	sess, err := scanSession(s.db.QueryRowContext(ctx, sqlSessionByID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("store: session %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Session{}, fmt.Errorf("store: session %d: %w", id, err)
	}
	return sess, nil
}

// Sessions returns the chat's sessions, newest first.
func (s *Store) Sessions(ctx context.Context, chatID int64) ([]Session, error) {
	rows, err := s.db.QueryContext(ctx, sqlSessions, chatID)
	if err != nil {
		return nil, fmt.Errorf("store: sessions of chat %d: %w", chatID, err)
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("store: sessions of chat %d: %w", chatID, err)
		}
		out = append(out, sess)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: sessions of chat %d: %w", chatID, err)
	}
	return out, nil
}
