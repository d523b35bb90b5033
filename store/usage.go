package store

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboard-gateway/switchboard/llm"
)

// migrationTokenKinds records the prompt tokens a provider served from its
// cache and the completion tokens spent on reasoning, per turn and per
// step (one row per model step, for the turn page and to check a cache).
const migrationTokenKinds = `
ALTER TABLE turns ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE turns ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;
CREATE TABLE turn_steps (
	turn_id           INTEGER NOT NULL REFERENCES turns (id),
	step              INTEGER NOT NULL,
	prompt_tokens     INTEGER NOT NULL DEFAULT 0,
	cached_tokens     INTEGER NOT NULL DEFAULT 0,
	completion_tokens INTEGER NOT NULL DEFAULT 0,
	reasoning_tokens  INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (turn_id, step)
) WITHOUT ROWID;
`

const (
	// A step committed twice (a wrap-up after the last step) adds up.
	sqlAddStepUsage = `INSERT INTO turn_steps (turn_id, step, prompt_tokens, cached_tokens, completion_tokens, reasoning_tokens)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (turn_id, step) DO UPDATE SET
			prompt_tokens = turn_steps.prompt_tokens + excluded.prompt_tokens,
			cached_tokens = turn_steps.cached_tokens + excluded.cached_tokens,
			completion_tokens = turn_steps.completion_tokens + excluded.completion_tokens,
			reasoning_tokens = turn_steps.reasoning_tokens + excluded.reasoning_tokens`
	sqlStepUsage = `SELECT step, prompt_tokens, cached_tokens, completion_tokens, reasoning_tokens
		FROM turn_steps WHERE turn_id = ? ORDER BY step`
	sqlSessionUsage = `SELECT COUNT(*), COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0),
			COALESCE(SUM(total_tokens), 0), COALESCE(SUM(cached_tokens), 0), COALESCE(SUM(reasoning_tokens), 0)
		FROM turns WHERE session_id = ?`
	// Days are UTC days: whole multiples of 86,400,000 ms since the epoch.
	sqlUsageByDay = `SELECT (started_at / 86400000) * 86400000 AS day, channel, user_id, model, COUNT(*),
			SUM(prompt_tokens), SUM(completion_tokens), SUM(total_tokens), SUM(cached_tokens), SUM(reasoning_tokens)
		FROM turns WHERE started_at >= ?
		GROUP BY day, channel, user_id, model ORDER BY day, channel, user_id, model`
)

// StepUsage is the token accounting of one step of a turn.
type StepUsage struct {
	Step  int
	Usage llm.Usage
}

// DayUsage is what one user's turns on one model used in one UTC day.
type DayUsage struct {
	Day             time.Time // the day's start (UTC)
	Channel, UserID string    // empty UserID: turns of no user (scheduled jobs without one)
	Model           string    // the model that answered the turn's last call
	Turns           int
	Usage           llm.Usage
}

// addStepUsage records a step's usage; a step without any (no model call)
// writes nothing.
func addStepUsage(ctx context.Context, tx conn, turnID int64, step int, u llm.Usage) error {
	if u == (llm.Usage{}) {
		return nil
	}
	_, err := tx.ExecContext(ctx, sqlAddStepUsage, turnID, step, u.PromptTokens, u.CachedTokens,
		u.CompletionTokens, u.ReasoningTokens)
	if err != nil {
		return fmt.Errorf("step usage: %w", err)
	}
	return nil
}

// StepUsages returns the usage of each step of a turn that called the
// model, in step order.
func (s *Store) StepUsages(ctx context.Context, turnID int64) ([]StepUsage, error) {
	out, err := queryAll(ctx, s.db, func(r rowScanner) (StepUsage, error) {
		var su StepUsage
		err := r.Scan(&su.Step, &su.Usage.PromptTokens, &su.Usage.CachedTokens, &su.Usage.CompletionTokens,
			&su.Usage.ReasoningTokens)
		su.Usage.TotalTokens = su.Usage.PromptTokens + su.Usage.CompletionTokens
		return su, err
	}, sqlStepUsage, turnID)
	if err != nil {
		return nil, fmt.Errorf("store: step usage of turn %d: %w", turnID, err)
	}
	return out, nil
}

// SessionUsage sums the usage of a session's turns and counts them.
func (s *Store) SessionUsage(ctx context.Context, sessionID int64) (turns int, u llm.Usage, err error) {
	err = s.db.QueryRowContext(ctx, sqlSessionUsage, sessionID).Scan(&turns, &u.PromptTokens, &u.CompletionTokens,
		&u.TotalTokens, &u.CachedTokens, &u.ReasoningTokens)
	if err != nil {
		return 0, llm.Usage{}, fmt.Errorf("store: usage of session %d: %w", sessionID, err)
	}
	return turns, u, nil
}

// UsageByDay sums the usage of the turns started at or after since by UTC
// day, user and model, oldest day first.
func (s *Store) UsageByDay(ctx context.Context, since time.Time) ([]DayUsage, error) {
	out, err := queryAll(ctx, s.db, func(r rowScanner) (DayUsage, error) {
		var d DayUsage
		var day int64
		err := r.Scan(&day, &d.Channel, &d.UserID, &d.Model, &d.Turns, &d.Usage.PromptTokens, &d.Usage.CompletionTokens,
			&d.Usage.TotalTokens, &d.Usage.CachedTokens, &d.Usage.ReasoningTokens)
		d.Day = fromMS(day).UTC()
		return d, err
	}, sqlUsageByDay, since.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("store: usage by day: %w", err)
	}
	return out, nil
}
