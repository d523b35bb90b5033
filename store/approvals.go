package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/switchboard-gateway/switchboard/llm"
)

const migrationApprovals = `
CREATE TABLE approvals (
	id          INTEGER PRIMARY KEY,
	turn_id     INTEGER NOT NULL REFERENCES turns (id),
	inbox_id    INTEGER REFERENCES inbox (id),
	channel     TEXT    NOT NULL,
	chat_key    TEXT    NOT NULL,
	user_id     TEXT    NOT NULL DEFAULT '',
	calls       TEXT    NOT NULL,
	origin      BLOB    NOT NULL DEFAULT '',
	status      TEXT    NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'superseded', 'expired')),
	reason      TEXT    NOT NULL DEFAULT '',
	created_at  INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL,
	decided_at  INTEGER
);
CREATE INDEX approvals_pending ON approvals (channel, chat_key, id) WHERE status = 'pending';

-- steps: JSON array of PlanStep. status: running (a step is executing),
-- waiting (for the user's feedback on step current), done, stopped.
CREATE TABLE plans (
	id          INTEGER PRIMARY KEY,
	channel     TEXT    NOT NULL,
	chat_key    TEXT    NOT NULL,
	user_id     TEXT    NOT NULL DEFAULT '',
	task        TEXT    NOT NULL,
	steps       TEXT    NOT NULL,
	current     INTEGER NOT NULL DEFAULT 0,
	status      TEXT    NOT NULL CHECK (status IN ('running', 'waiting', 'done', 'stopped')),
	origin      BLOB    NOT NULL DEFAULT '',
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,
	wait_until  INTEGER
);
CREATE INDEX plans_open ON plans (channel, chat_key, id) WHERE status IN ('running', 'waiting');
`

const (
	sqlInsertApproval = `INSERT INTO approvals (turn_id, inbox_id, channel, chat_key, user_id, calls, origin, status, created_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)`
	sqlApprovalCols       = `id, turn_id, COALESCE(inbox_id, 0), channel, chat_key, user_id, calls, origin, status, reason, created_at, expires_at, decided_at`
	sqlPendingApproval    = `SELECT ` + sqlApprovalCols + ` FROM approvals WHERE channel = ? AND chat_key = ? AND status = 'pending' ORDER BY id DESC LIMIT 1`
	sqlPendingApprovals   = `SELECT ` + sqlApprovalCols + ` FROM approvals WHERE channel = ? AND chat_key = ? AND status = 'pending' ORDER BY id DESC`
	sqlAnyPendingApproval = `SELECT EXISTS (SELECT 1 FROM approvals WHERE status = 'pending')`
	sqlGetApproval        = `SELECT ` + sqlApprovalCols + ` FROM approvals WHERE id = ?`
	sqlDecideApproval     = `UPDATE approvals SET status = ?, reason = ?, decided_at = ? WHERE id = ? AND status = 'pending'`
	sqlDueApprovals       = `SELECT ` + sqlApprovalCols + ` FROM approvals WHERE status = 'pending' AND expires_at <= ? ORDER BY id`
	sqlReopenTurn         = `UPDATE turns SET status = 'running', ended_at = NULL, duration_ms = NULL WHERE id = ?`
)

// Approval is a paused turn waiting for the user's decision on tool calls.
type Approval struct {
	ID, TurnID, InboxID      int64
	Channel, ChatKey, UserID string
	Calls                    []llm.ToolCall
	Origin                   []byte // the message that started the turn (JSON), to resume it alike
	Status, Reason           string
	CreatedAt, ExpiresAt     time.Time
	DecidedAt                *time.Time
}

// CreateApproval records a pending approval for a paused turn.
func (s *Store) CreateApproval(ctx context.Context, a Approval, ttl time.Duration) (int64, error) {
	calls, err := json.Marshal(a.Calls)
	if err != nil {
		return 0, fmt.Errorf("store: create approval: %w", err)
	}
	now := s.nowMS()
	defer s.noApproval.changed()
	id, err := s.writeID(ctx, sqlInsertApproval, a.TurnID, nullID(a.InboxID), a.Channel, a.ChatKey, a.UserID,
		string(calls), a.Origin, now, now+ttl.Milliseconds())
	if err != nil {
		return 0, fmt.Errorf("store: create approval: %w", err)
	}
	return id, nil
}

