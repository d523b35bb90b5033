package store

import (
	"context"
	"fmt"
	"time"
)

// SummaryCoverage is what a session's rolling summary covers: the messages
// folded into it so far, from the session's first up to UpTo.
type SummaryCoverage struct {
	Folds    int       // summaries written, one per folded chunk
	UpTo     int64     // the last message folded; 0: none
	Messages int       // messages folded
	Turns    int       // turns those messages belong to
	Until    time.Time // when the last folded message was written
}

const (
	sqlSummaryFolds = `SELECT COUNT(*), COALESCE(MAX(up_to_message_id), 0) FROM summaries WHERE session_id = ?`
	sqlFoldedUpTo   = `SELECT COUNT(*), COUNT(DISTINCT turn_id), COALESCE(MAX(created_at), 0)
		FROM messages WHERE session_id = ? AND id <= ?`
)

// SummaryCoverage reports what the session's summaries cover.
func (s *Store) SummaryCoverage(ctx context.Context, sessionID int64) (SummaryCoverage, error) {
	var c SummaryCoverage
	if err := s.db.QueryRowContext(ctx, sqlSummaryFolds, sessionID).Scan(&c.Folds, &c.UpTo); err != nil {
		return c, fmt.Errorf("store: summaries of session %d: %w", sessionID, err)
	}
	if c.UpTo == 0 {
		return c, nil
	}
	var until int64
	if err := s.db.QueryRowContext(ctx, sqlFoldedUpTo, sessionID, c.UpTo).Scan(&c.Messages, &c.Turns, &until); err != nil {
		return c, fmt.Errorf("store: summaries of session %d: %w", sessionID, err)
	}
	c.Until = fromMS(until)
	return c, nil
}
