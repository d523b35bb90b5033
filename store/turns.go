package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-gateway/switchboard/llm"
)

// Turn statuses.
const (
	TurnRunning   = "running"
	TurnCompleted = "completed"
	TurnFailed    = "failed"
	TurnCancelled = "cancelled"
)

// Message is a stored conversation message.
//
// Image bytes are never stored: a reloaded message's Images keep MIME and URL
// only (Data is nil). The row also records each image's size in bytes.
type Message struct {
	ID, SessionID, TurnID int64
	llm.Message
	Hidden    bool // an internal nudge, never shown to users
	CreatedAt time.Time
}

// StepMessage is a message written by CommitStep.
type StepMessage struct {
	llm.Message
	Hidden bool
}

// TurnStart describes a turn about to run.
type TurnStart struct {
	ChatID    int64
	SessionID int64 // 0: the chat's current session (opened if needed)
	InboxID   int64 // 0: not caused by an inbox item (e.g. a scheduled job)
	UserID    string
	Channel   string
	Kind      string // "user", "job", …; required
}

// TurnEnd is how a turn ended.
type TurnEnd struct {
	StopReason string
	Status     string // TurnCompleted, TurnFailed or TurnCancelled
	Steps      int    // 0 keeps the count set by the last CommitStep
	Error      string
	Model      string
	// FinishInbox also marks the turn's inbox message done, in the same
	// transaction (one write less a message, and never a finished turn
	// with its message still pending).
	FinishInbox bool
	// InboxKeep, with FinishInbox, replaces the message's stored payload:
	// what is still read of an answered message (who wrote it), its text
	// and files being in the transcript by then, so a message is stored
	// once. nil keeps the payload whole.
	InboxKeep []byte
	// RequestTokens and RequestBytes are the size of the turn's last model
	// request (estimated tokens, bytes of text); 0 keeps what is stored.
	RequestTokens, RequestBytes int
}

// migrationRequestSize records the size of each turn's last request, for
// /status.
const migrationRequestSize = `
ALTER TABLE turns ADD COLUMN request_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE turns ADD COLUMN request_bytes INTEGER NOT NULL DEFAULT 0;
`

// Turn is one run of the agent loop for one inbound message or job.
type Turn struct {
	ID, ChatID, SessionID, InboxID            int64
	UserID, Channel, Kind, Status, StopReason string
	Error, Model                              string
	Steps                                     int
	Usage                                     llm.Usage
	StartedAt                                 time.Time
	EndedAt                                   *time.Time // nil while running
	Duration                                  time.Duration
	// Delivery is DeliveryPending while a reply waits in the outbox,
	// DeliveryLate once it went out, DeliveryDropped if it was given up;
	// empty when every reply went out at once.
	Delivery string
	// RequestTokens and RequestBytes are the size of the turn's last model
	// request: estimated tokens, and bytes of text (0: not recorded).
	RequestTokens, RequestBytes int
}

