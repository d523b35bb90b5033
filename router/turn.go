package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/reply"
	"github.com/switchboard-gateway/switchboard/store"
)

// answered reports whether the message was answered before (a crash after
// the reply); a turn left running then is recorded as completed.
func (r *Router) answered(ctx context.Context, it item) bool {
	if it.fresh {
		return false
	}
	if !r.replies.Answered(ctx, it.inboxID) { // a reply kept in the outbox answers it too
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
	prepare := sync.OnceValue(func() Prepared { return r.prepare(pctx, pin, chat.ID) })
	if r.take(ctx, in, prepare) { // an interceptor handled it (a plan)
		finish(store.InboxDone)
		return nil
	}
	prep := prepare()
	if name, _, ok := command(in.Text); ok && name == "new" {
		text := "Started a new conversation. The previous one stays stored."
		if _, err := r.cfg.Store.NewSession(ctx, chat.ID); err != nil {
			log.Error("new session", "err", err)
			text = "Sorry, I couldn't start a new conversation."
		}
		// Kept in the outbox when the platform does not take it: its late
		// delivery is recorded then.
		if id, err := r.replies.Deliver(ctx, reply.Message{In: in, Text: text, InboxID: it.inboxID, Log: log}); err == nil {
			_ = r.cfg.Store.RecordDelivery(context.WithoutCancel(ctx), it.inboxID, 0, id)
		} else if !errors.Is(err, agent.ErrSendQueued) {
			log.Warn("command reply failed", "command", name, "err", err)
		}
		finish(store.InboxDone)
		return nil
	}
	var resume store.Turn // read once: a model outage's wait starts from it (heldSince)
	if t, ok, err := r.turnForInbox(ctx, it); err == nil && ok {
		if t.Status != store.TurnRunning {
			finish(store.InboxDone)
			return nil
		}
		resume = t
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
	binding := r.replies.Bind(reply.Binding{In: in, InboxID: it.inboxID, Fresh: it.fresh, Live: true, Log: log})
	turn := r.turnFor(ctx, in, chat.ID, sess.ID, it.inboxID, binding, &prep, func(t *agent.Turn) {
		t.ResumeTurnID = resume.ID
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
		return &modelOutage{turnID: res.TurnID, steps: res.Steps, err: res.Err, resumed: resume}
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

// prepare asks the Prepare hook what a turn for in, in its stored chat,
// adds.
func (r *Router) prepare(ctx context.Context, in channels.Inbound, chatID int64) Prepared {
	if r.cfg.Hooks.Prepare == nil {
		return Prepared{}
	}
	return r.cfg.Hooks.Prepare(ctx, in, chatID)
}

// turnFor builds the agent turn for a message in a chat: the user message,
// the chat binding, events to the channel and observers, and what Prepare
// adds (prep, or computed when nil). mod adjusts it (resume, resolution).
func (r *Router) turnFor(ctx context.Context, in channels.Inbound, chatID, sessionID, inboxID int64, binding *reply.Chat, prep *Prepared, mod func(*agent.Turn)) agent.Turn {
	turn := agent.Turn{
		ChatID: chatID, SessionID: sessionID, InboxID: inboxID, InboxKeep: keptOf(in),
		Channel: in.Channel, ChatType: string(in.ChatType), ChatTitle: in.ChatTitle, ChatKey: in.ChatID,
		UserID: in.UserID, UserName: in.UserName, DisplayName: in.DisplayName,
		Input: toMessage(in, r.cfg.Vision), Chat: binding, Location: r.cfg.Location, Approvals: true,
		OnEvent: r.turnEvents(ctx, in, binding),
	}
	if prep == nil {
		p := r.prepare(ctx, in, chatID)
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
func (r *Router) turnEvents(ctx context.Context, in channels.Inbound, b *reply.Chat) func(agent.Event) {
	watcher, _ := r.Channel(in.Channel).(channels.TurnWatcher)
	return func(ev agent.Event) {
		b.Event(ctx, ev)
		if r.cfg.Hooks.OnEvent != nil {
			r.cfg.Hooks.OnEvent(in, ev)
		}
		if watcher != nil {
			watcher.TurnEvent(in, ev)
		}
	}
}

// bindChatTurn binds a collaborator's turn (RunTurn) to its chat.
func (r *Router) bindChatTurn(t ChatTurn, log *slog.Logger) *reply.Chat {
	b := reply.Binding{In: t.Reply, InboxID: t.InboxID, TurnID: t.TurnID, Live: true, Log: log}
	if t.Unrecorded {
		b.Delivered = func(context.Context, int64, string) {}
	}
	return r.replies.Bind(b)
}
