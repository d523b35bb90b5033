// Package reply is the reply side of the gateway: what a turn sends to its
// chat and how it gets there. A turn's Chat (chat.go) sends its replies and
// files, records each confirmed one so that a restart never answers twice,
// and completes a split reply a crash cut off (parts.go); while the model
// writes, the chat shows a live preview and what running tools do
// (preview.go, progress.go), and a typing indicator (typing.go); a reply
// the platform does not take waits in the outbox (outbox.go); every text
// is redacted and capped on its way out (shape.go).
//
// It is a package of its own beside router rather than router/reply: the
// router uses it through one small port (router's sender: Send, Deliver,
// Bind, Typing, Answered), and the gateway configures it directly
// (Options, the outbox's events for the metrics), so it is a peer of the
// router, not an internal of it.
package reply

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/store"
)

// Store is the part of the store the reply side needs: the durable record
// of what was delivered for an inbox message, and of the parts of a reply
// split by its channel (parts.go).
type Store interface {
	RecordDelivery(ctx context.Context, inboxID, turnID int64, platformMsgID string, parts ...store.ReplyPart) error
	Deliveries(ctx context.Context, inboxID int64) (int, error)
	RecordReplyPart(ctx context.Context, inboxID int64, reply string, part int, platformMsgID string) error
	ReplyParts(ctx context.Context, inboxID int64, reply string) (map[int]string, error)
}

var _ Store = (*store.Store)(nil)

// Options are the reply side's settings (router.Config.Replies).
type Options struct {
	// Preview turns on streaming previews per channel (by name): a draft,
	// or one message edited as the model writes, which the final reply
	// replaces (preview.go).
	Preview map[string]bool
	// ToolProgress turns on, per channel, the line that says what tools
	// running longer than a moment are doing (preview.go).
	ToolProgress map[string]bool
	// StillWorkingAfter is how long a turn's model call may be silent
	// before the chat is told StillWorking, once per turn (silence.go);
	// 0: never.
	StillWorkingAfter time.Duration
	// Outbox keeps the replies the platform did not take, to deliver them
	// later (outbox.go); nil: no outbox, such a reply is lost. The
	// gateway's is its *store.Store.
	Outbox OutboxStore
	// OutboxConfig tunes the outbox's delivery; zero values take the
	// defaults.
	OutboxConfig OutboxConfig
	// Now is the outbox's clock; nil: time.Now.
	Now func() time.Time
	// Redact replaces the gateway's secrets in what is sent to chats;
	// nil: text goes out as written.
	Redact func(string) string
	// MaxChars caps a message to a chat (channels.reply_max_chars); past
	// it the reply is cut and says so (shape.go). 0: DefaultReplyMaxChars;
	// negative: no cap.
	MaxChars int
	// FilesRoot is the only directory send_file may send from (the
	// workspace).
	FilesRoot string
	// OnSend observes the outcome of every message sent to a chat
	// (metrics: send failures); may be nil.
	OnSend func(channel string, err error)
}

// Config wires a Sender: its Options, and what its owner (the router)
// provides.
type Config struct {
	Options
	Store Store
	// Channel returns the running channel of that name, or nil.
	Channel func(name string) channels.Channel
	// InProcess reports whether a channel's replies must come from this
	// process (a requester waits on it): they are never kept in the outbox.
	InProcess func(channel string) bool
	// Shared: other replicas share the store and keep replies in the
	// outbox too, so the store is asked what waits, and looked at now and
	// then.
	Shared bool
	Logger *slog.Logger
}

// Sender sends to chats on behalf of the router: notices, replies kept in
// the outbox when the platform does not take them, and the chats of turns.
type Sender struct {
	cfg    Config
	log    *slog.Logger
	outbox *Outbox // nil: no Options.Outbox

	mu     sync.Mutex
	typing map[string]chan struct{} // per channel, typingInFlight slots
}

// New returns a Sender; Logger is its parent's (the router's).
func New(cfg Config) *Sender {
	if cfg.MaxChars == 0 {
		cfg.MaxChars = DefaultReplyMaxChars
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.InProcess == nil {
		cfg.InProcess = func(string) bool { return false }
	}
	s := &Sender{cfg: cfg, log: cfg.Logger, typing: map[string]chan struct{}{}}
	if cfg.Outbox != nil {
		s.outbox = newOutbox(s, cfg.Outbox, cfg.OutboxConfig, cfg.Now, cfg.Shared)
	}
	return s
}

// Outbox is the sender's outbox; nil when it has none.
func (s *Sender) Outbox() *Outbox { return s.outbox }

// Send sends text to the chat of in, quoting in.MessageID in groups.
func (s *Sender) Send(ctx context.Context, in channels.Inbound, text string) (string, error) {
	return s.send(ctx, in, text, nil)
}

// send is Send with the durable record of the reply's parts, if any.
func (s *Sender) send(ctx context.Context, in channels.Inbound, text string, parts channels.Parts) (string, error) {
	ch := s.cfg.Channel(in.Channel)
	if ch == nil {
		return "", fmt.Errorf("router: no channel %q", in.Channel)
	}
	out := outbound(in, s.Text(text))
	out.Parts = parts
	// The mark tells a channel that pairs replies with requests (the HTTP
	// API) which message this answers.
	id, err := ch.Send(channels.WithInbound(ctx, in), out)
	// A preview dropped by outbound pacing (a queue notice) is not a
	// failed send; the adapter counts it as paced.
	if s.cfg.OnSend != nil && !errors.Is(err, channels.ErrPaced) {
		s.cfg.OnSend(in.Channel, err)
	}
	return id, err
}

// Answered reports whether a reply to the inbox message was delivered, or
// is kept in the outbox (which answers it too).
func (s *Sender) Answered(ctx context.Context, inboxID int64) bool {
	n, err := s.cfg.Store.Deliveries(ctx, inboxID)
	if err != nil {
		return false
	}
	if n == 0 && s.outbox != nil {
		n, err = s.outbox.store.OutboxFor(ctx, inboxID)
	}
	return err == nil && n > 0
}

// outbound is the message a reply to in becomes: in groups it quotes the
// message it answers.
func outbound(in channels.Inbound, text string) channels.Outbound {
	out := channels.Outbound{ChatID: in.ChatID, Text: text}
	if in.ChatType == channels.Group {
		out.ReplyTo = in.MessageID
	}
	return out
}

// chatKey names a chat in the outbox's maps.
func chatKey(channel, chat string) string { return channel + "\x00" + chat }

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
