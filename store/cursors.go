package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
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
	// The user's messages in the chat after a message id: their own turns
	// (not scheduled jobs), finished ones only, and never past a turn that
	// is still running. Only the sessions that can hold newer messages are
	// read (sqlLearnSessions: the open one, usually), each through the
	// session index (session_id, id) from the cursor on, in order; sessions
	// follow each other, so (session_id, id) is the order of the ids. The
	// cost is that of the messages since the cursor, whatever the chat's
	// length (see TestLearningQueryPlan).
	sqlLearnMsgs = `SELECT ` + sqlMsgColumnsM + ` FROM messages m INDEXED BY messages_session CROSS JOIN turns t
		WHERE t.id = m.turn_id AND m.session_id IN (` + sqlLearnSessions + `) AND m.id > ? AND +m.turn_id < (` + sqlLearnBarrier + `)
			AND t.channel = ? AND t.user_id = ? AND t.kind = 'user'
			AND m.hidden = 0 AND m.role IN ('user', 'assistant')
		ORDER BY m.session_id, m.id LIMIT ?`
	// The same, newest first, for the backlog of a new cursor.
	sqlLearnBacklog = `SELECT m.id FROM messages m INDEXED BY messages_session CROSS JOIN turns t
		WHERE t.id = m.turn_id AND m.session_id = ? AND +m.turn_id < ?
			AND t.channel = ? AND t.user_id = ? AND t.kind = 'user'
			AND m.hidden = 0 AND m.role IN ('user', 'assistant')
		ORDER BY m.id DESC LIMIT ?`
	// The user's oldest running turn in the chat: nothing from it on is read.
	sqlLearnBarrier = `SELECT COALESCE(MIN(id), 9223372036854775807) FROM turns INDEXED BY turns_running
		WHERE status = 'running' AND chat_id = ? AND channel = ? AND user_id = ?`
	// The sessions of the chat that can hold messages written after the
	// cursor's: the open one and those ended since (sessions_chat_ended).
	sqlLearnSessions = `SELECT id FROM sessions WHERE chat_id = ?
		AND (ended_at IS NULL OR ended_at >= COALESCE((SELECT created_at FROM messages WHERE id = ?), 0))`
	// The chat's sessions, newest first, for a new cursor's backlog.
	sqlLearnRecentSessions = `SELECT id FROM sessions WHERE chat_id = ? ORDER BY id DESC LIMIT ?`
	sqlMsgColumnsM         = `m.id, m.session_id, COALESCE(m.turn_id, 0), m.role, m.content, m.tool_calls, m.tool_call_id, m.name,
		m.images, m.hidden, m.created_at`
)

// backlogSessions bounds how many of a chat's newest sessions a new
// cursor's backlog looks into.
const backlogSessions = 4

// migrationLearningPass moves the memory and profile cursors to the one
// cursor of the learning pass that serves both (at the older of the two, so
// nothing is skipped), and indexes sessions by when they ended, for
// sqlLearnSessions.
const migrationLearningPass = `
INSERT INTO learning_cursors (job, user_key, chat_id, message_id, updated_at)
	SELECT 'learn', user_key, chat_id, MIN(message_id), MAX(updated_at) FROM learning_cursors
	WHERE job IN ('memory', 'profile') GROUP BY user_key, chat_id;
DELETE FROM learning_cursors WHERE job IN ('memory', 'profile');
CREATE INDEX sessions_chat_ended ON sessions (chat_id, ended_at);
`

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
		if pos, err = learnBacklog(ctx, tx, c, backlog); err != nil {
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
// or other users' turns. It reads only the sessions that can hold messages
// newer than after (the open one, usually), each through its index from
// after on.
func (s *Store) LearningMessages(ctx context.Context, c Cursor, after int64, limit int) ([]Message, error) {
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("store: learning messages: %w", err)
	}
	out, err := queryAll(ctx, s.db, scanMessage, sqlLearnMsgs, c.ChatID, after, after, c.ChatID, c.Channel, c.UserID,
		c.Channel, c.UserID, limit)
	if err != nil {
		return nil, fmt.Errorf("store: learning messages: %w", err)
	}
	return out, nil
}

// learnBacklog is where a new cursor starts: before the user's last backlog
// messages in the chat's newest sessions.
func learnBacklog(ctx context.Context, tx conn, c Cursor, backlog int) (int64, error) {
	var barrier int64
	if err := tx.QueryRowContext(ctx, sqlLearnBarrier, c.ChatID, c.Channel, c.UserID).Scan(&barrier); err != nil {
		return 0, err
	}
	sessions, err := queryAll(ctx, tx, scanID, sqlLearnRecentSessions, c.ChatID, backlogSessions)
	if err != nil {
		return 0, err
	}
	oldest, left := int64(0), max(backlog, 0)
	for _, sess := range sessions {
		if left == 0 {
			break
		}
		ids, err := queryAll(ctx, tx, scanID, sqlLearnBacklog, sess, barrier, c.Channel, c.UserID, left)
		if err != nil {
			return 0, err
		}
		if len(ids) > 0 {
			oldest = ids[len(ids)-1]
		}
		left -= len(ids)
	}
	if oldest == 0 {
		// Nothing of the user's yet: start at the chat's beginning (new
		// sessions only hold newer messages).
		return 0, nil
	}
	return oldest - 1, nil
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

func scanID(r rowScanner) (int64, error) {
	var id int64
	err := r.Scan(&id)
	return id, err
}

// learningOffKey is the state key of LearningOff.
const learningOffKey = "learning/off"

// LearningOff records that learning turned itself off: the model it was
// running with cannot make forced function calls.
type LearningOff struct {
	Model  string    `json:"model"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// SetLearningOff records that learning turned itself off (At is set to
// now), for `switchboard doctor`; ClearLearningOff forgets it.
func (s *Store) SetLearningOff(ctx context.Context, off LearningOff) error {
	off.At = s.now().UTC()
	b, err := json.Marshal(off)
	if err != nil {
		return fmt.Errorf("store: learning off: %w", err)
	}
	return s.SetState(ctx, learningOffKey, string(b))
}

// ClearLearningOff forgets a LearningOff record: learning works again.
func (s *Store) ClearLearningOff(ctx context.Context) error {
	return s.SetState(ctx, learningOffKey, "")
}

// LearningOff returns the record of learning having turned itself off, if
// there is one.
func (s *Store) LearningOff(ctx context.Context) (LearningOff, bool, error) {
	v, ok, err := s.GetState(ctx, learningOffKey)
	if err != nil || !ok || v == "" {
		return LearningOff{}, false, err
	}
	var off LearningOff
	if err := json.Unmarshal([]byte(v), &off); err != nil {
		return LearningOff{}, false, fmt.Errorf("store: learning off: %w", err)
	}
	return off, true, nil
}
