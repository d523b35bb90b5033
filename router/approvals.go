package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"switchboard/agent"
	"switchboard/channels"
	"switchboard/store"
)

// DefaultApprovalTimeout is how long a paused turn waits for the user's
// decision before its calls are dropped as expired.
const DefaultApprovalTimeout = time.Hour

// approvalStore is the part of the store approvals need.
type approvalStore interface {
	CreateApproval(ctx context.Context, a store.Approval, ttl time.Duration) (int64, error)
	PendingApproval(ctx context.Context, channel, chatKey string) (store.Approval, bool, error)
	DecideApproval(ctx context.Context, id int64, status, reason string) (bool, error)
	DueApprovals(ctx context.Context) ([]store.Approval, error)
}

// resolution is a decision on a paused turn, queued on its chat.
type resolution struct {
	approval store.Approval
	res      agent.Resolution
}

// askApproval records a paused turn and asks the user: with buttons where
// the channel has them, otherwise in words.
func (r *Router) askApproval(ctx context.Context, in channels.Inbound, inboxID int64, res agent.Result) {
	as, ok := r.cfg.Store.(approvalStore)
	if !ok {
		return
	}
	origin, _ := json.Marshal(in)
	id, err := as.CreateApproval(ctx, store.Approval{TurnID: res.TurnID, InboxID: inboxID, Channel: in.Channel,
		ChatKey: in.ChatID, UserID: in.UserID, Calls: res.Pending, Origin: origin}, r.cfg.ApprovalTimeout)
	if err != nil {
		r.log.Error("record approval request", "err", err)
		return
	}
	var b strings.Builder
	b.WriteString("I'd like to run:\n")
	for _, c := range res.Pending {
		fmt.Fprintf(&b, "- %s %s\n", c.Name, clip(strings.TrimSpace(c.Arguments), 300))
	}
	r.mu.Lock()
	asker, hasButtons := r.channels[in.Channel].(channels.Asker)
	r.mu.Unlock()
	out := channels.Outbound{ChatID: in.ChatID}
	if in.ChatType == channels.Group {
		out.ReplyTo = in.MessageID
	}
	if hasButtons {
		b.WriteString("\nApprove? (or reply yes / no)")
		out.Text = b.String()
		_, err = asker.Ask(ctx, out, []channels.Button{
			{Label: "Approve", Action: "approve:" + strconv.FormatInt(id, 10)},
			{Label: "Deny", Action: "deny:" + strconv.FormatInt(id, 10)},
		})
	} else {
		b.WriteString("\nReply yes to approve or no to deny.")
		_, err = r.send(ctx, in, b.String())
	}
	if err != nil {
		r.log.Warn("could not ask for approval", "err", err)
	}
}

// decision reads an answer to a pending approval: a button press or a
// yes/no reply. ok is false for anything else.
func decision(in channels.Inbound, pendingID int64) (approve, ok bool, stale bool) {
	if in.Action != "" {
		verb, idText, _ := strings.Cut(in.Action, ":")
		id, err := strconv.ParseInt(idText, 10, 64)
		if err != nil || (verb != "approve" && verb != "deny") {
			return false, false, false
		}
		if id != pendingID {
			return false, false, true // an old button: a no-op
		}
		return verb == "approve", true, false
	}
	switch strings.ToLower(strings.Trim(strings.TrimSpace(in.Text), ".!")) {
	case "yes", "y", "approve", "ok", "okay", "go", "go ahead", "sure":
		return true, true, false
	case "no", "n", "deny", "don't", "dont", "stop", "cancel":
		return false, true, false
	}
	return false, false, false
}

