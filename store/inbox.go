package store

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"
)

// Inbox statuses.
const (
	InboxPending = "pending"
	InboxDone    = "done"
	InboxSkipped = "skipped"
)

// InboxItem is an inbound platform message, stored before the adapter
// confirms it to the platform so that a crash cannot lose it.
type InboxItem struct {
	ID                                  int64
	Channel, ChatKey, MessageID, UserID string
	Payload                             []byte // JSON of the normalised message
	Status                              string // InboxPending, InboxDone or InboxSkipped
	ReceivedAt                          time.Time
}

const (
	sqlIntake = `INSERT INTO inbox (channel, chat_key, message_id, user_id, payload, status, received_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (channel, chat_key, message_id) DO NOTHING`
	sqlInboxByKey   = `SELECT id FROM inbox WHERE channel = ? AND chat_key = ? AND message_id = ?`
	sqlFinishInbox  = `UPDATE inbox SET status = ?, finished_at = ? WHERE id = ?`
	sqlPendingInbox = `SELECT id, channel, chat_key, message_id, user_id, payload, status, received_at
		FROM inbox WHERE status = 'pending' ORDER BY id`
	sqlPendingInboxOf = `SELECT id, channel, chat_key, message_id, user_id, payload, status, received_at
		FROM inbox WHERE status = 'pending' AND channel = ? AND chat_key = ? ORDER BY id`
	sqlInsertDelivery = `INSERT INTO deliveries (inbox_id, turn_id, platform_msg_id, delivered_at) VALUES (?, ?, ?, ?)
		ON CONFLICT DO NOTHING`
	sqlCountDeliveries = `SELECT COUNT(*) FROM deliveries WHERE inbox_id = ?`
)

// Intake stores an inbound message once. (Channel, ChatKey, MessageID)
// identifies it: storing it again returns the existing id with fresh=false
// and changes nothing. An empty Status means InboxPending; a zero ReceivedAt
// means now.
func (s *Store) Intake(ctx context.Context, it InboxItem) (id int64, fresh bool, err error) {
	if it.Channel == "" || it.ChatKey == "" || it.MessageID == "" {
		return 0, false, fmt.Errorf("store: intake %q/%q/%q: channel, chat key and message id are required",
			it.Channel, it.ChatKey, it.MessageID)
	}
	status := it.Status
	if status == "" {
		status = InboxPending
	}
	payload := it.Payload
	if payload == nil {
		payload = []byte{}
	}
	err = s.inTx(ctx, func(tx conn) error {
		received := s.nowMS()
		if !it.ReceivedAt.IsZero() {
			received = it.ReceivedAt.UnixMilli()
		}
		var err error
		id, fresh, err = tx.insert(ctx, sqlIntake, it.Channel, it.ChatKey, it.MessageID, it.UserID, payload, status, received)
		if err != nil || fresh {
			return err
		}
		return tx.QueryRowContext(ctx, sqlInboxByKey, it.Channel, it.ChatKey, it.MessageID).Scan(&id)
	})
	if err != nil {
		return 0, false, fmt.Errorf("store: intake %s/%s/%s: %w", it.Channel, it.ChatKey, it.MessageID, err)
	}
	return id, fresh, nil
}

