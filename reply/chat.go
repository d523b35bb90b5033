package reply

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/confine"
	"github.com/switchboard-gateway/switchboard/store"
)

// Binding is what a turn's Chat is bound to (Sender.Bind).
type Binding struct {
	// In is the chat, and the message answered (quoted in groups by the
	// first reply).
	In channels.Inbound
	// InboxID is the message the turn answers; its replies are recorded as
	// that message's deliveries. 0: none (a job).
	InboxID int64
	// TurnID is the turn's id when known from the start (a resumed turn);
	// otherwise it comes with the turn's EventTurnStart (Chat.Event).
	TurnID int64
	// Fresh: the message was stored a moment ago, so no earlier process
	// sent part of a reply to it.
	Fresh bool
	// Live shows the replies as they are written and the tools' progress,
	// where Options.Preview and ToolProgress turn them on for the channel.
	Live bool
	// Delivered, when set (jobs), records a confirmed send instead of the
	// inbox delivery record.
	Delivered func(ctx context.Context, turnID int64, platformMsgID string)
	// RunID is the scheduled run of a job's turn (JobTurn.RunID), which a
	// reply delivered late from the outbox is recorded against.
	RunID int64
	Log   *slog.Logger
}

// Chat is a turn's view of its chat (agent.Chat): sends go to the channel,
// and a confirmed send is recorded so that a restart never answers twice.
type Chat struct {
	s       *Sender
	in      channels.Inbound
	inboxID int64
	turnID  atomic.Int64
	log     *slog.Logger
	sent    atomic.Bool
	preview *previewer // streaming preview and tool progress, when on
	silence *silence   // the still-working line, when on
	// fresh: the message was stored a moment ago, so no earlier process
	// sent part of a reply to it; replies counts the replies delivered.
	fresh   bool
	replies atomic.Int64
	// delivered, when set (jobs), records a confirmed send instead of the
	// inbox delivery record.
	delivered func(ctx context.Context, turnID int64, platformMsgID string)
	// runID is the scheduled run of a job's turn (JobTurn.RunID), which a
	// reply delivered late from the outbox is recorded against.
	runID int64
}

var (
	_ agent.Chat          = (*Chat)(nil)
	_ agent.ChatFiles     = (*Chat)(nil)
	_ agent.ChatReactions = (*Chat)(nil)
)

// Bind returns the chat of a turn.
func (s *Sender) Bind(b Binding) *Chat {
	c := &Chat{s: s, in: b.In, inboxID: b.InboxID, log: b.Log, fresh: b.Fresh, delivered: b.Delivered, runID: b.RunID}
	if c.log == nil {
		c.log = s.log.With("channel", b.In.Channel, "chat", b.In.ChatID)
	}
	c.turnID.Store(b.TurnID)
	if b.Live {
		name := b.In.Channel
		c.preview = newPreviewer(s.cfg.Preview[name], s.cfg.ToolProgress[name], s.cfg.Channel(name), b.In,
			func(ctx context.Context, in channels.Inbound, text string) (string, error) {
				if c.sent.Load() {
					in.ChatType = channels.DM // reply-to only on the first message
				}
				return s.Send(ctx, in, text)
			})
		if c.preview != nil {
			c.preview.clean = s.cfg.Redact
		}
		// Only for a person's message (a job's turn has none), and not
		// where a requester waits for the reply alone (the chat API).
		if after := s.cfg.StillWorkingAfter; after > 0 && b.InboxID != 0 && (s.cfg.InProcess == nil || !s.cfg.InProcess(name)) {
			c.silence = &silence{after: after, notify: c.stillWorking}
		}
	}
	return c
}

// stillWorking tells the chat StillWorking: as a preview line where it has
// them (the reply then takes its place), else as a message of its own,
// which is no reply (the turn's answer still comes).
func (c *Chat) stillWorking(ctx context.Context) {
	if c.preview != nil && c.preview.notice(ctx, StillWorking) {
		return
	}
	if _, err := c.s.Send(ctx, c.in, StillWorking); err != nil {
		c.log.Warn("could not tell the chat that the model is slow", "err", err)
	}
}

// Event feeds the chat a turn event: it remembers the turn id for delivery
// records and passes the event to the streaming preview.
func (c *Chat) Event(ctx context.Context, ev agent.Event) {
	if ev.Kind == agent.EventTurnStart {
		c.turnID.Store(ev.TurnID)
	}
	if c.preview != nil {
		c.preview.event(ctx, ev)
	}
	if c.silence != nil {
		c.silence.event(ctx, ev)
	}
}

