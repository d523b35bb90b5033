package store

import (
	"context"
	"fmt"
	"time"
)

// Outbox statuses.
const (
	OutboxPending   = "pending"
	OutboxDelivered = "delivered"
	OutboxDropped   = "dropped"
)

// Turn delivery states (Turn.Delivery): empty while every reply went out
// when it was written.
const (
	DeliveryPending = "pending" // a reply waits in the outbox
	DeliveryLate    = "late"    // … and was delivered later
	DeliveryDropped = "dropped" // … and was given up after the maximum age
)

// migrationOutbox: replies the platform did not take when they were
// written, kept until it does (or until they are too old), and each turn's
// delivery state. outbox_pending finds the chats with waiting replies in
// order without scanning delivered ones.
const migrationOutbox = `
CREATE TABLE outbox (
	id              INTEGER PRIMARY KEY,
	inbox_id        INTEGER REFERENCES inbox (id),
	turn_id         INTEGER REFERENCES turns (id),
	channel         TEXT    NOT NULL,
	chat_key        TEXT    NOT NULL,
	message_id      TEXT    NOT NULL DEFAULT '',
	reply_to        TEXT    NOT NULL DEFAULT '',
	text            TEXT    NOT NULL,
	status          TEXT    NOT NULL CHECK (status IN ('pending', 'delivered', 'dropped')),
	attempts        INTEGER NOT NULL DEFAULT 0,
	last_error      TEXT    NOT NULL DEFAULT '',
	created_at      INTEGER NOT NULL,
	next_attempt_at INTEGER NOT NULL,
	finished_at     INTEGER
);
CREATE INDEX outbox_pending ON outbox (channel, chat_key, id) WHERE status = 'pending';
CREATE INDEX outbox_inbox ON outbox (inbox_id) WHERE inbox_id IS NOT NULL;

ALTER TABLE turns ADD COLUMN delivery TEXT NOT NULL DEFAULT '';
`

// migrationOutboxFiles: a file kept in the outbox (send_file, send_photo),
// by reference: the workspace path (read when it is sent) or the URL; and
// the scheduled run a reply belongs to, recorded in schedule_deliveries
// when it is delivered late.
const migrationOutboxFiles = `
ALTER TABLE outbox ADD COLUMN file_path TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN file_url TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN photo INTEGER NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN schedule_run_id INTEGER REFERENCES schedule_runs (id);
CREATE INDEX outbox_schedule_run ON outbox (schedule_run_id) WHERE schedule_run_id IS NOT NULL;
`

// OutboxItem is a reply waiting for its platform. InboxID and TurnID are 0
// when the reply answers no stored message (a job) or belongs to no turn.
// A file (FilePath or FileURL set) has its caption in Text.
type OutboxItem struct {
	ID, InboxID, TurnID int64
	Channel, ChatKey    string
	MessageID           string // the inbound message answered (idempotency keys derived from it)
	ReplyTo             string // the platform message to quote, if any
	Text                string
	FilePath            string // a file in the workspace, read when it is sent
	FileURL             string // a file by URL
	Photo               bool   // the file is sent as a photo
	// ScheduleRunID is the scheduled run the reply belongs to, if any: its
	// late delivery is recorded for the run too.
	ScheduleRunID int64
	Status        string // OutboxPending, OutboxDelivered or OutboxDropped
	Attempts      int
	LastError     string
	CreatedAt     time.Time
	NextAttemptAt time.Time
}

