package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// migrationChannelState keeps a channel adapter's own small state by key
// (Matrix's sync token and kept login): channels.State.
const migrationChannelState = `
CREATE TABLE channel_state (
	channel    TEXT NOT NULL,
	key        TEXT NOT NULL,
	value      TEXT NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (channel, key)
) WITHOUT ROWID;
`

const (
	sqlChannelStateGet = `SELECT value FROM channel_state WHERE channel = ? AND key = ?`
	sqlChannelStateSet = `INSERT INTO channel_state (channel, key, value, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (channel, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`
	sqlChannelStateDelete = `DELETE FROM channel_state WHERE channel = ? AND key = ?`
)

// ChannelState returns the value of channel's key; ok is false when there
// is none.
func (s *Store) ChannelState(ctx context.Context, channel, key string) (value string, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, sqlChannelStateGet, channel, key).Scan(&value)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("store: channel state %s %q: %w", channel, key, err)
	}
	return value, true, nil
}

// SetChannelState sets channel's key to value.
func (s *Store) SetChannelState(ctx context.Context, channel, key, value string) error {
	if _, err := s.write(ctx, sqlChannelStateSet, channel, key, value, time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("store: set channel state %s %q: %w", channel, key, err)
	}
	return nil
}

// DeleteChannelState removes channel's key.
func (s *Store) DeleteChannelState(ctx context.Context, channel, key string) error {
	if _, err := s.write(ctx, sqlChannelStateDelete, channel, key); err != nil {
		return fmt.Errorf("store: delete channel state %s %q: %w", channel, key, err)
	}
	return nil
}
