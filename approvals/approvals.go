// Package approvals pauses a turn before tool calls that need the user's
// consent, asks the user (with buttons where the channel has them), and
// resumes the turn with the decision: approved, denied, superseded by a new
// message, or expired. It plugs into the router as a router.Interceptor.
package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/store"
)

// DefaultTimeout is how long a paused turn waits for the user's decision
// before its calls are dropped as expired.
const DefaultTimeout = time.Hour

// An approval's status (store.Approval.Status) once decided.
const (
	statusApproved   = "approved"
	statusDenied     = "denied"
	statusSuperseded = "superseded"
	statusExpired    = "expired"
)

// Store is the part of the store approvals need (*store.Store).
type Store interface {
	CreateApproval(ctx context.Context, a store.Approval, ttl time.Duration) (int64, error)
	PendingApproval(ctx context.Context, channel, chatKey string) (store.Approval, bool, error)
	PendingApprovals(ctx context.Context, channel, chatKey string) ([]store.Approval, error)
	DecideApproval(ctx context.Context, id int64, status, reason string) (bool, error)
	DueApprovals(ctx context.Context) ([]store.Approval, error)
	EnsureChat(ctx context.Context, channel, key, chatType, title string) (store.Chat, error)
	OpenSession(ctx context.Context, chatID int64) (store.Session, error)
}

var _ Store = (*store.Store)(nil)

// Config wires Approvals.
type Config struct {
	Store       Store
	Timeout     time.Duration // default DefaultTimeout
	TurnTimeout time.Duration // a resumed turn's bound; default router.DefaultTurnTimeout
	Logger      *slog.Logger
}

// Approvals implements router.Interceptor.
type Approvals struct {
	cfg   Config
	log   *slog.Logger
	chats router.Chats // from Start
}

var (
	_ router.Interceptor = (*Approvals)(nil)
	_ router.Pauser      = (*Approvals)(nil)
	_ router.Sweeper     = (*Approvals)(nil)
)