// intercept handles a message that arrives while its chat has a pending
// approval. It reports true when the message was consumed (a decision, or a
// stale button); otherwise the pending calls are superseded and the message
// is handled as usual.
func (r *Router) intercept(ctx context.Context, in channels.Inbound) (bool, error) {
	as, ok := r.cfg.Store.(approvalStore)
	if !ok {
		return false, nil
	}
	button := strings.HasPrefix(in.Action, "approve:") || strings.HasPrefix(in.Action, "deny:")
	if in.Action != "" && !button {
		return false, nil // another feature's button
	}
	pending, found, err := as.PendingApproval(ctx, in.Channel, in.ChatID)
	if err != nil {
		return false, fmt.Errorf("router: pending approval: %w", err)
	}
	if !found {
		return button, nil // a button with nothing pending: a no-op
	}
	approve, isDecision, stale := decision(in, pending.ID)
	switch {
	case stale:
		return true, nil
	case isDecision && pending.UserID != "" && in.UserID != pending.UserID:
		return true, nil // only the person who asked decides
	case isDecision:
		status, reason := "denied", "the user denied it"
		if approve {
			status, reason = "approved", ""
		}
		if won, err := as.DecideApproval(ctx, pending.ID, status, reason); err != nil || !won {
			return true, err // decided meanwhile: a second click is a no-op
		}
		r.enqueue(item{in: in, resolve: &resolution{approval: pending,
			res: agent.Resolution{Approved: approve, Reason: reason, Continue: true}}})
		return true, nil
	case in.Action != "":
		return true, nil
	}
	const why = "the user sent a new message instead of answering (superseded)"
	if won, err := as.DecideApproval(ctx, pending.ID, "superseded", why); err != nil {
		return false, err
	} else if won {
		r.enqueue(item{in: in, resolve: &resolution{approval: pending, res: agent.Resolution{Reason: why}}})
	}
	return false, nil
}

// expireApprovals drops the calls of approvals nobody answered in time and
// tells the chat.
func (r *Router) expireApprovals(ctx context.Context) {
	as, ok := r.cfg.Store.(approvalStore)
	if !ok {
		return
	}
	due, err := as.DueApprovals(ctx)
	if err != nil {
		r.log.Warn("expire approvals", "err", err)
		return
	}
	const why = "nobody approved it in time (expired)"
	for _, a := range due {
		won, err := as.DecideApproval(ctx, a.ID, "expired", why)
		if err != nil || !won {
			continue
		}
		in := channels.Inbound{Channel: a.Channel, ChatID: a.ChatKey, UserID: a.UserID}
		var names []string
		for _, c := range a.Calls {
			names = append(names, c.Name)
		}
		if _, err := r.send(ctx, in, "The request to run "+strings.Join(names, ", ")+" expired, so I did not run it."); err != nil {
			r.log.Warn("could not report an expired approval", "err", err)
		}
		r.enqueue(item{in: in, resolve: &resolution{approval: a, res: agent.Resolution{Reason: why}}})
	}
}

// sweepApprovals expires approvals on every tick until ctx ends.
func (r *Router) sweepApprovals(ctx context.Context) {
	tick := r.cfg.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
			r.expireApprovals(ctx)
			r.continueDuePlans(ctx)
		}
	}
}

// resume runs a paused turn on with the user's decision.
func (r *Router) resume(ctx context.Context, it item) {
	a, in := it.resolve.approval, it.in
	log := r.log.With("channel", in.Channel, "chat", in.ChatID, "approval", a.ID)
	chat, err := r.cfg.Store.EnsureChat(ctx, in.Channel, in.ChatID, string(in.ChatType), in.ChatTitle)
	if err != nil {
		log.Error("store chat", "err", err)
		return
	}
	sess, err := r.cfg.Store.OpenSession(ctx, chat.ID)
	if err != nil {
		log.Error("session", "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.TurnTimeout)
	defer cancel()
	if it.resolve.res.Continue {
		stop := r.keepTyping(ctx, in)
		defer stop()
	}
	quiet := in
	quiet.MessageID = "" // a button press is no message to reply to
	binding := &chatBinding{r: r, in: quiet, inboxID: a.InboxID, log: log}
	binding.turnID.Store(a.TurnID)
	// The turn resumes as it started: the original message decides the
	// skills and context; replies go to the chat without quoting the press.
	orig := in
	if err := json.Unmarshal(a.Origin, &orig); err != nil || orig.ChatID != in.ChatID {
		orig = in
	}
	turn := r.turnFor(ctx, orig, chat.ID, sess.ID, a.InboxID, binding, nil, func(t *agent.Turn) {
		t.ResumeTurnID, t.Resolve = a.TurnID, &it.resolve.res
	})
	res := r.cfg.Agent.Run(ctx, turn)
	if res.StopReason == agent.StopRequiresApproval {
		r.askApproval(ctx, in, a.InboxID, res)
	}
	if res.Err != nil && !errors.Is(res.Err, context.Canceled) {
		log.Warn("resumed turn ended with an error", "stop_reason", res.StopReason, "err", res.Err)
	}
}
