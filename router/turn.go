package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/confine"
	"github.com/switchboard-gateway/switchboard/store"
)

// answered reports whether the message was answered before (a crash after
// the reply); a turn left running then is recorded as completed.
func (r *Router) answered(ctx context.Context, it item) bool {
	if it.fresh {
		return false
	}
	n, err := r.cfg.Store.Deliveries(ctx, it.inboxID)
	if err != nil {
		return false
	}
	if n == 0 && r.outbox != nil { // a reply kept in the outbox answers it too
		n, err = r.outbox.store.OutboxFor(ctx, it.inboxID)
	}
	if err != nil || n == 0 {
		return false
	}
	if t, ok, _ := r.cfg.Store.TurnForInbox(ctx, it.inboxID); ok && t.Status == store.TurnRunning {
		_ = r.cfg.Store.FinishTurn(context.WithoutCancel(ctx), t.ID, store.TurnEnd{StopReason: string(agent.StopEndTurn),
			Status: store.TurnCompleted, Steps: t.Steps, Error: "interrupted after the reply was delivered"})
	}
	return true
}

// turnForInbox is the turn begun for the message, if any.
func (r *Router) turnForInbox(ctx context.Context, it item) (store.Turn, bool, error) {
	if it.fresh {
		return store.Turn{}, false, nil
	}
	return r.cfg.Store.TurnForInbox(ctx, it.inboxID)
}

// process handles one queued message: a queued command, or an agent turn.
// It returns the store's error when the store failed the message, or a
// *modelOutage when the model was unavailable; the message then stays
// pending (see afterProcess).
func (r *Router) process(ctx context.Context, it item) error {
	in := it.in
	log := r.log.With("channel", in.Channel, "chat", in.ChatID, "inbox_id", it.inboxID)
	finish := func(status string) {
		if err := r.cfg.Store.FinishInbox(context.WithoutCancel(ctx), it.inboxID, status); err != nil {
			log.Error("finish message", "err", err)
		}
	}
	chat, err := r.cfg.Store.EnsureChat(ctx, in.Channel, in.ChatID, string(in.ChatType), in.ChatTitle)
	if err != nil {
		return fmt.Errorf("router: store chat: %w", err)
	}
	// After a restart: a message already answered is done (a command's
	// confirmation counts too); a turn already begun is resumed rather than
	// started again. A message stored a moment ago has neither.
	if r.answered(ctx, it) {
		finish(store.InboxDone)
		return nil
	}
	pctx, pin := ctx, in // as the message arrived
	prepare := sync.OnceValue(func() Prepared { return r.prepare(pctx, pin) })
	if r.take(ctx, in, prepare) { // an interceptor handled it (a plan)
		finish(store.InboxDone)
		return nil
	}
	prep := prepare()
	if name, _, ok := command(in.Text); ok && name == "new" {
		reply := "Started a new conversation. The previous one stays stored."
		if _, err := r.cfg.Store.NewSession(ctx, chat.ID); err != nil {
			log.Error("new session", "err", err)
			reply = "Sorry, I couldn't start a new conversation."
		}
		// Kept in the outbox when the platform does not take it: its late
		// delivery is recorded then.
		if id, err := r.deliverReply(ctx, outgoing{in: in, text: reply, inboxID: it.inboxID, log: log}); err == nil {
			_ = r.cfg.Store.RecordDelivery(context.WithoutCancel(ctx), it.inboxID, 0, id)
		} else if !errors.Is(err, agent.ErrSendQueued) {
			log.Warn("command reply failed", "command", name, "err", err)
		}
		finish(store.InboxDone)
		return nil
	}
	var resume int64
	if t, ok, err := r.turnForInbox(ctx, it); err == nil && ok {
		if t.Status != store.TurnRunning {
			finish(store.InboxDone)
			return nil
		}
		resume = t.ID
	}
	sess, err := r.cfg.Store.OpenSession(ctx, chat.ID)
	if err != nil {
		return fmt.Errorf("router: session: %w", err)
	}

	ctx, cancel := context.WithTimeout(ctx, r.cfg.TurnTimeout)
	defer cancel()
	stopTyping := r.Typing(ctx, in)
	defer stopTyping()

	in = r.transcribe(ctx, in)
	binding := &chatBinding{r: r, in: in, inboxID: it.inboxID, fresh: it.fresh, log: log}
	turn := r.turnFor(ctx, in, chat.ID, sess.ID, it.inboxID, binding, &prep, func(t *agent.Turn) {
		t.ResumeTurnID = resume
		t.HoldOnOutage = !r.inProcess(in.Channel) // a waiting requester is told at once
	})
	res := r.cfg.Agent.Run(r.modelLine(ctx, it), turn)
	if res.StopReason == agent.StopRequiresApproval {
		for _, ic := range r.cfg.Interceptors {
			if p, ok := ic.(Pauser); ok {
				p.Paused(ctx, in, it.inboxID, res)
			}
		}
	}
	switch {
	case res.StopReason == agent.StopStoreError:
		return res.Err
	case res.StopReason == agent.StopModelUnavailable:
		return &modelOutage{turnID: res.TurnID, steps: res.Steps, err: res.Err}
	case res.StopReason == agent.StopCancelled && r.base.Err() != nil:
		// Shutdown: the message stays pending and the turn resumes later.
		return nil
	}
	if !res.InboxDone { // done with the turn's end, as a rule
		finish(store.InboxDone)
	}
	return nil
}

