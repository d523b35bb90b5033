package reply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strconv"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/store"
)

// replyKey names a reply within the turn answering an inbox message: its
// ordinal (how many replies to the message were delivered before it) and a
// hash of its text. A turn resumed after a restart computes the same key
// for the same reply, since a reply is recorded delivered only once whole;
// another text at the same ordinal (the model answered differently) gets
// another key, so parts of one text never stand in for another's.
func replyKey(ordinal int, text string) string {
	h := sha256.Sum256([]byte(text))
	return strconv.Itoa(ordinal) + ":" + hex.EncodeToString(h[:8])
}

// replyParts is the channels.Parts of one reply to an inbox message, kept
// in the store's reply_parts.
type replyParts struct {
	st      Store
	inboxID int64
	key     string
	sent    map[int]string // sent before a restart, by part
	log     *slog.Logger
	// hold keeps the part confirmed last unrecorded (held) until the next
	// one is confirmed, or until the reply's delivery is recorded with it
	// (Chat.Send: one commit for both), or until Sent is asked about the
	// next part or flush records it (the send failed). Between the
	// platform's answer and that record no part is sent, so a crash
	// resends the part no more often than before.
	hold    bool
	held    []store.ReplyPart
	heldCtx context.Context // Confirmed's, for a flush from Sent
}

// partsFor returns the part record of the reply text to the inbox item, or
// nil (send every part, record none) when the store cannot say which parts
// went out before. For a fresh message (stored a moment ago) there is
// nothing to look up: replied is how many replies this turn delivered.
// Otherwise the store counts the replies delivered before, whichever
// process sent them, and has the parts of this one sent before a crash.
func (s *Sender) partsFor(ctx context.Context, inboxID int64, fresh bool, replied int, text string, log *slog.Logger) channels.Parts {
	if fresh {
		return &replyParts{st: s.cfg.Store, inboxID: inboxID, key: replyKey(replied, text), log: log}
	}
	n, err := s.cfg.Store.Deliveries(ctx, inboxID)
	if err != nil {
		log.Warn("reply parts: cannot count the deliveries; sending the reply whole", "err", err)
		return nil
	}
	key := replyKey(n, text)
	sent, err := s.cfg.Store.ReplyParts(ctx, inboxID, key)
	if err != nil {
		log.Warn("reply parts: cannot read the parts sent before; sending the reply whole", "err", err)
		return nil
	}
	if len(sent) > 0 {
		log.Info("completing a reply cut off after a restart", "parts_sent", len(sent))
	}
	return &replyParts{st: s.cfg.Store, inboxID: inboxID, key: key, sent: sent, log: log}
}

// Sent implements channels.Parts.
//
// An adapter asks it right before sending part i, so a part held back
// (see hold) is recorded here, before the next part goes out: a crash
// while part i is sent must not send part i-1 again.
func (p *replyParts) Sent(i int) (string, bool) {
	if len(p.held) > 0 {
		p.flush(p.heldCtx)
	}
	id, ok := p.sent[i]
	return id, ok
}

// Confirmed implements channels.Parts: it records the part at once. A
// failed record is logged, not returned: the reply goes on, and only a
// crash before its delivery record would send the part again.
func (p *replyParts) Confirmed(ctx context.Context, i int, id string) {
	if p.hold {
		p.flush(ctx)
		p.held = append(p.held, store.ReplyPart{Reply: p.key, Part: i, PlatformMsgID: id})
		p.heldCtx = context.WithoutCancel(ctx)
		return
	}
	p.record(ctx, i, id)
}

func (p *replyParts) record(ctx context.Context, i int, id string) {
	if err := p.st.RecordReplyPart(context.WithoutCancel(ctx), p.inboxID, p.key, i, id); err != nil {
		p.log.Error("record reply part", "part", i, "err", err)
	}
}

// flush records the part held back (see hold).
func (p *replyParts) flush(ctx context.Context) {
	for _, h := range p.held {
		p.record(ctx, h.Part, h.PlatformMsgID)
	}
	p.held = nil
}

// take returns the parts held back for the delivery record, and forgets
// them; p may be nil.
func (p *replyParts) take() []store.ReplyPart {
	if p == nil {
		return nil
	}
	h := p.held
	p.held = nil
	return h
}

var _ channels.Parts = (*replyParts)(nil)
