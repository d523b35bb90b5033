package store

import (
	"context"
	"fmt"
	"time"
)

// migrationDeliveryStatus: the delivery status a platform reports for a
// sent message (WhatsApp's status callbacks), kept with its delivery.
const migrationDeliveryStatus = `
ALTER TABLE deliveries ADD COLUMN status TEXT NOT NULL DEFAULT '';
ALTER TABLE deliveries ADD COLUMN status_at INTEGER;
ALTER TABLE deliveries ADD COLUMN status_error TEXT NOT NULL DEFAULT '';
CREATE INDEX deliveries_platform_msg ON deliveries (platform_msg_id) WHERE platform_msg_id <> '';
`

// The delivery statuses, in the order a message goes through them.
const (
	StatusSent      = "sent"
	StatusDelivered = "delivered"
	StatusRead      = "read"
	StatusFailed    = "failed"
)

// statusRank orders the statuses: a callback that arrives late never
// takes a delivery back ("delivered" after "read"); 0 is unknown.
func statusRank(status string) int {
	switch status {
	case StatusSent:
		return 1
	case StatusDelivered:
		return 2
	case StatusRead:
		return 3
	case StatusFailed:
		return 4
	}
	return 0
}

const sqlSetDeliveryStatus = `UPDATE deliveries SET status = ?, status_at = ?, status_error = ?
WHERE platform_msg_id = ? AND inbox_id IN (SELECT id FROM inbox WHERE channel = ?)
AND (CASE status WHEN 'sent' THEN 1 WHEN 'delivered' THEN 2 WHEN 'read' THEN 3 WHEN 'failed' THEN 4 ELSE 0 END) < ?`

// SetDeliveryStatus records the status the platform reports for its
// message platformMsgID on channel, with the reason of a failure (errText,
// no secrets), unless the delivery has a later status already. It reports
// whether a delivery took it: false for an unknown status, a message the
// store has no delivery of, or a status that came late.
func (s *Store) SetDeliveryStatus(ctx context.Context, channel, platformMsgID, status, errText string, at time.Time) (bool, error) {
	rank := statusRank(status)
	if rank == 0 || platformMsgID == "" {
		return false, nil
	}
	res, err := s.write(ctx, sqlSetDeliveryStatus, status, at.UnixMilli(), errText, platformMsgID, channel, rank)
	if err != nil {
		return false, fmt.Errorf("store: delivery status of %s message %q: %w", channel, platformMsgID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("store: delivery status of %s message %q: %w", channel, platformMsgID, err)
	}
	return n > 0, nil
}
