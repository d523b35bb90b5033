package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Profile dimensions, in the order a profile lists them.
const (
	ProfileName        = "name"
	ProfileLanguage    = "language"
	ProfileTimezone    = "timezone"
	ProfilePreferences = "preferences"
	ProfileStyle       = "style"
)

// ProfileDimensions lists the dimensions in display order.
var ProfileDimensions = []string{ProfileName, ProfileLanguage, ProfileTimezone, ProfilePreferences, ProfileStyle}

// ProfileEntry is one dated value of a profile dimension; the newest entry
// of a dimension is in force.
type ProfileEntry struct {
	ID           int64
	UserKey      string
	Dimension    string
	Value        string
	SourceTurnID int64
	CreatedAt    time.Time
}

const (
	sqlProfileCols = `id, user_key, dimension, value, COALESCE(source_turn_id, 0), created_at`
	sqlProfile     = `SELECT ` + sqlProfileCols + ` FROM profile_entries p WHERE user_key = ?
		AND id = (SELECT MAX(id) FROM profile_entries q WHERE q.user_key = p.user_key AND q.dimension = p.dimension)`
	sqlProfileCurrent = `SELECT value FROM profile_entries WHERE user_key = ? AND dimension = ? ORDER BY id DESC LIMIT 1`
	sqlProfileInsert  = `INSERT INTO profile_entries (user_key, dimension, value, source_turn_id, created_at) VALUES (?, ?, ?, ?, ?)`
	sqlProfileForget  = `DELETE FROM profile_entries WHERE user_key = ? AND (dimension = ? OR ? = '')`
	sqlProfileKeysFor = `SELECT DISTINCT user_key FROM profile_entries WHERE dimension = ?
		AND substr(user_key, instr(user_key, ':') + 1) = ? ORDER BY user_key`
)

// Profile returns the entries in force for the user, in ProfileDimensions
// order; dimensions without an entry are left out.
func (s *Store) Profile(ctx context.Context, userKey string) ([]ProfileEntry, error) {
	rows, err := s.db.QueryContext(ctx, sqlProfile, userKey)
	if err != nil {
		return nil, fmt.Errorf("store: profile: %w", err)
	}
	defer rows.Close()
	var out []ProfileEntry
	for rows.Next() {
		var e ProfileEntry
		var created int64
		if err := rows.Scan(&e.ID, &e.UserKey, &e.Dimension, &e.Value, &e.SourceTurnID, &created); err != nil {
			return nil, fmt.Errorf("store: profile: %w", err)
		}
		e.CreatedAt = fromMS(created)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: profile: %w", err)
	}
	slices.SortFunc(out, func(a, b ProfileEntry) int {
		return slices.Index(ProfileDimensions, a.Dimension) - slices.Index(ProfileDimensions, b.Dimension)
	})
	return out, nil
}

func addProfileTx(ctx context.Context, tx conn, e ProfileEntry, now int64) error {
	if !slices.Contains(ProfileDimensions, e.Dimension) {
		return fmt.Errorf("unknown profile dimension %q", e.Dimension)
	}
	value := strings.TrimSpace(e.Value)
	if e.UserKey == "" || value == "" {
		return errors.New("profile entry: user and value are required")
	}
	var cur string
	err := tx.QueryRowContext(ctx, sqlProfileCurrent, e.UserKey, e.Dimension).Scan(&cur)
	if err == nil && cur == value {
		return nil // unchanged: no new entry
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	_, err = tx.ExecContext(ctx, sqlProfileInsert, e.UserKey, e.Dimension, value, nullID(e.SourceTurnID), now)
	return err
}

// SetProfile records a new entry for a dimension (an unchanged value adds
// nothing).
func (s *Store) SetProfile(ctx context.Context, e ProfileEntry) error {
	err := s.inTx(ctx, func(tx conn) error { return addProfileTx(ctx, tx, e, s.nowMS()) })
	if err != nil {
		return fmt.Errorf("store: set profile: %w", err)
	}
	return nil
}

// LearnProfile is LearnPass with profile entries only.
func (s *Store) LearnProfile(ctx context.Context, c Cursor, from, upTo int64, es []ProfileEntry) error {
	_, err := s.LearnPass(ctx, c, from, upTo, Learned{Profile: es})
	return err
}

// ProfileUsers returns the UserKeys, on any channel, of the users with the
// platform id userID who have entries of the dimension.
func (s *Store) ProfileUsers(ctx context.Context, userID, dimension string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, sqlProfileKeysFor, dimension, userID)
	if err != nil {
		return nil, fmt.Errorf("store: profile users: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("store: profile users: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: profile users: %w", err)
	}
	return out, nil
}

// ForgetProfile deletes every entry of the dimension ("" for all) of the
// user's profile and returns how many there were.
func (s *Store) ForgetProfile(ctx context.Context, userKey, dimension string) (int64, error) {
	res, err := s.write(ctx, sqlProfileForget, userKey, dimension, dimension)
	if err != nil {
		return 0, fmt.Errorf("store: forget profile: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("store: forget profile: %w", err)
	}
	return n, nil
}