const (
	sqlInsertOutbox = `INSERT INTO outbox (inbox_id, turn_id, channel, chat_key, message_id, reply_to, text, status,
			attempts, last_error, created_at, next_attempt_at, file_path, file_url, photo, schedule_run_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlTurnDelivery   = `UPDATE turns SET delivery = ? WHERE id = ?`
	sqlOutboxColumns  = `id, COALESCE(inbox_id, 0), COALESCE(turn_id, 0), channel, chat_key, message_id, reply_to, text, status, attempts, last_error, created_at, next_attempt_at, file_path, file_url, photo, COALESCE(schedule_run_id, 0)`
	sqlPendingOutbox  = `SELECT ` + sqlOutboxColumns + ` FROM outbox WHERE status = 'pending' ORDER BY id`
	sqlOutboxWaiting  = `SELECT COUNT(*) FROM outbox WHERE status = 'pending' AND channel = ? AND chat_key = ?`
	sqlOutboxForInbox = `SELECT COUNT(*) FROM outbox WHERE inbox_id = ? AND status <> 'dropped'`
	sqlRetryOutbox    = `UPDATE outbox SET attempts = ?, last_error = ?, next_attempt_at = ? WHERE id = ? AND status = 'pending'`
	sqlFinishOutbox   = `UPDATE outbox SET status = ?, last_error = ?, finished_at = ? WHERE id = ? AND status = 'pending'`
	sqlCountPending   = `SELECT COUNT(*) FROM outbox WHERE status = 'pending'`
)

// EnqueueOutbox stores a reply to deliver later and marks its turn's
// delivery pending, in one transaction. A zero NextAttemptAt means now.
func (s *Store) EnqueueOutbox(ctx context.Context, it OutboxItem) (int64, error) {
	if it.Channel == "" || it.ChatKey == "" {
		return 0, fmt.Errorf("store: enqueue reply: channel and chat key are required")
	}
	var id int64
	err := s.inTxSimple(ctx, func(tx conn) error {
		now := s.nowMS()
		next := now
		if !it.NextAttemptAt.IsZero() {
			next = it.NextAttemptAt.UnixMilli()
		}
		var err error
		id, err = tx.insertID(ctx, sqlInsertOutbox, nullID(it.InboxID), nullID(it.TurnID), it.Channel, it.ChatKey,
			it.MessageID, it.ReplyTo, it.Text, it.Attempts, it.LastError, now, next, it.FilePath, it.FileURL,
			boolInt(it.Photo), nullID(it.ScheduleRunID))
		if err != nil || it.TurnID == 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, sqlTurnDelivery, DeliveryPending, it.TurnID)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: enqueue reply to %s/%s: %w", it.Channel, it.ChatKey, err)
	}
	return id, nil
}

// PendingOutbox returns the replies still waiting, oldest first.
func (s *Store) PendingOutbox(ctx context.Context) ([]OutboxItem, error) {
	out, err := queryAll(ctx, s.db, scanOutboxItem, sqlPendingOutbox)
	if err != nil {
		return nil, fmt.Errorf("store: pending replies: %w", err)
	}
	return out, nil
}

// OutboxWaiting counts the replies waiting for one chat: a new reply to
// it must wait behind them.
func (s *Store) OutboxWaiting(ctx context.Context, channel, chatKey string) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, sqlOutboxWaiting, channel, chatKey).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: replies waiting for %s/%s: %w", channel, chatKey, err)
	}
	return n, nil
}

// OutboxCount counts the replies waiting in the whole outbox.
func (s *Store) OutboxCount(ctx context.Context) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, sqlCountPending).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: replies waiting: %w", err)
	}
	return n, nil
}

// OutboxFor counts the replies to an inbox message kept in the outbox,
// waiting or delivered (not dropped): such a message is answered.
func (s *Store) OutboxFor(ctx context.Context, inboxID int64) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, sqlOutboxForInbox, inboxID).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: replies kept for inbox %d: %w", inboxID, err)
	}
	return n, nil
}

// RetryOutbox records a failed attempt and when to try again. lastErr must
// carry no secret (the caller's adapters redact tokens).
func (s *Store) RetryOutbox(ctx context.Context, id int64, attempts int, next time.Time, lastErr string) error {
	if _, err := s.write(ctx, sqlRetryOutbox, attempts, lastErr, next.UnixMilli(), id); err != nil {
		return fmt.Errorf("store: retry reply %d: %w", id, err)
	}
	return nil
}

// DeliverOutbox marks a reply delivered, records the delivery of its inbox
// message and of its scheduled run (when it has them) and marks its turn
// delivered late, in one transaction.
func (s *Store) DeliverOutbox(ctx context.Context, it OutboxItem, platformMsgID string) error {
	err := s.inTxSimple(ctx, func(tx conn) error {
		now := s.nowMS()
		if _, err := tx.ExecContext(ctx, sqlFinishOutbox, OutboxDelivered, "", now, it.ID); err != nil {
			return err
		}
		if it.InboxID != 0 {
			if _, err := tx.ExecContext(ctx, sqlInsertDelivery, it.InboxID, nullID(it.TurnID), platformMsgID, now); err != nil {
				return err
			}
		}
		if it.ScheduleRunID != 0 {
			if _, err := tx.ExecContext(ctx, sqlInsertSchDel, it.ScheduleRunID, nullID(it.TurnID), platformMsgID, now); err != nil {
				return err
			}
		}
		return s.setTurnDelivery(ctx, tx, it.TurnID, DeliveryLate)
	})
	if err != nil {
		return fmt.Errorf("store: deliver reply %d: %w", it.ID, err)
	}
	return nil
}

// DropOutbox gives a reply up and marks its turn's delivery dropped.
func (s *Store) DropOutbox(ctx context.Context, it OutboxItem, reason string) error {
	err := s.inTxSimple(ctx, func(tx conn) error {
		if _, err := tx.ExecContext(ctx, sqlFinishOutbox, OutboxDropped, reason, s.nowMS(), it.ID); err != nil {
			return err
		}
		return s.setTurnDelivery(ctx, tx, it.TurnID, DeliveryDropped)
	})
	if err != nil {
		return fmt.Errorf("store: drop reply %d: %w", it.ID, err)
	}
	return nil
}

// setTurnDelivery sets a turn's delivery state; a turn with another reply
// still waiting stays pending.
func (s *Store) setTurnDelivery(ctx context.Context, tx conn, turnID int64, state string) error {
	if turnID == 0 {
		return nil
	}
	var waiting int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM outbox WHERE turn_id = ? AND status = 'pending'`, turnID).Scan(&waiting); err != nil {
		return err
	}
	if waiting > 0 && state == DeliveryLate {
		state = DeliveryPending
	}
	_, err := tx.ExecContext(ctx, sqlTurnDelivery, state, turnID)
	return err
}

