package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ErrCursorMoved is matched (errors.Is) when a background job tries to
// commit from a cursor position that another run has already moved: its
// work is discarded, so nothing is learned twice.
var ErrCursorMoved = errors.New("store: learning cursor moved")

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