// transcribe fills in the text of voice messages, or says why it could not.
func (r *Router) transcribe(ctx context.Context, in channels.Inbound) channels.Inbound {
	if r.cfg.Transcribe == nil {
		return in
	}
	atts := slices.Clone(in.Attachments)
	for i, a := range atts {
		if a.Kind != channels.Audio || a.Text != "" || len(a.Data) == 0 {
			continue
		}
		text, err := r.cfg.Transcribe(ctx, a.Name, a.Data)
		if err != nil {
			r.log.Warn("voice transcription failed", "channel", in.Channel, "err", err)
			atts[i].Note = strings.TrimSpace(a.Note + " (transcription failed, so its content is unknown)")
			continue
		}
		atts[i].Text = text
	}
	in.Attachments = atts
	return in
}

// apply sets what p adds on turn.
func (p Prepared) apply(turn *agent.Turn) {
	turn.Sources, turn.Sections, turn.MaxSteps, turn.Catalogue, turn.Skills = p.Sources, p.Sections, p.MaxSteps, p.Catalogue, p.Skills
}

// prepare asks the Prepare hook what a turn for in adds.
func (r *Router) prepare(ctx context.Context, in channels.Inbound) Prepared {
	if r.cfg.Prepare == nil {
		return Prepared{}
	}
	return r.cfg.Prepare(ctx, in)
}

// turnFor builds the agent turn for a message in a chat: the user message,
// the chat binding, events to the channel and observers, and what Prepare
// adds (prep, or computed when nil). mod adjusts it (resume, resolution).
func (r *Router) turnFor(ctx context.Context, in channels.Inbound, chatID, sessionID, inboxID int64, binding *chatBinding, prep *Prepared, mod func(*agent.Turn)) agent.Turn {
	if binding.preview == nil {
		name := binding.in.Channel
		binding.preview = newPreviewer(r.cfg.Preview[name], r.cfg.ToolProgress[name], r.Channel(name), binding.in,
			func(ctx context.Context, in channels.Inbound, text string) (string, error) {
				if binding.sent.Load() {
					in.ChatType = channels.DM // reply-to only on the first message
				}
				return r.Send(ctx, in, text)
			})
		if binding.preview != nil {
			binding.preview.clean = r.cfg.Redact
		}
	}
	turn := agent.Turn{
		ChatID: chatID, SessionID: sessionID, InboxID: inboxID, InboxKeep: keptOf(in),
		Channel: in.Channel, ChatType: string(in.ChatType), ChatTitle: in.ChatTitle, ChatKey: in.ChatID,
		UserID: in.UserID, UserName: in.UserName, DisplayName: in.DisplayName,
		Input: toMessage(in, r.cfg.Vision), Chat: binding, Location: r.cfg.Location, Approvals: true,
		OnEvent: r.turnEvents(ctx, in, binding),
	}
	if prep == nil {
		p := r.prepare(ctx, in)
		prep = &p
	}
	prep.apply(&turn)
	if mod != nil {
		mod(&turn)
	}
	return turn
}

// turnEvents is a turn's event handler: it remembers the turn id for
// delivery records and passes events to the streaming preview, OnEvent and
// the channel, if it watches its turns (channels.TurnWatcher).
func (r *Router) turnEvents(ctx context.Context, in channels.Inbound, b *chatBinding) func(agent.Event) {
	watcher, _ := r.Channel(in.Channel).(channels.TurnWatcher)
	return func(ev agent.Event) {
		if ev.Kind == agent.EventTurnStart {
			b.turnID.Store(ev.TurnID)
		}
		if b.preview != nil {
			b.preview.event(ctx, ev)
		}
		if r.cfg.OnEvent != nil {
			r.cfg.OnEvent(in, ev)
		}
		if watcher != nil {
			watcher.TurnEvent(in, ev)
		}
	}
}

