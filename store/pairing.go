package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

const migration3 = `
CREATE TABLE pairings (
	code        TEXT    PRIMARY KEY,
	channel     TEXT    NOT NULL,
	user_id     TEXT    NOT NULL,
	username    TEXT    NOT NULL DEFAULT '',
	created_at  INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL,
	approved_at INTEGER
) WITHOUT ROWID;
CREATE INDEX pairings_user ON pairings (channel, user_id);

CREATE TABLE approved_users (
	channel     TEXT    NOT NULL,
	user_id     TEXT    NOT NULL,
	username    TEXT    NOT NULL DEFAULT '',
	approved_at INTEGER NOT NULL,
	PRIMARY KEY (channel, user_id)
) WITHOUT ROWID;
`

// migrationPairingChat: the private chat a pairing code was given in, kept
// with the approved user, and whether the bot still owes them the greeting
// that tells them they were admitted (see ApprovePairing, GreetingsOwed).
const migrationPairingChat = `
ALTER TABLE pairings ADD COLUMN chat_key TEXT NOT NULL DEFAULT '';
ALTER TABLE approved_users ADD COLUMN chat_key TEXT NOT NULL DEFAULT '';
ALTER TABLE approved_users ADD COLUMN greet INTEGER NOT NULL DEFAULT 0;
`

const (
	sqlPendingPairing = `SELECT code, expires_at FROM pairings
WHERE channel = ? AND user_id = ? AND approved_at IS NULL AND expires_at > ? ORDER BY created_at DESC LIMIT 1`
	sqlInsertPairing = `INSERT INTO pairings (code, channel, user_id, username, created_at, expires_at, chat_key) VALUES (?, ?, ?, ?, ?, ?, ?)`
	sqlGetPairing    = `SELECT code, channel, user_id, username, created_at, expires_at, approved_at, chat_key FROM pairings WHERE code = ?`
	sqlApprovePair   = `UPDATE pairings SET approved_at = ? WHERE code = ?`
	sqlApproveUser   = `INSERT INTO approved_users (channel, user_id, username, approved_at, chat_key, greet) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (channel, user_id) DO UPDATE SET username = excluded.username, chat_key = excluded.chat_key, greet = excluded.greet`
	sqlIsApproved  = `SELECT 1 FROM approved_users WHERE channel = ? AND user_id = ?`
	sqlListPairing = `SELECT code, channel, user_id, username, created_at, expires_at, approved_at FROM pairings
WHERE approved_at IS NULL AND expires_at > ? ORDER BY created_at`
	sqlRevokeUser = `DELETE FROM approved_users WHERE channel = ? AND user_id = ?`
)

// Pairing is a one-time code an unknown user received to ask for access.
type Pairing struct {
	Code, Channel, UserID, Username string
	ChatKey                         string // the private chat it was given in; "" before it was kept
	CreatedAt, ExpiresAt            time.Time
	ApprovedAt                      *time.Time
}

// ErrPairingExpired is returned when approving a code past its expiry.
var ErrPairingExpired = errors.New("store: pairing code expired")

// ErrNoUserID is returned when asked for a pairing code without a user id.
var ErrNoUserID = errors.New("store: pairing needs a user id")

// PairingCode is PairingCodeIn without the chat: the approved user is not
// greeted.
func (s *Store) PairingCode(ctx context.Context, channel, userID, username, newCode string, ttl time.Duration) (code string, fresh bool, err error) {
	return s.PairingCodeIn(ctx, channel, "", userID, username, newCode, ttl)
}

// PairingCodeIn returns the user's unexpired pending code, or stores
// newCode valid for ttl, given in the private chat chatKey (where the
// greeting goes once approved). fresh is true when newCode was stored.
func (s *Store) PairingCodeIn(ctx context.Context, channel, chatKey, userID, username, newCode string, ttl time.Duration) (code string, fresh bool, err error) {
	if userID == "" {
		return "", false, ErrNoUserID
	}
	err = s.inTx(ctx, func(tx conn) error {
		fresh = false
		now := s.nowMS()
		var exp int64
		switch err := tx.QueryRowContext(ctx, sqlPendingPairing, channel, userID, now).Scan(&code, &exp); {
		case err == nil:
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		code, fresh = newCode, true
		_, err := tx.ExecContext(ctx, sqlInsertPairing, newCode, channel, userID, username, now, now+ttl.Milliseconds(), chatKey)
		return err
	})
	if err != nil {
		return "", false, fmt.Errorf("store: pairing code: %w", err)
	}
	return code, fresh, nil
}

// ApprovePairing admits the user who holds code. It returns the pairing.
// When the code was given in a known chat, the bot owes the user a
// greeting there (GreetingsOwed), whichever process approved it.
func (s *Store) ApprovePairing(ctx context.Context, code string) (Pairing, error) {
	p, err := s.changePairing(ctx, code, func(tx conn, p *Pairing, now int64) error {
		if p.ApprovedAt == nil && p.ExpiresAt.UnixMilli() <= now {
			return ErrPairingExpired
		}
		if _, err := tx.ExecContext(ctx, sqlApprovePair, now, code); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, sqlApproveUser, p.Channel, p.UserID, p.Username, now, p.ChatKey, boolInt(p.ChatKey != ""))
		return err
	})
	if err != nil {
		return Pairing{}, fmt.Errorf("store: approve pairing %s: %w", code, err)
	}
	return p, nil
}