const (
	sqlInsertTurn = `INSERT INTO turns (chat_id, session_id, inbox_id, user_id, channel, kind, status, started_at)
		VALUES (?, ?, ?, ?, ?, ?, 'running', ?)`
	sqlSessionChat = `SELECT chat_id FROM sessions WHERE id = ?`
	sqlInsertMsg   = `INSERT INTO messages (session_id, turn_id, role, content, tool_calls, tool_call_id, name, images, hidden, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlStepTurn = `UPDATE turns SET steps = ?,
			prompt_tokens = prompt_tokens + ?,
			completion_tokens = completion_tokens + ?,
			total_tokens = total_tokens + ?,
			cached_tokens = cached_tokens + ?,
			reasoning_tokens = reasoning_tokens + ?
		WHERE id = ? AND status = 'running'
		RETURNING session_id`
	sqlFinishTurn = `UPDATE turns SET status = ?, stop_reason = ?, error = ?, model = ?,
			steps = CASE WHEN ? > 0 THEN ? ELSE steps END,
			request_tokens = CASE WHEN ? > 0 THEN ? ELSE request_tokens END,
			request_bytes = CASE WHEN ? > 0 THEN ? ELSE request_bytes END,
			ended_at = ?, duration_ms = MAX(? - started_at, 0)
		WHERE id = ? AND status = 'running'`
	sqlFinishTurnInbox = `UPDATE inbox SET status = 'done', finished_at = ?
		WHERE status = 'pending' AND id = (SELECT inbox_id FROM turns WHERE id = ?)`
	sqlFinishTurnInboxKeep = `UPDATE inbox SET status = 'done', finished_at = ?, payload = ?
		WHERE status = 'pending' AND id = (SELECT inbox_id FROM turns WHERE id = ?)`
	sqlTurnStatus  = `SELECT status FROM turns WHERE id = ?`
	sqlTurnColumns = `id, chat_id, session_id, COALESCE(inbox_id, 0), user_id, channel, kind, status, stop_reason, error, model,
		steps, prompt_tokens, completion_tokens, total_tokens, started_at, ended_at, duration_ms, delivery,
		request_tokens, request_bytes, cached_tokens, reasoning_tokens`
	sqlTurnByID      = `SELECT ` + sqlTurnColumns + ` FROM turns WHERE id = ?`
	sqlTurnsOfChat   = `SELECT ` + sqlTurnColumns + ` FROM turns WHERE chat_id = ? ORDER BY id DESC LIMIT ?`
	sqlRunningTurns  = `SELECT ` + sqlTurnColumns + ` FROM turns WHERE status = 'running' ORDER BY id`
	sqlTurnForInbox  = `SELECT ` + sqlTurnColumns + ` FROM turns WHERE inbox_id = ? ORDER BY id DESC LIMIT 1`
	sqlRunningOfChat = `SELECT ` + sqlTurnColumns + ` FROM turns
		WHERE status = 'running' AND chat_id = (SELECT id FROM chats WHERE channel = ? AND chat_key = ?) ORDER BY id`
	sqlUsageSince = `SELECT COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0), COALESCE(SUM(total_tokens), 0),
			COALESCE(SUM(cached_tokens), 0), COALESCE(SUM(reasoning_tokens), 0)
		FROM turns WHERE user_id = ? AND started_at >= ?`
	sqlMsgColumns = `id, session_id, COALESCE(turn_id, 0), role, content, tool_calls, tool_call_id, name, images, hidden, created_at`
	sqlMessages   = `SELECT ` + sqlMsgColumns + ` FROM messages WHERE session_id = ? AND id > ? ORDER BY id`
)

// BeginTurn records a running turn and its first messages (normally the user
// message) in one transaction, and returns the turn's id and the messages'
// ids in order.
func (s *Store) BeginTurn(ctx context.Context, t TurnStart, first []llm.Message) (turnID int64, msgIDs []int64, err error) {
	if t.Kind == "" {
		return 0, nil, errors.New("store: begin turn: kind is required")
	}
	inTx := s.inTxSimple // checks only which chat the session belongs to
	if t.SessionID == 0 {
		inTx = s.inTx // may open the chat's session: an open session still missing at commit
	}
	err = inTx(ctx, func(tx conn) error {
		now := s.nowMS()
		sessionID := t.SessionID
		if sessionID == 0 {
			sess, err := currentSessionTx(ctx, tx, t.ChatID, now)
			if err != nil {
				return err
			}
			sessionID = sess.ID
		} else {
			var chatID int64
			err := tx.QueryRowContext(ctx, sqlSessionChat, sessionID).Scan(&chatID)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("session %d: %w", sessionID, ErrNotFound)
			}
			if err != nil {
				return err
			}
			if chatID != t.ChatID {
				return fmt.Errorf("session %d belongs to chat %d", sessionID, chatID)
			}
		}
		var err error
		if turnID, err = tx.insertID(ctx, sqlInsertTurn, t.ChatID, sessionID, nullID(t.InboxID), t.UserID, t.Channel, t.Kind, now); err != nil {
			return err
		}
		msgIDs = make([]int64, 0, len(first))
		for i, m := range first {
			id, err := insertMessage(ctx, tx, sessionID, turnID, m, false, now)
			if err != nil {
				return fmt.Errorf("message %d: %w", i, err)
			}
			msgIDs = append(msgIDs, id)
		}
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("store: begin turn in chat %d: %w", t.ChatID, err)
	}
	return turnID, msgIDs, nil
}

// CommitStep stores one agent step in one transaction: its messages (the
// assistant message, tool results, hidden nudges) in order, the step's usage
// added to the turn's counters, and steps set to step. On any error nothing
// of the step is stored. It fails with ErrTurnNotRunning if the turn has
// finished (e.g. it was marked failed after a crash).
func (s *Store) CommitStep(ctx context.Context, turnID int64, step int, msgs []StepMessage, usage llm.Usage) ([]int64, error) {
	var ids []int64
	err := s.inTx(ctx, func(tx conn) error {
		// The turn row first: it checks the turn is running and yields the
		// session; a failing message below rolls this update back too.
		var sessionID int64
		err := tx.QueryRowContext(ctx, sqlStepTurn, step, usage.PromptTokens, usage.CompletionTokens,
			usage.TotalTokens, usage.CachedTokens, usage.ReasoningTokens, turnID).Scan(&sessionID)
		if errors.Is(err, sql.ErrNoRows) {
			return notRunning(ctx, tx, turnID)
		}
		if err != nil {
			return err
		}
		if err := addStepUsage(ctx, tx, turnID, step, usage); err != nil {
			return err
		}
		now := s.nowMS()
		ids = make([]int64, 0, len(msgs))
		for i, m := range msgs {
			id, err := insertMessage(ctx, tx, sessionID, turnID, m.Message, m.Hidden, now)
			if err != nil {
				return fmt.Errorf("message %d: %w", i, err)
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: commit step %d of turn %d: %w", step, turnID, err)
	}
	return ids, nil
}

// FinishTurn records how a running turn ended: status, stop reason, error,
// model, ended_at and duration. It fails with ErrTurnNotRunning if the turn
// has already finished.
func (s *Store) FinishTurn(ctx context.Context, turnID int64, e TurnEnd) error {
	switch e.Status {
	case TurnCompleted, TurnFailed, TurnCancelled:
	default:
		return fmt.Errorf("store: finish turn %d: invalid status %q", turnID, e.Status)
	}
	err := s.inTxSimple(ctx, func(tx conn) error { // an UPDATE … WHERE status = 'running' is the check
		now := s.nowMS()
		res, err := tx.ExecContext(ctx, sqlFinishTurn, e.Status, e.StopReason, e.Error, e.Model, e.Steps, e.Steps,
			e.RequestTokens, e.RequestTokens, e.RequestBytes, e.RequestBytes, now, now, turnID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			if err != nil {
				return err
			}
			return notRunning(ctx, tx, turnID)
		}
		switch {
		case e.FinishInbox && e.InboxKeep != nil:
			_, err = tx.ExecContext(ctx, sqlFinishTurnInboxKeep, now, e.InboxKeep, turnID)
		case e.FinishInbox:
			_, err = tx.ExecContext(ctx, sqlFinishTurnInbox, now, turnID)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("store: finish turn %d: %w", turnID, err)
	}
	return nil
}

// notRunning explains why a turn could not be updated as running: it does
// not exist (ErrNotFound) or has finished (ErrTurnNotRunning).
func notRunning(ctx context.Context, tx conn, turnID int64) error {
	var status string
	err := tx.QueryRowContext(ctx, sqlTurnStatus, turnID).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("turn is %s: %w", status, ErrTurnNotRunning)
}

// imageMeta is what is stored of an llm.Image: never the bytes.
type imageMeta struct {
	MIME string `json:"mime"`
	URL  string `json:"url,omitempty"`
	Size int    `json:"size,omitempty"`
}

func insertMessage(ctx context.Context, tx conn, sessionID, turnID int64, m llm.Message, hidden bool, nowMS int64) (int64, error) {
	var calls, images sql.NullString
	if len(m.ToolCalls) > 0 {
		b, err := json.Marshal(m.ToolCalls)
		if err != nil {
			return 0, fmt.Errorf("encode tool calls: %w", err)
		}
		calls = sql.NullString{String: string(b), Valid: true}
	}
	if len(m.Images) > 0 {
		meta := make([]imageMeta, len(m.Images))
		for i, im := range m.Images {
			meta[i] = imageMeta{MIME: im.MIME, URL: im.URL, Size: len(im.Data)}
		}
		b, err := json.Marshal(meta)
		if err != nil {
			return 0, fmt.Errorf("encode images: %w", err)
		}
		images = sql.NullString{String: string(b), Valid: true}
	}
	return tx.insertID(ctx, sqlInsertMsg, sessionID, nullID(turnID), string(m.Role), m.Content, calls,
		m.ToolCallID, m.Name, images, boolInt(hidden), nowMS)
}

func scanMessage(r rowScanner) (Message, error) {
	var m Message
	var role string
	var calls, images sql.NullString
	var created int64
	if err := r.Scan(&m.ID, &m.SessionID, &m.TurnID, &role, &m.Content, &calls, &m.ToolCallID, &m.Name,
		&images, &m.Hidden, &created); err != nil {
		return Message{}, err
	}
	m.Role = llm.Role(role)
	m.CreatedAt = fromMS(created)
	if calls.Valid {
		if err := json.Unmarshal([]byte(calls.String), &m.ToolCalls); err != nil {
			return Message{}, fmt.Errorf("message %d: decode tool calls: %w", m.ID, err)
		}
	}
	if images.Valid {
		var meta []imageMeta
		if err := json.Unmarshal([]byte(images.String), &meta); err != nil {
			return Message{}, fmt.Errorf("message %d: decode images: %w", m.ID, err)
		}
		m.Images = make([]llm.Image, len(meta))
		for i, im := range meta {
			m.Images[i] = llm.Image{MIME: im.MIME, URL: im.URL}
		}
	}
	return m, nil
}

// Messages returns all messages of the session in order, hidden ones included.
// It reads the database, not the history cache: a dashboard reading an old
// session should not push out the sessions that turns are reading.
func (s *Store) Messages(ctx context.Context, sessionID int64) ([]Message, error) {
	return s.queryMessages(ctx, sessionID, 0)
}

func scanTurn(r rowScanner) (Turn, error) {
	var t Turn
	var started int64
	var ended, dur sql.NullInt64
	if err := r.Scan(&t.ID, &t.ChatID, &t.SessionID, &t.InboxID, &t.UserID, &t.Channel, &t.Kind, &t.Status,
		&t.StopReason, &t.Error, &t.Model, &t.Steps, &t.Usage.PromptTokens, &t.Usage.CompletionTokens,
		&t.Usage.TotalTokens, &started, &ended, &dur, &t.Delivery, &t.RequestTokens, &t.RequestBytes,
		&t.Usage.CachedTokens, &t.Usage.ReasoningTokens); err != nil {
		return Turn{}, err
	}
	t.StartedAt = fromMS(started)
	t.EndedAt = fromNullMS(ended)
	t.Duration = time.Duration(dur.Int64) * time.Millisecond
	return t, nil
}

func (s *Store) queryTurns(ctx context.Context, query string, args ...any) ([]Turn, error) {
	return queryAll(ctx, s.db, scanTurn, query, args...)
}

// queryOne runs a query for at most one row; ok is false when there is none.
func queryOne[T any](ctx context.Context, db conn, scan func(rowScanner) (T, error), query string, args ...any) (v T, ok bool, err error) {
	v, err = scan(db.QueryRowContext(ctx, query, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return v, false, nil
	}
	return v, err == nil, err
}

// queryAll runs a query and scans every row with scan.
func queryAll[T any](ctx context.Context, db conn, scan func(rowScanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Turn returns the turn with the id, or an error matching ErrNotFound.
func (s *Store) Turn(ctx context.Context, id int64) (Turn, error) {
	t, err := scanTurn(s.db.QueryRowContext(ctx, sqlTurnByID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Turn{}, fmt.Errorf("store: turn %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Turn{}, fmt.Errorf("store: turn %d: %w", id, err)
	}
	return t, nil
}

// Turns returns up to limit of the chat's turns, newest first; limit <= 0
// means all.
func (s *Store) Turns(ctx context.Context, chatID int64, limit int) ([]Turn, error) {
	ts, err := s.queryTurns(ctx, sqlTurnsOfChat, chatID, s.d.limit(limit))
	if err != nil {
		return nil, fmt.Errorf("store: turns of chat %d: %w", chatID, err)
	}
	return ts, nil
}

// RunningTurns returns the turns still marked running, oldest first. At
// startup these are turns a crash interrupted.
func (s *Store) RunningTurns(ctx context.Context) ([]Turn, error) {
	ts, err := s.queryTurns(ctx, sqlRunningTurns)
	if err != nil {
		return nil, fmt.Errorf("store: running turns: %w", err)
	}
	return ts, nil
}

// RunningTurnsOf returns the turns of one chat still marked running.
func (s *Store) RunningTurnsOf(ctx context.Context, channel, chatKey string) ([]Turn, error) {
	ts, err := s.queryTurns(ctx, sqlRunningOfChat, channel, chatKey)
	if err != nil {
		return nil, fmt.Errorf("store: running turns of %s/%s: %w", channel, chatKey, err)
	}
	return ts, nil
}

// TurnForInbox returns the newest turn started for the inbox item; ok is
// false if there is none.
func (s *Store) TurnForInbox(ctx context.Context, inboxID int64) (Turn, bool, error) {
	t, err := scanTurn(s.db.QueryRowContext(ctx, sqlTurnForInbox, inboxID))
	if errors.Is(err, sql.ErrNoRows) {
		return Turn{}, false, nil
	}
	if err != nil {
		return Turn{}, false, fmt.Errorf("store: turn for inbox %d: %w", inboxID, err)
	}
	return t, true, nil
}

// UsageSince sums the token usage of the user's turns started at or after
// since (a turn counts entirely towards the day it started).
func (s *Store) UsageSince(ctx context.Context, userID string, since time.Time) (llm.Usage, error) {
	var u llm.Usage
	err := s.db.QueryRowContext(ctx, sqlUsageSince, userID, since.UnixMilli()).
		Scan(&u.PromptTokens, &u.CompletionTokens, &u.TotalTokens, &u.CachedTokens, &u.ReasoningTokens)
	if err != nil {
		return llm.Usage{}, fmt.Errorf("store: usage of user %q: %w", userID, err)
	}
	return u, nil
}