// chatBinding is a turn's view of its chat: sends go to the channel, and a
// confirmed send is recorded so that a restart never answers twice.
type chatBinding struct {
	r       *Router
	in      channels.Inbound
	inboxID int64
	turnID  atomic.Int64
	log     *slog.Logger
	sent    atomic.Bool
	preview *previewer // streaming preview and tool progress, when on
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

// Send implements agent.Chat. In groups the first reply quotes the message
// it answers.
func (b *chatBinding) Send(ctx context.Context, text string) (string, error) {
	text = b.r.outText(text) // before the preview's edit and the parts' key
	in := b.in
	if b.sent.Load() {
		in.ChatType = channels.DM // reply-to only on the first message
	}
	var id string
	var err error
	ctx = channels.WithPriority(ctx, channels.PriorityReply)
	pid, edit := b.preview.claim(ctx)
	if edit && b.preview.fits(text) && b.preview.ed.Edit(ctx, in.ChatID, pid, text) == nil {
		id = pid // the preview message becomes the reply: never both
	} else {
		// A reply longer than one message goes out split, one behind a
		// message sent since its preview, or the edit failed: the reply
		// comes as a message of its own, then its preview goes.
		id, err = b.r.deliverReply(ctx, b.reply(in, text, nil, b.parts(ctx, text)))
		if err == nil || errors.Is(err, agent.ErrSendQueued) {
			b.preview.bury()
			if pid != "" {
				b.preview.remove(context.WithoutCancel(ctx), pid)
			}
		}
		if errors.Is(err, agent.ErrSendQueued) {
			b.sent.Store(true) // kept in the outbox, delivered later (outbox.go)
			return "", err
		} else if err != nil {
			return "", err
		}
	}
	b.sent.Store(true)
	b.replies.Add(1)
	if b.delivered != nil {
		b.delivered(context.WithoutCancel(ctx), b.turnID.Load(), id)
		return id, nil
	}
	if err := b.r.cfg.Store.RecordDelivery(context.WithoutCancel(ctx), b.inboxID, b.turnID.Load(), id); err != nil {
		b.log.Error("record delivery", "err", err)
	}
	return id, nil
}

// reply is a message of the turn (a text, or a file) as the outbox keeps
// it when the platform does not take it.
func (b *chatBinding) reply(in channels.Inbound, text string, f *channels.OutboundFile, parts channels.Parts) outgoing {
	rp := outgoing{in: in, text: text, file: f, parts: parts, turnID: b.turnID.Load(), runID: b.runID, log: b.log}
	if b.delivered == nil { // a reply to a stored message (not a job's, nor a paused turn's)
		rp.inboxID = b.inboxID
	}
	return rp
}

// parts is the durable record of the parts of the reply text (parts.go);
// nil for a send that answers no inbox message (a job's).
func (b *chatBinding) parts(ctx context.Context, text string) channels.Parts {
	if b.inboxID == 0 || b.delivered != nil {
		return nil
	}
	return b.r.partsFor(ctx, b.inboxID, b.fresh, int(b.replies.Load()), text, b.log)
}

// CanSendFiles implements agent.ChatFiles: the channel takes files.
func (b *chatBinding) CanSendFiles() bool {
	b.r.mu.Lock()
	defer b.r.mu.Unlock()
	_, ok := b.r.channels[b.in.Channel].(channels.FileSender)
	return ok
}

// SendFile sends an http(s) URL, or a file inside the files root (the
// workspace); anything outside it is refused. A file the platform does not
// take now is kept in the outbox like a text (by reference: a workspace
// file is read when it goes out).
func (b *chatBinding) SendFile(ctx context.Context, ref, caption string, photo bool) (string, error) {
	b.r.mu.Lock()
	_, ok := b.r.channels[b.in.Channel].(channels.FileSender)
	b.r.mu.Unlock()
	if !ok {
		return "", errors.New("this chat does not take files")
	}
	f := channels.OutboundFile{Caption: caption, Photo: photo}
	if u, err := url.Parse(ref); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		f.URL = ref
	} else {
		path, err := confined(b.r.cfg.FilesRoot, ref)
		if err != nil {
			return "", err
		}
		f.Path = path
	}
	id, err := b.r.deliverReply(ctx, b.reply(b.in, caption, &f, nil))
	if err == nil || errors.Is(err, agent.ErrSendQueued) {
		b.preview.bury() // replies previewed above the file come after it
	}
	if errors.Is(err, agent.ErrSendQueued) {
		b.sent.Store(true) // kept in the outbox, delivered later (outbox.go)
		return "", err
	}
	if err != nil {
		return "", err
	}
	b.sent.Store(true)
	b.replies.Add(1)
	if b.delivered != nil {
		b.delivered(context.WithoutCancel(ctx), b.turnID.Load(), id)
	} else if err := b.r.cfg.Store.RecordDelivery(context.WithoutCancel(ctx), b.inboxID, b.turnID.Load(), id); err != nil {
		b.log.Error("record delivery", "err", err)
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
func (b *chatBinding) CanReact() bool {
	b.r.mu.Lock()
	defer b.r.mu.Unlock()
	_, ok := b.r.channels[b.in.Channel].(channels.Reactor)
	return ok && b.in.MessageID != "" && !strings.Contains(b.in.MessageID, ":")
}

// React puts an emoji on the message the turn answers.
func (b *chatBinding) React(ctx context.Context, emoji string) error {
	b.r.mu.Lock()
	re, ok := b.r.channels[b.in.Channel].(channels.Reactor)
	b.r.mu.Unlock()
	if !ok {
		return errors.New("this chat does not take reactions")
	}
	return re.React(ctx, b.in.ChatID, b.in.MessageID, emoji)
}
