package router

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/reply"
	"github.com/switchboard-gateway/switchboard/store"
)

// helpText answers /help and /start.
const helpText = `Hi! Just write to me and I'll answer. Commands:
/new — start a new conversation (the old one stays stored)
/stop — stop what I'm doing (queued messages and background tasks too)
/plan <task> — work through a task step by step, checking with you
/tasks — background tasks I'm working on
/status — what I'm doing, and this conversation's numbers
/help — this message`

// noTasks answers /tasks when no chat has background work.
const noTasks = "No background tasks are running."

// command splits "/cmd@bot args" into "cmd" and args; ok is false for text.
func command(text string) (name, args string, ok bool) {
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, "/") || len(text) < 2 {
		return "", "", false
	}
	first, rest, _ := strings.Cut(text, " ")
	first = strings.TrimPrefix(first, "/")
	first, _, _ = strings.Cut(first, "@")
	return strings.ToLower(first), strings.TrimSpace(rest), true
}

// immediate answers commands that must not wait behind a running turn
// (/stop, /status, /help). It reports whether it handled the message.
func (r *Router) immediate(ctx context.Context, inboxID int64, in channels.Inbound) bool {
	name, args, ok := command(in.Text)
	if !ok {
		return false
	}
	var text string
	switch name {
	case "stop":
		text = r.stop(ctx, in)
	case "status":
		text = r.status(ctx, in)
	case "usage":
		text = r.usageReport(ctx, in, args)
	case "tasks":
		text = noTasks
		if r.cfg.Tasks != nil {
			text = r.cfg.Tasks.Describe(in.Channel, in.ChatID)
		}
	case "help", "start":
		text = helpText
		if r.cfg.Learning != nil {
			text += learningHelp
		}
	case "memory", "profile":
		if text, ok = learningCommand(ctx, r.cfg.Learning, name, args, in); !ok {
			return false
		}
	default:
		return false // /new and unknown commands go through the queue
	}
	// Kept in the outbox when the platform does not take it.
	rp := reply.Message{In: in, Text: text, InboxID: inboxID, Log: r.log.With("channel", in.Channel, "chat", in.ChatID, "inbox_id", inboxID)}
	if _, err := r.replies.Deliver(ctx, rp); err != nil && !errors.Is(err, agent.ErrSendQueued) {
		r.log.Warn("command reply failed", "command", name, "err", err)
	}
	if err := r.cfg.Store.FinishInbox(context.WithoutCancel(ctx), inboxID, store.InboxDone); err != nil {
		r.log.Error("finish command message", "err", err)
	}
	return true
}

// stop cancels the chat's running turn and drops its queued messages.
func (r *Router) stop(ctx context.Context, in channels.Inbound) string {
	r.mu.Lock()
	q := r.queues[chatKey(in.Channel, in.ChatID)]
	var dropped []item
	running := false
	if q != nil {
		dropped = q.items
		q.items = nil
		if q.cancel != nil {
			q.cancel()
			running = true
		}
	}
	r.mu.Unlock()
	if r.cfg.Tasks != nil && r.cfg.Tasks.Cancel(in.Channel, in.ChatID) > 0 {
		running = true
	}
	for _, it := range abandonJobs(dropped, ErrJobStopped) {
		_ = r.cfg.Store.FinishInbox(context.WithoutCancel(ctx), it.inboxID, store.InboxSkipped)
		r.own.dropped(it)
	}
	for _, ic := range r.cfg.Interceptors {
		if sp, ok := ic.(Stopper); ok {
			if reply, stopped := sp.Stop(ctx, in); stopped {
				return reply
			}
		}
	}
	switch {
	case running && len(dropped) > 0:
		return fmt.Sprintf("Stopped. I also dropped %d queued message(s).", len(dropped))
	case running:
		return "Stopped."
	case len(dropped) > 0:
		return fmt.Sprintf("Dropped %d queued message(s).", len(dropped))
	}
	return "Nothing to stop."
}

// plural is "1 step", "2 steps".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// statusTime is how /status shows a time.
const statusTime = "2006-01-02 15:04 UTC"

func (r *Router) status(ctx context.Context, in channels.Inbound) string {
	r.mu.Lock()
	q := r.queues[chatKey(in.Channel, in.ChatID)]
	busy, queued := false, 0
	if q != nil {
		busy, queued = q.current != nil, len(q.items)
	}
	r.mu.Unlock()
	down := ""
	if r.cfg.ModelWait.Down != nil {
		down = r.cfg.ModelWait.Down()
	}
	var b strings.Builder
	switch {
	case busy:
		b.WriteString("Working on a message")
	case down != "":
		b.WriteString("The model server is not answering, so I cannot answer now")
	default:
		b.WriteString("Idle")
	}
	if queued > 0 {
		fmt.Fprintf(&b, ", %d queued", queued)
	}
	b.WriteString(".\n")
	if r.cfg.ModelName != "" {
		fmt.Fprintf(&b, "Model: %s\n", r.cfg.ModelName)
	}
	if down != "" {
		fmt.Fprintf(&b, "Model server: %s\n", down)
	}
	chat, err := r.cfg.Store.EnsureChat(ctx, in.Channel, in.ChatID, string(in.ChatType), in.ChatTitle)
	if err != nil {
		return b.String() + "(history unavailable)"
	}
	sess, err := r.cfg.Store.CurrentSession(ctx, chat.ID)
	if err == nil {
		fmt.Fprintf(&b, "Conversation #%d: %d messages since %s\n", sess.ID, sess.Messages, sess.StartedAt.UTC().Format(statusTime))
		b.WriteString(r.sessionUsageLine(ctx, sess.ID))
	}
	// The last turn of this conversation (not of one /new ended).
	if turns, terr := r.cfg.Store.Turns(ctx, chat.ID, 1); terr == nil && len(turns) > 0 && (err != nil || turns[0].SessionID == sess.ID) {
		t := turns[0]
		if t.Kind == "job" && t.Steps == 0 {
			fmt.Fprintf(&b, "Last turn: a scheduled reminder, sent %s (no model call)\n", t.StartedAt.UTC().Format(statusTime))
		} else {
			fmt.Fprintf(&b, "Last turn: %s (%s), %s, %s\n", t.Status, t.StopReason, plural(t.Steps, "step"), plural(t.Usage.TotalTokens, "token"))
		}
		if t.RequestTokens > 0 {
			fmt.Fprintf(&b, "Last request: about %d tokens, %.1f KB\n", t.RequestTokens, float64(t.RequestBytes)/1000)
		}
	}
	if err == nil {
		if c, err := r.cfg.Store.SummaryCoverage(ctx, sess.ID); err == nil && c.Folds > 0 {
			fmt.Fprintf(&b, "Summarised: %d messages (%d turns) up to %s, in %d folds\n", c.Messages, c.Turns, c.Until.Format(statusTime), c.Folds)
		}
	}
	if r.cfg.Hooks.StatusNotes != nil && r.gate.admin(in) { // operator matters, for operators only
		for _, n := range r.cfg.Hooks.StatusNotes() {
			b.WriteString(n + "\n")
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