// New returns Approvals; the router starts it.
func New(cfg Config) *Approvals {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.TurnTimeout <= 0 {
		cfg.TurnTimeout = router.DefaultTurnTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Approvals{cfg: cfg, log: cfg.Logger.With("component", "approvals")}
}

// Start implements router.Interceptor.
func (ap *Approvals) Start(_ context.Context, chats router.Chats) { ap.chats = chats }

// resolution is a decision on a paused turn.
type resolution struct {
	approval store.Approval
	res      agent.Resolution
}

// queue resumes the paused turn with the decision, in its chat's queue.
func (ap *Approvals) queue(in channels.Inbound, rs resolution) {
	ap.chats.Queue(in, func(ctx context.Context) { ap.resume(ctx, in, rs) })
}

// Paused implements router.Pauser: it records a paused turn and asks
// the user, with buttons where the channel has them, otherwise in words.
func (ap *Approvals) Paused(ctx context.Context, in channels.Inbound, inboxID int64, res agent.Result) {
	origin, _ := json.Marshal(in)
	id, err := ap.cfg.Store.CreateApproval(ctx, store.Approval{TurnID: res.TurnID, InboxID: inboxID, Channel: in.Channel,
		ChatKey: in.ChatID, UserID: in.UserID, Calls: res.Pending, Origin: origin}, ap.cfg.Timeout)
	if err != nil {
		ap.log.Error("record approval request", "err", err)
		return
	}
	var b strings.Builder
	b.WriteString("I'd like to run:\n")
	for _, c := range res.Pending {
		fmt.Fprintf(&b, "- %s %s\n", c.Name, clip(strings.TrimSpace(c.Arguments), 300))
	}
	if qa, ok := ap.chats.Channel(in.Channel).(channels.ApprovalAsker); ok {
		ap.askDelivered(ctx, qa, in, id, res.Pending, b.String())
		return
	}
	asker, hasButtons := ap.chats.Channel(in.Channel).(channels.Asker)
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
		_, err = ap.chats.Send(ctx, in, b.String())
	}
	if err != nil {
		ap.log.Warn("could not ask for approval", "err", err)
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
	approve, ok = channels.ApprovalAnswer(in.Text)
	return approve, ok, false
}

// Intercept implements router.Interceptor: it handles a message that
// arrives while its chat has a pending approval. It reports true when the
// message was consumed (a decision, a stale button, or someone else's
// answer); otherwise the message is handled as usual, and when it is the
// asker's own, their pending calls are superseded.
//
// Only the person who asked decides, and only their own message
// supersedes their request: in a group, another member's message passes
// through without touching it, and another member's yes, no or button
// press gets a reply naming who may answer.
func (ap *Approvals) Intercept(ctx context.Context, in channels.Inbound) (bool, error) {
	button := strings.HasPrefix(in.Action, "approve:") || strings.HasPrefix(in.Action, "deny:")
	if in.Action != "" && !button {
		return false, nil // another feature's button
	}
	if _, ok := ap.chats.Channel(in.Channel).(channels.ApprovalAsker); ok {
		return ap.interceptDelivered(ctx, in, button)
	}
	list, err := ap.cfg.Store.PendingApprovals(ctx, in.Channel, in.ChatID)
	if err != nil {
		return false, fmt.Errorf("router: pending approval: %w", err)
	}
	if len(list) == 0 {
		return button, nil // a button with nothing pending: a no-op
	}
	pending, mine := list[0], false
	if button {
		_, idText, _ := strings.Cut(in.Action, ":")
		id, _ := strconv.ParseInt(idText, 10, 64)
		i := slices.IndexFunc(list, func(a store.Approval) bool { return a.ID == id })
		if i < 0 {
			return true, nil // an old button: a no-op
		}
		pending, mine = list[i], asks(list[i], in)
	} else if i := slices.IndexFunc(list, func(a store.Approval) bool { return asks(a, in) }); i >= 0 {
		pending, mine = list[i], true
	}
	approve, isDecision, stale := decision(in, pending.ID)
	switch {
	case stale:
		return true, nil
	case isDecision && !mine:
		ap.onlyAsker(ctx, in, pending)
		return true, nil
	case !mine:
		return false, nil // someone else's message: their request waits on
	case isDecision:
		status, reason := statusDenied, "the user denied it"
		if approve {
			status, reason = statusApproved, ""
		}
		if won, err := ap.cfg.Store.DecideApproval(ctx, pending.ID, status, reason); err != nil || !won {
			return true, err // decided meanwhile: a second click is a no-op
		}
		ap.queue(in, resolution{approval: pending, res: agent.Resolution{Approved: approve, Reason: reason, Continue: true}})
		return true, nil
	case in.Action != "":
		return true, nil
	}
	const why = "the user sent a new message instead of answering (superseded)"
	if won, err := ap.cfg.Store.DecideApproval(ctx, pending.ID, statusSuperseded, why); err != nil {
		return false, err
	} else if won {
		ap.queue(in, resolution{approval: pending, res: agent.Resolution{Reason: why}})
	}
	return false, nil
}

// asks reports whether in comes from the person who asked for a (anyone,
// for a request recorded without a user).
func asks(a store.Approval, in channels.Inbound) bool {
	return a.UserID == "" || a.UserID == in.UserID
}

// onlyAsker answers someone who tried to decide another person's request.
func (ap *Approvals) onlyAsker(ctx context.Context, in channels.Inbound, a store.Approval) {
	var orig channels.Inbound
	_ = json.Unmarshal(a.Origin, &orig)
	who := "the person who asked"
	switch {
	case orig.UserName != "":
		who = "@" + orig.UserName
	case orig.DisplayName != "":
		who = orig.DisplayName
	}
	if _, err := ap.chats.Send(ctx, in, "Only "+who+" can approve or deny this request."); err != nil {
		ap.log.Warn("could not answer a decision from someone else", "err", err)
	}
}

// Sweep implements router.Sweeper: it drops the calls of approvals
// nobody answered in time and tells the chat.
func (ap *Approvals) Sweep(ctx context.Context) {
	due, err := ap.cfg.Store.DueApprovals(ctx)
	if err != nil {
		ap.log.Warn("expire approvals", "err", err)
		return
	}
	const why = "nobody approved it in time (expired)"
	for _, a := range due {
		won, err := ap.cfg.Store.DecideApproval(ctx, a.ID, statusExpired, why)
		if err != nil || !won {
			continue
		}
		in := channels.Inbound{Channel: a.Channel, ChatID: a.ChatKey, UserID: a.UserID}
		var names []string
		for _, c := range a.Calls {
			names = append(names, c.Name)
		}
		if _, err := ap.chats.Send(ctx, in, "The request to run "+strings.Join(names, ", ")+" expired, so I did not run it."); err != nil {
			ap.log.Warn("could not report an expired approval", "err", err)
		}
		ap.queue(in, resolution{approval: a, res: agent.Resolution{Reason: why}})
	}
}

// resume runs a paused turn on with the user's decision.
func (ap *Approvals) resume(ctx context.Context, in channels.Inbound, rs resolution) {
	a := rs.approval
	log := ap.log.With("channel", in.Channel, "chat", in.ChatID, "approval", a.ID)
	chat, err := ap.cfg.Store.EnsureChat(ctx, in.Channel, in.ChatID, string(in.ChatType), in.ChatTitle)
	if err != nil {
		log.Error("store chat", "err", err)
		return
	}
	sess, err := ap.cfg.Store.OpenSession(ctx, chat.ID)
	if err != nil {
		log.Error("session", "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, ap.cfg.TurnTimeout)
	defer cancel()
	if rs.res.Continue {
		stop := ap.chats.Typing(ctx, in)
		defer stop()
	}
	quiet := in
	quiet.MessageID = "" // a button press is no message to reply to
	// The turn resumes as it started: the original message decides the
	// skills and context; replies go to the chat without quoting the press.
	orig := in
	if err := json.Unmarshal(a.Origin, &orig); err != nil || orig.ChatID != in.ChatID {
		orig = in
	}
	res := ap.chats.RunTurn(ctx, router.ChatTurn{In: orig, Reply: quiet, ChatID: chat.ID, SessionID: sess.ID,
		InboxID: a.InboxID, TurnID: a.TurnID, Log: log, Adjust: func(t *agent.Turn) {
			t.ResumeTurnID, t.Resolve = a.TurnID, &rs.res
		}})
	if res.StopReason == agent.StopRequiresApproval {
		ap.Paused(ctx, in, a.InboxID, res)
	}
	if res.Err != nil && !errors.Is(res.Err, context.Canceled) {
		log.Warn("resumed turn ended with an error", "stop_reason", res.StopReason, "err", res.Err)
	}
}

// clip shortens s to n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// askDelivered asks through a channel that delivers the question itself
// (channels.ApprovalAsker: the chat API), with the calls as data.
func (ap *Approvals) askDelivered(ctx context.Context, qa channels.ApprovalAsker, in channels.Inbound, id int64, calls []llm.ToolCall, text string) {
	q := channels.ApprovalQuestion{ID: id, Question: text + "\nReply yes to approve or no to deny."}
	for _, c := range calls {
		q.Calls = append(q.Calls, channels.ApprovalCall{Tool: c.Name, Arguments: c.Arguments})
	}
	if _, err := qa.AskApproval(channels.WithInbound(ctx, in), channels.Outbound{ChatID: in.ChatID, Text: q.Question}, q); err != nil {
		ap.log.Warn("could not ask for approval", "err", err)
	}
}

// interceptDelivered is Intercept for a channel that delivers questions
// itself: only its answers (Action "approve:ID" or "deny:ID", set when the
// client that got the question said yes or no) decide; any other message,
// a text "yes" included, supersedes the pending calls. An answer to a
// question no longer pending is told so, and nothing runs.
func (ap *Approvals) interceptDelivered(ctx context.Context, in channels.Inbound, button bool) (bool, error) {
	pending, found, err := ap.cfg.Store.PendingApproval(ctx, in.Channel, in.ChatID)
	if err != nil {
		return false, fmt.Errorf("router: pending approval: %w", err)
	}
	if !button {
		if found {
			ap.supersede(ctx, in, pending)
		}
		return false, nil
	}
	approve, _, stale := decision(in, pending.ID)
	won := false
	if found && !stale && (pending.UserID == "" || in.UserID == pending.UserID) {
		status, reason := statusDenied, "the user denied it"
		if approve {
			status, reason = statusApproved, ""
		}
		if won, err = ap.cfg.Store.DecideApproval(ctx, pending.ID, status, reason); err != nil {
			return true, err
		}
		if won {
			ap.queue(in, resolution{approval: pending, res: agent.Resolution{Approved: approve, Reason: reason, Continue: true}})
		}
	}
	if !won {
		if _, err := ap.chats.Send(ctx, in, "That question is no longer waiting for an answer (it was answered, replaced by a newer message, or expired), so nothing was run."); err != nil {
			ap.log.Warn("could not answer a stale approval", "err", err)
		}
	}
	return true, nil
}

// supersede drops the pending calls: a new message came instead of an
// answer.
func (ap *Approvals) supersede(ctx context.Context, in channels.Inbound, pending store.Approval) {
	const why = "the user sent a new message instead of answering (superseded)"
	if won, err := ap.cfg.Store.DecideApproval(ctx, pending.ID, statusSuperseded, why); err != nil {
		ap.log.Warn("supersede approval", "err", err)
	} else if won {
		ap.queue(in, resolution{approval: pending, res: agent.Resolution{Reason: why}})
	}
}
