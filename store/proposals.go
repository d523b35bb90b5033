package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Skill proposal statuses.
const (
	ProposalProposed = "proposed" // waiting for the operator
	ProposalApplied  = "applied"  // the skill's learned overlay
	ProposalReverted = "reverted" // was applied, then reverted
	ProposalReplaced = "replaced" // was applied, then a newer proposal was
)

// SkillProposal is a suggested improvement of a skill's instructions.
type SkillProposal struct {
	ID           int64
	Skill        string
	BaseHash     string // of the operator's instructions it improves on
	Instructions string // the full proposed instructions
	Assessment   string // worked, failed or mixed
	Notes        string // what worked or failed, and why the change
	SourceTurnID int64
	Status       string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

const (
	sqlPropCols = `id, skill, base_hash, instructions, assessment, notes, COALESCE(source_turn_id, 0), status, created_at, updated_at`
	sqlPropIns  = `INSERT INTO skill_proposals (skill, base_hash, instructions, assessment, notes, source_turn_id, status, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, 'proposed', ?, ?)`
	sqlPropGet     = `SELECT ` + sqlPropCols + ` FROM skill_proposals WHERE id = ?`
	sqlPropList    = `SELECT ` + sqlPropCols + ` FROM skill_proposals ORDER BY id DESC LIMIT ?`
	sqlPropApplied = `SELECT ` + sqlPropCols + ` FROM skill_proposals WHERE status = 'applied' ORDER BY skill`
	sqlPropOfSkill = `SELECT ` + sqlPropCols + ` FROM skill_proposals WHERE skill = ? AND status = 'applied'`
	sqlPropReplace = `UPDATE skill_proposals SET status = 'replaced', updated_at = ? WHERE skill = ? AND status = 'applied'`
	sqlPropStatus  = `UPDATE skill_proposals SET status = ?, updated_at = ? WHERE id = ?`
)

func scanProposal(r rowScanner) (SkillProposal, error) {
	var p SkillProposal
	var created, updated int64
	if err := r.Scan(&p.ID, &p.Skill, &p.BaseHash, &p.Instructions, &p.Assessment, &p.Notes, &p.SourceTurnID,
		&p.Status, &created, &updated); err != nil {
		return SkillProposal{}, err
	}
	p.CreatedAt, p.UpdatedAt = fromMS(created), fromMS(updated)
	return p, nil
}

func applyProposalTx(ctx context.Context, tx conn, id int64, skill string, now int64) error {
	if _, err := tx.ExecContext(ctx, sqlPropReplace, now, skill); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, sqlPropStatus, ProposalApplied, now, id)
	return err
}

// LearnSkillProposals stores proposals made from the messages after from up
// to upTo and moves the cursor there, in one transaction; with apply, each
// becomes its skill's applied overlay at once. It returns the new ids.
func (s *Store) LearnSkillProposals(ctx context.Context, c Cursor, from, upTo int64, ps []SkillProposal, apply bool) ([]int64, error) {
	var ids []int64
	err := s.learn(ctx, c, from, upTo, func(tx conn, now int64) error {
		ids = ids[:0]
		for _, p := range ps {
			if p.Skill == "" || strings.TrimSpace(p.Instructions) == "" {
				return errors.New("skill proposal: skill and instructions are required")
			}
			id, err := tx.insertID(ctx, sqlPropIns, p.Skill, p.BaseHash, p.Instructions, p.Assessment, p.Notes,
				nullID(p.SourceTurnID), now, now)
			if err != nil {
				return err
			}
			if apply {
				if err := applyProposalTx(ctx, tx, id, p.Skill, now); err != nil {
					return err
				}
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: learn skill proposals: %w", err)
	}
	return ids, nil
}

func (s *Store) queryProposals(ctx context.Context, query string, args ...any) ([]SkillProposal, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SkillProposal
	for rows.Next() {
		p, err := scanProposal(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// SkillProposals lists up to limit proposals (<= 0: all), newest first.
func (s *Store) SkillProposals(ctx context.Context, limit int) ([]SkillProposal, error) {
	ps, err := s.queryProposals(ctx, sqlPropList, s.d.limit(limit))
	if err != nil {
		return nil, fmt.Errorf("store: skill proposals: %w", err)
	}
	return ps, nil
}

// SkillProposal returns one proposal, or an error matching ErrNotFound.
func (s *Store) SkillProposal(ctx context.Context, id int64) (SkillProposal, error) {
	p, err := scanProposal(s.db.QueryRowContext(ctx, sqlPropGet, id))
	if errors.Is(err, sql.ErrNoRows) {
		return SkillProposal{}, fmt.Errorf("store: skill proposal %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return SkillProposal{}, fmt.Errorf("store: skill proposal %d: %w", id, err)
	}
	return p, nil
}

// AppliedSkillProposals returns the learned overlay: the applied proposal of
// each skill that has one, by skill name.
func (s *Store) AppliedSkillProposals(ctx context.Context) ([]SkillProposal, error) {
	ps, err := s.queryProposals(ctx, sqlPropApplied)
	if err != nil {
		return nil, fmt.Errorf("store: applied skill proposals: %w", err)
	}
	return ps, nil
}

// ApplySkillProposal makes the proposal its skill's overlay, replacing the
// one applied before (if any).
func (s *Store) ApplySkillProposal(ctx context.Context, id int64) (SkillProposal, error) {
	var p SkillProposal
	err := s.inTx(ctx, func(tx conn) error {
		var err error
		p, err = scanProposal(tx.QueryRowContext(ctx, sqlPropGet, id))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil || p.Status == ProposalApplied {
			return err
		}
		now := s.nowMS()
		if err := applyProposalTx(ctx, tx, id, p.Skill, now); err != nil {
			return err
		}
		p.Status, p.UpdatedAt = ProposalApplied, fromMS(now)
		return nil
	})
	if err != nil {
		return SkillProposal{}, fmt.Errorf("store: apply skill proposal %d: %w", id, err)
	}
	return p, nil
}

// RevertSkill removes the skill's learned overlay, so the operator's
// instructions apply again. It returns the proposal that was applied, or an
// error matching ErrNotFound when there was none.
func (s *Store) RevertSkill(ctx context.Context, skill string) (SkillProposal, error) {
	var p SkillProposal
	err := s.inTx(ctx, func(tx conn) error {
		var err error
		p, err = scanProposal(tx.QueryRowContext(ctx, sqlPropOfSkill, skill))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		now := s.nowMS()
		if _, err := tx.ExecContext(ctx, sqlPropStatus, ProposalReverted, now, p.ID); err != nil {
			return err
		}
		p.Status, p.UpdatedAt = ProposalReverted, fromMS(now)
		return nil
	})
	if err != nil {
		return SkillProposal{}, fmt.Errorf("store: revert skill %q: %w", skill, err)
	}
	return p, nil
}
