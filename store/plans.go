package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

const (
	sqlInsertPlan = `INSERT INTO plans (channel, chat_key, user_id, task, steps, current, status, origin, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, 0, 'running', ?, ?, ?)`
	sqlPlanCols    = `id, channel, chat_key, user_id, task, steps, current, status, origin, created_at, updated_at, wait_until`
	sqlOpenPlan    = `SELECT ` + sqlPlanCols + ` FROM plans WHERE channel = ? AND chat_key = ? AND status IN ('running', 'waiting') ORDER BY id DESC LIMIT 1`
	sqlGetPlan     = `SELECT ` + sqlPlanCols + ` FROM plans WHERE id = ?`
	sqlAnyOpenPlan = `SELECT EXISTS (SELECT 1 FROM plans WHERE status IN ('running', 'waiting'))`
	sqlUpdatePlan  = `UPDATE plans SET steps = ?, current = ?, status = ?, updated_at = ?, wait_until = ? WHERE id = ?`
	sqlClaimPlan   = `UPDATE plans SET status = 'running', updated_at = ?, wait_until = NULL WHERE id = ? AND status = 'waiting'`
	sqlDuePlans    = `SELECT ` + sqlPlanCols + ` FROM plans WHERE status = 'waiting' AND wait_until IS NOT NULL AND wait_until <= ? ORDER BY id`
)

// PlanStep is one step of a plan.
type PlanStep struct {
	Title        string `json:"title"`
	Instructions string `json:"instructions"`
	Status       string `json:"status,omitempty"` // "", done, capped, failed, skipped, stopped
	Result       string `json:"result,omitempty"` // what the step replied, shortened
	Tries        int    `json:"tries,omitempty"`
}

// Plan is a task broken into steps that run one at a time with the user's
// feedback in between.
type Plan struct {
	ID                       int64
	Channel, ChatKey, UserID string
	Task                     string
	Steps                    []PlanStep
	Current                  int // index of the step running or awaiting feedback
	Status                   string
	Origin                   []byte // the message that started it (JSON)
	CreatedAt, UpdatedAt     time.Time
	WaitUntil                *time.Time
}

// CreatePlan stores a new running plan.
func (s *Store) CreatePlan(ctx context.Context, p Plan) (int64, error) {
	steps, err := json.Marshal(p.Steps)
	if err != nil {
		return 0, fmt.Errorf("store: create plan: %w", err)
	}
	now := s.nowMS()
	defer s.noPlan.changed()
	id, err := s.writeID(ctx, sqlInsertPlan, p.Channel, p.ChatKey, p.UserID, p.Task, string(steps), p.Origin, now, now)
	if err != nil {
		return 0, fmt.Errorf("store: create plan: %w", err)
	}
	return id, nil
}

func scanPlan(r rowScanner) (Plan, error) {
	var p Plan
	var steps string
	var created, updated int64
	var wait sql.NullInt64
	if err := r.Scan(&p.ID, &p.Channel, &p.ChatKey, &p.UserID, &p.Task, &steps, &p.Current, &p.Status, &p.Origin,
		&created, &updated, &wait); err != nil {
		return Plan{}, err
	}
	if err := json.Unmarshal([]byte(steps), &p.Steps); err != nil {
		return Plan{}, fmt.Errorf("plan %d: steps: %w", p.ID, err)
	}
	p.CreatedAt, p.UpdatedAt, p.WaitUntil = fromMS(created), fromMS(updated), fromNullMS(wait)
	return p, nil
}

// OpenPlan returns the chat's running or waiting plan, if any.
func (s *Store) OpenPlan(ctx context.Context, channel, chatKey string) (Plan, bool, error) {
	p, ok, err := lookupUnlessAbsent(s.noPlan, channel, chatKey, func() (Plan, bool, error) {
		return queryOne(ctx, s.db, scanPlan, sqlOpenPlan, channel, chatKey)
	}, func() (bool, error) { return s.exists(ctx, sqlAnyOpenPlan) })
	if err != nil {
		return Plan{}, false, fmt.Errorf("store: open plan: %w", err)
	}
	return p, ok, nil
}

// GetPlan returns a plan by id.
func (s *Store) GetPlan(ctx context.Context, id int64) (Plan, error) {
	p, ok, err := queryOne(ctx, s.db, scanPlan, sqlGetPlan, id)
	if err == nil && !ok {
		err = ErrNotFound
	}
	if err != nil {
		return Plan{}, fmt.Errorf("store: plan %d: %w", id, err)
	}
	return p, nil
}

// UpdatePlan saves a plan's steps, position, status and feedback deadline.
func (s *Store) UpdatePlan(ctx context.Context, p Plan) error {
	steps, err := json.Marshal(p.Steps)
	if err != nil {
		return fmt.Errorf("store: update plan: %w", err)
	}
	var wait sql.NullInt64
	if p.WaitUntil != nil {
		wait = sql.NullInt64{Int64: p.WaitUntil.UnixMilli(), Valid: true}
	}
	defer s.noPlan.changed()
	if _, err := s.write(ctx, sqlUpdatePlan, string(steps), p.Current, p.Status, s.nowMS(), wait, p.ID); err != nil {
		return fmt.Errorf("store: update plan %d: %w", p.ID, err)
	}
	return nil
}

// ClaimPlan moves a waiting plan to running; false if it was not waiting
// (someone answered first): a second answer is a no-op.
func (s *Store) ClaimPlan(ctx context.Context, id int64) (bool, error) {
	defer s.noPlan.changed()
	res, err := s.write(ctx, sqlClaimPlan, s.nowMS(), id)
	if err != nil {
		return false, fmt.Errorf("store: claim plan %d: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// DuePlans lists waiting plans whose feedback time is up.
func (s *Store) DuePlans(ctx context.Context) ([]Plan, error) {
	out, err := queryAll(ctx, s.db, scanPlan, sqlDuePlans, s.nowMS())
	if err != nil {
		return nil, fmt.Errorf("store: due plans: %w", err)
	}
	return out, nil
}