// FinishInbox marks an inbox item done or skipped.
func (s *Store) FinishInbox(ctx context.Context, id int64, status string) error {
	if status != InboxDone && status != InboxSkipped {
		return fmt.Errorf("store: finish inbox %d: invalid status %q", id, status)
	}
	res, err := s.write(ctx, sqlFinishInbox, status, s.nowMS(), id)
	if err != nil {
		return fmt.Errorf("store: finish inbox %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: finish inbox %d: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("store: finish inbox %d: %w", id, ErrNotFound)
	}
	return nil
}

// PendingInbox returns the items still pending, oldest first: at startup,
// the messages a crash left unanswered.
func (s *Store) PendingInbox(ctx context.Context) ([]InboxItem, error) {
	out, err := queryAll(ctx, s.db, scanInboxItem, sqlPendingInbox)
	if err != nil {
		return nil, fmt.Errorf("store: pending inbox: %w", err)
	}
	return out, nil
}

// PendingInboxOf returns the pending items of one chat, oldest first: what
// the replica that owns the chat has to process.
func (s *Store) PendingInboxOf(ctx context.Context, channel, chat string) ([]InboxItem, error) {
	out, err := queryAll(ctx, s.db, scanInboxItem, sqlPendingInboxOf, channel, chat)
	if err != nil {
		return nil, fmt.Errorf("store: pending inbox of %s/%s: %w", channel, chat, err)
	}
	return out, nil
}

// RecordDelivery records a reply to the inbox item that the platform
// confirmed. turnID may be 0. The same non-empty platformMsgID recorded twice
// for one item counts once. parts are parts of the reply the platform
// accepted that are not recorded yet (RecordReplyPart): they are recorded
// in the same transaction, one commit for a reply's last part and its
// delivery.
func (s *Store) RecordDelivery(ctx context.Context, inboxID, turnID int64, platformMsgID string, parts ...ReplyPart) error {
	now := s.nowMS()
	var err error
	if len(parts) == 0 {
		_, err = s.write(ctx, sqlInsertDelivery, inboxID, nullID(turnID), platformMsgID, now)
	} else {
		err = s.inTxSimple(ctx, func(tx conn) error {
			for _, p := range parts {
				if _, err := tx.ExecContext(ctx, sqlInsertReplyPart, inboxID, p.Reply, p.Part, p.PlatformMsgID, now); err != nil {
					return err
				}
			}
			_, err := tx.ExecContext(ctx, sqlInsertDelivery, inboxID, nullID(turnID), platformMsgID, now)
			return err
		})
	}
	if isForeignKey(err) {
		return fmt.Errorf("store: record delivery for inbox %d, turn %d: %w", inboxID, turnID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("store: record delivery for inbox %d: %w", inboxID, err)
	}
	return nil
}

// Deliveries counts the confirmed replies to the inbox item.
func (s *Store) Deliveries(ctx context.Context, inboxID int64) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, sqlCountDeliveries, inboxID).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: deliveries for inbox %d: %w", inboxID, err)
	}
	return n, nil
}

// sqlLatestInbound is the newest message id per chat of a channel, among
// ids that are numbers (Discord's snowflakes; button presses "ia:…" are
// not). Ids are compared as numbers, not text: "99" < "100". At most 19
// digits fit a BIGINT, and a snowflake has 19 until the 2090s.
const sqlLatestInbound = `SELECT chat_key, MAX(CASE
		WHEN length(message_id) BETWEEN 1 AND 19 AND ltrim(message_id, '0123456789') = ''
		THEN CAST(message_id AS BIGINT) END)
	FROM inbox WHERE channel = ? GROUP BY chat_key`

// LatestInbound returns, per chat of channel, the newest numeric message
// id taken in (whatever its status): where a catch-up after a restart
// starts. Chats with no numeric id are left out.
func (s *Store) LatestInbound(ctx context.Context, channel string) (map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, sqlLatestInbound, channel)
	if err != nil {
		return nil, fmt.Errorf("store: latest inbound of %s: %w", channel, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var chat string
		var id sql.NullInt64
		if err := rows.Scan(&chat, &id); err != nil {
			return nil, fmt.Errorf("store: latest inbound of %s: %w", channel, err)
		}
		if id.Valid {
			out[chat] = strconv.FormatInt(id.Int64, 10)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: latest inbound of %s: %w", channel, err)
	}
	return out, nil
}

// sqlLatestInboundAt is when the newest message of a chat was taken in
// (the (channel, chat_key, message_id) key's index serves it).
const sqlLatestInboundAt = `SELECT MAX(received_at) FROM inbox WHERE channel = ? AND chat_key = ?`

// LatestInboundAt returns when the newest message of a chat of channel was
// taken in, whatever its status; zero when there is none. WhatsApp lets a
// business write freely only within 24 hours of the user's last message.
func (s *Store) LatestInboundAt(ctx context.Context, channel, chat string) (time.Time, error) {
	var ms sql.NullInt64
	if err := s.db.QueryRowContext(ctx, sqlLatestInboundAt, channel, chat).Scan(&ms); err != nil {
		return time.Time{}, fmt.Errorf("store: latest inbound of %s/%s: %w", channel, chat, err)
	}
	if !ms.Valid {
		return time.Time{}, nil
	}
	return fromMS(ms.Int64), nil
}