func scanOutboxItem(r rowScanner) (OutboxItem, error) {
	var it OutboxItem
	var created, next, photo int64
	if err := r.Scan(&it.ID, &it.InboxID, &it.TurnID, &it.Channel, &it.ChatKey, &it.MessageID, &it.ReplyTo, &it.Text,
		&it.Status, &it.Attempts, &it.LastError, &created, &next, &it.FilePath, &it.FileURL, &photo, &it.ScheduleRunID); err != nil {
		return OutboxItem{}, err
	}
	it.CreatedAt, it.NextAttemptAt, it.Photo = fromMS(created), fromMS(next), photo != 0
	return it, nil
}

const sqlClaimOutbox = `UPDATE outbox SET next_attempt_at = ? WHERE id = ? AND status = 'pending' AND next_attempt_at = ?`

// ClaimOutbox takes a waiting reply for one attempt by moving its next
// attempt from seen (as read) to next; false when another process (or an
// earlier pass) moved it first, or it is no longer waiting.
func (s *Store) ClaimOutbox(ctx context.Context, id int64, seen, next time.Time) (bool, error) {
	res, err := s.write(ctx, sqlClaimOutbox, next.UnixMilli(), id, seen.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("store: claim reply %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("store: claim reply %d: %w", id, err)
	}
	return n == 1, nil
}
