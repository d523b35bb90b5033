package store

import (
	"context"
	"fmt"
)

// migrationReplyParts: the parts of a reply the platform accepted, so that
// a reply cut off by a crash between its parts is completed rather than
// sent again whole. reply names the reply within its inbox message (the
// router's key: its ordinal and a hash of its text); part counts from 0.
const migrationReplyParts = `
CREATE TABLE reply_parts (
	inbox_id        INTEGER NOT NULL REFERENCES inbox (id),
	reply           TEXT    NOT NULL,
	part            INTEGER NOT NULL,
	platform_msg_id TEXT    NOT NULL,
	sent_at         INTEGER NOT NULL,
	PRIMARY KEY (inbox_id, reply, part)
) WITHOUT ROWID;
`

const (
	sqlInsertReplyPart = `INSERT INTO reply_parts (inbox_id, reply, part, platform_msg_id, sent_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (inbox_id, reply, part) DO NOTHING`
	sqlReplyParts = `SELECT part, platform_msg_id FROM reply_parts WHERE inbox_id = ? AND reply = ?`
)

// ReplyPart is a part of a reply the platform accepted, as RecordReplyPart
// records it (RecordDelivery takes the last ones).
type ReplyPart struct {
	Reply         string // the reply's name within its inbox message
	Part          int    // from 0
	PlatformMsgID string
}

// RecordReplyPart records that the platform accepted part (from 0) of the
// reply named reply to the inbox item, as platformMsgID. Recording a part
// again keeps the first record.
func (s *Store) RecordReplyPart(ctx context.Context, inboxID int64, reply string, part int, platformMsgID string) error {
	_, err := s.write(ctx, sqlInsertReplyPart, inboxID, reply, part, platformMsgID, s.nowMS())
	if isForeignKey(err) {
		return fmt.Errorf("store: record part %d of reply %s to inbox %d: %w", part, reply, inboxID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("store: record part %d of reply %s to inbox %d: %w", part, reply, inboxID, err)
	}
	return nil
}

// ReplyParts returns the recorded parts of the reply named reply to the
// inbox item: platform message id by part.
func (s *Store) ReplyParts(ctx context.Context, inboxID int64, reply string) (map[int]string, error) {
	type row struct {
		part int
		id   string
	}
	rows, err := queryAll(ctx, s.db, func(r rowScanner) (row, error) {
		var x row
		return x, r.Scan(&x.part, &x.id)
	}, sqlReplyParts, inboxID, reply)
	if err != nil {
		return nil, fmt.Errorf("store: parts of reply %s to inbox %d: %w", reply, inboxID, err)
	}
	out := make(map[int]string, len(rows))
	for _, x := range rows {
		out[x.part] = x.id
	}
	return out, nil
}