func scanApproval(r rowScanner) (Approval, error) {
	var a Approval
	var calls string
	var created, expires int64
	var decided sql.NullInt64
	if err := r.Scan(&a.ID, &a.TurnID, &a.InboxID, &a.Channel, &a.ChatKey, &a.UserID, &calls, &a.Origin, &a.Status, &a.Reason,
		&created, &expires, &decided); err != nil {
		return Approval{}, err
	}
	if err := json.Unmarshal([]byte(calls), &a.Calls); err != nil {
		return Approval{}, fmt.Errorf("approval %d: calls: %w", a.ID, err)
	}
	a.CreatedAt, a.ExpiresAt, a.DecidedAt = fromMS(created), fromMS(expires), fromNullMS(decided)
	return a, nil
}

// PendingApproval returns the chat's pending approval, if any.
func (s *Store) PendingApproval(ctx context.Context, channel, chatKey string) (Approval, bool, error) {
	a, ok, err := lookupUnlessAbsent(s.noApproval, channel, chatKey, func() (Approval, bool, error) {
		return queryOne(ctx, s.db, scanApproval, sqlPendingApproval, channel, chatKey)
	}, func() (bool, error) { return s.exists(ctx, sqlAnyPendingApproval) })
	if err != nil {
		return Approval{}, false, fmt.Errorf("store: pending approval: %w", err)
	}
	return a, ok, nil
}

// PendingApprovals returns every pending approval of the chat, newest
// first: in a group, each member may have one of their own.
func (s *Store) PendingApprovals(ctx context.Context, channel, chatKey string) ([]Approval, error) {
	if _, ok, err := s.PendingApproval(ctx, channel, chatKey); err != nil || !ok {
		return nil, err // the common case, answered without a query (absent)
	}
	list, err := queryAll(ctx, s.db, scanApproval, sqlPendingApprovals, channel, chatKey)
	if err != nil {
		return nil, fmt.Errorf("store: pending approvals: %w", err)
	}
	return list, nil
}

// Approval returns one approval by id.
func (s *Store) Approval(ctx context.Context, id int64) (Approval, error) {
	a, ok, err := queryOne(ctx, s.db, scanApproval, sqlGetApproval, id)
	if err == nil && !ok {
		err = ErrNotFound
	}
	if err != nil {
		return Approval{}, fmt.Errorf("store: approval %d: %w", id, err)
	}
	return a, nil
}

// DecideApproval moves a pending approval to status (approved, denied,
// superseded or expired). It reports false when the approval was no longer
// pending: a second decision is a no-op.
func (s *Store) DecideApproval(ctx context.Context, id int64, status, reason string) (bool, error) {
	defer s.noApproval.changed()
	res, err := s.write(ctx, sqlDecideApproval, status, reason, s.nowMS(), id)
	if err != nil {
		return false, fmt.Errorf("store: decide approval %d: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// DueApprovals lists pending approvals whose time is up.
func (s *Store) DueApprovals(ctx context.Context) ([]Approval, error) {
	out, err := queryAll(ctx, s.db, scanApproval, sqlDueApprovals, s.nowMS())
	if err != nil {
		return nil, fmt.Errorf("store: due approvals: %w", err)
	}
	return out, nil
}

// ReopenTurn sets a finished turn running again, to resume it after a pause.
func (s *Store) ReopenTurn(ctx context.Context, turnID int64) error {
	res, err := s.write(ctx, sqlReopenTurn, turnID)
	if err != nil {
		return fmt.Errorf("store: reopen turn %d: %w", turnID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("store: reopen turn %d: %w", turnID, ErrNotFound)
	}
	return nil
}