// IsApproved reports whether a user was admitted by pairing. An empty user
// id (a message without an author) is never approved, whatever is stored.
func (s *Store) IsApproved(ctx context.Context, channel, userID string) (bool, error) {
	if userID == "" {
		return false, nil
	}
	var one int
	err := s.db.QueryRowContext(ctx, sqlIsApproved, channel, userID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: is approved: %w", err)
	}
	return true, nil
}

// RevokeUser removes a user admitted by pairing.
func (s *Store) RevokeUser(ctx context.Context, channel, userID string) (bool, error) {
	res, err := s.write(ctx, sqlRevokeUser, channel, userID)
	if err != nil {
		return false, fmt.Errorf("store: revoke user: %w", err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// PendingPairings lists unexpired codes not yet approved, oldest first.
func (s *Store) PendingPairings(ctx context.Context) ([]Pairing, error) {
	rows, err := s.db.QueryContext(ctx, sqlListPairing, s.nowMS())
	if err != nil {
		return nil, fmt.Errorf("store: list pairings: %w", err)
	}
	defer rows.Close()
	var out []Pairing
	for rows.Next() {
		var p Pairing
		var created, expires int64
		var approved sql.NullInt64
		if err := rows.Scan(&p.Code, &p.Channel, &p.UserID, &p.Username, &created, &expires, &approved); err != nil {
			return nil, fmt.Errorf("store: list pairings: %w", err)
		}
		p.CreatedAt, p.ExpiresAt, p.ApprovedAt = fromMS(created), fromMS(expires), fromNullMS(approved)
		out = append(out, p)
	}
	return out, rows.Err()
}

const sqlDenyPair = `UPDATE pairings SET expires_at = ? WHERE code = ? AND approved_at IS NULL`

// DenyPairing turns down the pending request that holds code: the code
// stops working at once and its user is not admitted (writing to the bot
// again gives them a new code, a new request). It returns the pairing, or
// an error matching ErrNotFound when no pending, unexpired request has
// the code (unknown, approved, denied or expired).
func (s *Store) DenyPairing(ctx context.Context, code string) (Pairing, error) {
	p, err := s.changePairing(ctx, code, func(tx conn, p *Pairing, now int64) error {
		if p.ApprovedAt != nil || p.ExpiresAt.UnixMilli() <= now {
			return ErrNotFound
		}
		p.ExpiresAt = fromMS(now)
		_, err := tx.ExecContext(ctx, sqlDenyPair, now, code)
		return err
	})
	if err != nil {
		return Pairing{}, fmt.Errorf("store: deny pairing %s: %w", code, err)
	}
	return p, nil
}

// changePairing reads the pairing with code (ErrNotFound when there is
// none) and hands it to change, with the time, in one transaction.
func (s *Store) changePairing(ctx context.Context, code string, change func(tx conn, p *Pairing, now int64) error) (Pairing, error) {
	var p Pairing
	err := s.inTx(ctx, func(tx conn) error {
		var created, expires int64
		var approved sql.NullInt64
		err := tx.QueryRowContext(ctx, sqlGetPairing, code).Scan(&p.Code, &p.Channel, &p.UserID, &p.Username,
			&created, &expires, &approved, &p.ChatKey)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		p.CreatedAt, p.ExpiresAt, p.ApprovedAt = fromMS(created), fromMS(expires), fromNullMS(approved)
		return change(tx, &p, s.nowMS())
	})
	return p, err
}

// ApprovedUser is a user admitted by pairing.
type ApprovedUser struct {
	Channel, UserID, Username string
	ChatKey                   string // their private chat; "" when approved before it was kept
	ApprovedAt                time.Time
}

const (
	sqlApprovedUsers = `SELECT channel, user_id, username, chat_key, approved_at FROM approved_users`
	sqlGreetingsOwed = sqlApprovedUsers + ` WHERE greet = 1 ORDER BY approved_at`
	sqlClaimGreeting = `UPDATE approved_users SET greet = 0 WHERE channel = ? AND user_id = ? AND greet = 1`
)

// ApprovedUsers lists the users admitted by pairing, by channel, newest
// first within each.
func (s *Store) ApprovedUsers(ctx context.Context) ([]ApprovedUser, error) {
	return s.approvedUsers(ctx, sqlApprovedUsers+` ORDER BY channel, approved_at DESC`)
}

// GreetingsOwed lists the approved users the bot has not yet told that
// they were admitted, oldest approval first.
func (s *Store) GreetingsOwed(ctx context.Context) ([]ApprovedUser, error) {
	return s.approvedUsers(ctx, sqlGreetingsOwed)
}

// ClaimGreeting takes the greeting owed to a user, once: it reports false
// when none is owed (already claimed, by this or another replica, or the
// user was revoked).
func (s *Store) ClaimGreeting(ctx context.Context, channel, userID string) (bool, error) {
	res, err := s.write(ctx, sqlClaimGreeting, channel, userID)
	if err != nil {
		return false, fmt.Errorf("store: claim greeting: %w", err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

func (s *Store) approvedUsers(ctx context.Context, query string) ([]ApprovedUser, error) {
	rows, err := s.db.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("store: approved users: %w", err)
	}
	defer rows.Close()
	var out []ApprovedUser
	for rows.Next() {
		var u ApprovedUser
		var at int64
		if err := rows.Scan(&u.Channel, &u.UserID, &u.Username, &u.ChatKey, &at); err != nil {
			return nil, fmt.Errorf("store: approved users: %w", err)
		}
		u.ApprovedAt = fromMS(at)
		out = append(out, u)
	}
	return out, rows.Err()
}