// Send implements agent.Chat. In groups the first reply quotes the message
// it answers.
func (c *Chat) Send(ctx context.Context, text string) (string, error) {
	text = c.s.Text(text) // before the preview's edit and the parts' key
	in := c.in
	if c.sent.Load() {
		in.ChatType = channels.DM // reply-to only on the first message
	}
	var id string
	var err error
	var last []store.ReplyPart // the reply's last part, recorded with its delivery
	ctx = channels.WithPriority(ctx, channels.PriorityReply)
	pid, edit := c.preview.claim(ctx)
	if edit && c.preview.fits(text) && c.preview.ed.Edit(ctx, in.ChatID, pid, text) == nil {
		id = pid // the preview message becomes the reply: never both
	} else {
		// A reply longer than one message goes out split, one behind a
		// message sent since its preview, or the edit failed: the reply
		// comes as a message of its own, then its preview goes.
		parts := c.parts(ctx, text)
		held, _ := parts.(*replyParts)
		if held != nil {
			held.hold = true // its last part is recorded with the delivery below
		}
		id, err = c.s.Deliver(ctx, c.reply(in, text, nil, parts))
		if err != nil && held != nil {
			held.flush(ctx) // what went out before the failure (the outbox reads it)
		}
		switch {
		case err == nil && pid != "" && held != nil:
			held.flush(ctx) // before the preview's removal (a call to the platform)
		case err == nil:
			last = held.take()
		}
		if err == nil || errors.Is(err, agent.ErrSendQueued) {
			c.preview.bury()
			if pid != "" {
				c.preview.remove(context.WithoutCancel(ctx), pid)
			}
		}
		if errors.Is(err, agent.ErrSendQueued) {
			c.sent.Store(true) // kept in the outbox, delivered later (outbox.go)
			return "", err
		} else if err != nil {
			return "", err
		}
	}
	c.sent.Store(true)
	c.replies.Add(1)
	if c.delivered != nil {
		c.delivered(context.WithoutCancel(ctx), c.turnID.Load(), id)
		return id, nil
	}
	if err := c.s.cfg.Store.RecordDelivery(context.WithoutCancel(ctx), c.inboxID, c.turnID.Load(), id, last...); err != nil {
		c.log.Error("record delivery", "err", err)
	}
	return id, nil
}

// reply is a message of the turn (a text, or a file) as the outbox keeps
// it when the platform does not take it.
func (c *Chat) reply(in channels.Inbound, text string, f *channels.OutboundFile, parts channels.Parts) Message {
	rp := Message{In: in, Text: text, File: f, Parts: parts, TurnID: c.turnID.Load(), RunID: c.runID, Log: c.log}
	if c.delivered == nil { // a reply to a stored message (not a job's, nor a paused turn's)
		rp.InboxID = c.inboxID
	}
	return rp
}

// parts is the durable record of the parts of the reply text (parts.go);
// nil for a send that answers no inbox message (a job's).
func (c *Chat) parts(ctx context.Context, text string) channels.Parts {
	if c.inboxID == 0 || c.delivered != nil {
		return nil
	}
	return c.s.partsFor(ctx, c.inboxID, c.fresh, int(c.replies.Load()), text, c.log)
}

// CanSendFiles implements agent.ChatFiles: the channel takes files.
func (c *Chat) CanSendFiles() bool {
	_, ok := c.s.cfg.Channel(c.in.Channel).(channels.FileSender)
	return ok
}

// SendFile sends an http(s) URL, or a file inside the files root (the
// workspace); anything outside it is refused. A file the platform does not
// take now is kept in the outbox like a text (by reference: a workspace
// file is read when it goes out).
func (c *Chat) SendFile(ctx context.Context, ref, caption string, photo bool) (string, error) {
	if !c.CanSendFiles() {
		return "", errors.New("this chat does not take files")
	}
	f := channels.OutboundFile{Caption: caption, Photo: photo}
	if u, err := url.Parse(ref); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		f.URL = ref
	} else {
		path, err := confined(c.s.cfg.FilesRoot, ref)
		if err != nil {
			return "", err
		}
		f.Path = path
	}
	id, err := c.s.Deliver(ctx, c.reply(c.in, caption, &f, nil))
	if err == nil || errors.Is(err, agent.ErrSendQueued) {
		c.preview.bury() // replies previewed above the file come after it
	}
	if errors.Is(err, agent.ErrSendQueued) {
		c.sent.Store(true) // kept in the outbox, delivered later (outbox.go)
		return "", err
	}
	if err != nil {
		return "", err
	}
	c.sent.Store(true)
	c.replies.Add(1)
	if c.delivered != nil {
		c.delivered(context.WithoutCancel(ctx), c.turnID.Load(), id)
	} else if err := c.s.cfg.Store.RecordDelivery(context.WithoutCancel(ctx), c.inboxID, c.turnID.Load(), id); err != nil {
		c.log.Error("record delivery", "err", err)
	}
	return id, nil
}

// confined resolves a path inside root (relative to it, or absolute),
// following symlinks; it refuses anything that ends up outside root, what
// does not exist, and directories.
func confined(root, ref string) (string, error) {
	if root == "" {
		return "", errors.New("sending local files is off: no files root is configured (tools.files.root)")
	}
	dir, err := confine.At(root)
	if err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	real, err := dir.Resolve(ref)
	switch {
	case errors.Is(err, confine.ErrOutside):
		return "", fmt.Errorf("%q is outside the workspace; only files in the workspace can be sent", ref)
	case err != nil:
		return "", fmt.Errorf("no file %q in the workspace", ref)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("no file %q in the workspace", ref)
	}
	if fi.IsDir() {
		return "", fmt.Errorf("%q is not a file", ref)
	}
	return real, nil
}

// CanReact implements agent.ChatReactions: the channel takes reactions and
// the turn answers a real message.
func (c *Chat) CanReact() bool {
	_, ok := c.s.cfg.Channel(c.in.Channel).(channels.Reactor)
	return ok && c.in.MessageID != "" && !strings.Contains(c.in.MessageID, ":")
}

// React puts an emoji on the message the turn answers.
func (c *Chat) React(ctx context.Context, emoji string) error {
	re, ok := c.s.cfg.Channel(c.in.Channel).(channels.Reactor)
	if !ok {
		return errors.New("this chat does not take reactions")
	}
	return re.React(ctx, c.in.ChatID, c.in.MessageID, emoji)
}
