// Package plans runs a task as a plan: the model breaks it into steps
// (/plan TASK, or a skill with mode: plan), each step runs as its own turn
// over the chat's shared history, and after each the user says how to go on
// (continue, retry with a suggestion, skip, stop); without an answer the
// plan continues after a while. It plugs into the router as a
// router.Interceptor.
package plans

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/store"
)

// Defaults.
const (
	// DefaultStepMaxSteps caps each plan step's own loop: a step is a
	// focused piece of work, not a whole task.
	DefaultStepMaxSteps = 10
	// DefaultFeedbackTimeout: without an answer the plan continues.
	DefaultFeedbackTimeout = 10 * time.Minute
)

// A plan's status (store.Plan.Status) and its steps' (store.PlanStep.Status).
const (
	statusRunning = "running"
	statusWaiting = "waiting"
	statusDone    = "done"
	statusStopped = "stopped"

	stepDone    = "done"
	stepCapped  = "capped"
	stepFailed  = "failed"
	stepSkipped = "skipped"
	stepStopped = "stopped"
)

// Planner breaks a task into steps (agent.Agent implements it).
type Planner interface {
	MakePlan(ctx context.Context, task, context string) ([]agent.PlanStep, llm.Usage, error)
}

// Store is the part of the store plans need (*store.Store).
type Store interface {
	CreatePlan(ctx context.Context, p store.Plan) (int64, error)
	OpenPlan(ctx context.Context, channel, chatKey string) (store.Plan, bool, error)
	GetPlan(ctx context.Context, id int64) (store.Plan, error)
	UpdatePlan(ctx context.Context, p store.Plan) error
	ClaimPlan(ctx context.Context, id int64) (bool, error)
	DuePlans(ctx context.Context) ([]store.Plan, error)
	EnsureChat(ctx context.Context, channel, key, chatType, title string) (store.Chat, error)
	OpenSession(ctx context.Context, chatID int64) (store.Session, error)
}

var _ Store = (*store.Store)(nil)

// Config wires Plans.
type Config struct {
	Store Store
	// Planner makes plans; nil: plans are not available.
	Planner         Planner
	StepMaxSteps    int           // default DefaultStepMaxSteps
	FeedbackTimeout time.Duration // default DefaultFeedbackTimeout
	TurnTimeout     time.Duration // a step's bound; default router.DefaultTurnTimeout
	Logger          *slog.Logger
}

// Plans implements router.Interceptor.
type Plans struct {
	cfg   Config
	log   *slog.Logger
	chats router.Chats // from Start
}

var (
	_ router.Interceptor = (*Plans)(nil)
	_ router.Taker       = (*Plans)(nil)
	_ router.Stopper     = (*Plans)(nil)
	_ router.Sweeper     = (*Plans)(nil)
)

// New returns Plans; the router starts it.
func New(cfg Config) *Plans {
	if cfg.StepMaxSteps <= 0 {
		cfg.StepMaxSteps = DefaultStepMaxSteps
	}
	if cfg.FeedbackTimeout <= 0 {
		cfg.FeedbackTimeout = DefaultFeedbackTimeout
	}
	if cfg.TurnTimeout <= 0 {
		cfg.TurnTimeout = router.DefaultTurnTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Plans{cfg: cfg, log: cfg.Logger.With("component", "plans")}
}

// Start implements router.Interceptor.
func (pl *Plans) Start(_ context.Context, chats router.Chats) { pl.chats = chats }

// move is the user's answer after a plan step.
type move struct {
	planID     int64
	verb       string // continue, retry, skip, stop
	suggestion string // with retry: what to do differently
}

// queue applies the move in the chat's queue.
func (pl *Plans) queue(in channels.Inbound, mv move) {
	pl.chats.Queue(in, func(ctx context.Context) { pl.move(ctx, in, mv) })
}

// answer reads an answer to a waiting plan: a button or words. Any other
// text is a suggestion: the step is redone with it.
func answer(in channels.Inbound, planID int64) (move, bool) {
	if in.Action != "" {
		parts := strings.Split(in.Action, ":")
		if len(parts) != 3 || parts[0] != "plan" || parts[1] != strconv.FormatInt(planID, 10) {
			return move{}, false
		}
		return move{planID: planID, verb: parts[2]}, true
	}
	text := strings.TrimSpace(in.Text)
	switch strings.ToLower(strings.Trim(text, ".!")) {
	case "", "continue", "next", "go on", "ok", "okay", "yes", "go":
		return move{planID: planID, verb: "continue"}, true
	case "retry", "again", "redo":
		return move{planID: planID, verb: "retry"}, true
	case "skip":
		return move{planID: planID, verb: "skip"}, true
	case "stop", "cancel", "abort":
		return move{planID: planID, verb: "stop"}, true
	}
	return move{planID: planID, verb: "retry", suggestion: text}, true
}

// Intercept implements router.Interceptor: it consumes an answer to the
// chat's waiting plan.
func (pl *Plans) Intercept(ctx context.Context, in channels.Inbound) (bool, error) {
	button := strings.HasPrefix(in.Action, "plan:")
	p, found, err := pl.cfg.Store.OpenPlan(ctx, in.Channel, in.ChatID)
	if err != nil || !found || p.Status != statusWaiting {
		return button, err // a button of a finished plan: a no-op
	}
	if p.UserID != "" && in.UserID != p.UserID {
		return button, nil
	}
	mv, ok := answer(in, p.ID)
	if !ok {
		return in.Action != "", nil
	}
	if won, err := pl.cfg.Store.ClaimPlan(ctx, p.ID); err != nil || !won {
		return true, err // answered meanwhile: a no-op
	}
	pl.queue(in, mv)
	return true, nil
}

// Take implements router.Taker: /plan TASK, or a message a skill
// runs as a plan (router.Prepared.Plan), starts a plan.
func (pl *Plans) Take(ctx context.Context, in channels.Inbound, prepare func() router.Prepared) bool {
	if name, args, ok := command(in.Text); ok && name == "plan" {
		pl.start(ctx, in, args)
		return true
	}
	if prepare().Plan {
		pl.start(ctx, in, in.Text)
		return true
	}
	return false
}

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

// planFailed is what the user reads when no plan could be made; why is the
// operator's to read in the log.
const planFailed = "Sorry, I couldn't make a plan for that. Please try again in a moment, or put the task differently."

// start makes a plan for a task and runs its first step.
func (pl *Plans) start(ctx context.Context, in channels.Inbound, task string) {
	if pl.cfg.Planner == nil {
		_, _ = pl.chats.Send(ctx, in, "Plans are not available here.")
		return
	}
	if strings.TrimSpace(task) == "" {
		_, _ = pl.chats.Send(ctx, in, "Usage: /plan <task>, for example /plan compare three laptops under 1000 EUR")
		return
	}
	stop := pl.chats.Typing(ctx, in)
	steps, _, err := pl.cfg.Planner.MakePlan(ctx, task, "")
	stop()
	if err != nil {
		pl.log.Warn("plan failed", "err", err)
		_, _ = pl.chats.Send(ctx, in, planFailed) // the error is in the log
		return
	}
	origin, _ := json.Marshal(in)
	p := store.Plan{Channel: in.Channel, ChatKey: in.ChatID, UserID: in.UserID, Task: task, Status: statusRunning, Origin: origin}
	for _, s := range steps {
		p.Steps = append(p.Steps, store.PlanStep{Title: s.Title, Instructions: s.Instructions})
	}
	if p.ID, err = pl.cfg.Store.CreatePlan(ctx, p); err != nil {
		pl.log.Error("store plan", "err", err)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Plan for: %s\n", task)
	for i, s := range p.Steps {
		fmt.Fprintf(&b, "%d. %s\n", i+1, s.Title)
	}
	b.WriteString("I'll run the steps one by one and check with you after each.")
	_, _ = pl.chats.Send(ctx, in, b.String())
	pl.runStep(ctx, in, p, "")
}

// move applies the user's answer after a step.
func (pl *Plans) move(ctx context.Context, in channels.Inbound, mv move) {
	p, err := pl.cfg.Store.GetPlan(ctx, mv.planID)
	if err != nil {
		pl.log.Error("load plan", "err", err)
		return
	}
	cur := &p.Steps[p.Current]
	switch mv.verb {
	case "retry":
		pl.runStep(ctx, in, p, mv.suggestion)
		return
	case "stop":
		pl.finish(ctx, in, p, statusStopped)
		return
	case "skip":
		if cur.Status != stepDone {
			cur.Status = stepSkipped
		}
	}
	p.Current++
	if p.Current >= len(p.Steps) {
		p.Current = len(p.Steps) - 1
		pl.finish(ctx, in, p, statusDone)
		return
	}
	pl.runStep(ctx, in, p, "")
}

// runStep runs the current step as its own loop with its own step cap over
// the chat's shared history, then asks the user how to go on.
func (pl *Plans) runStep(ctx context.Context, in channels.Inbound, p store.Plan, suggestion string) {
	log := pl.log.With("channel", in.Channel, "chat", in.ChatID, "plan", p.ID)
	orig := in
	if err := json.Unmarshal(p.Origin, &orig); err != nil {
		orig = in
	}
	chat, err := pl.cfg.Store.EnsureChat(ctx, orig.Channel, orig.ChatID, string(orig.ChatType), orig.ChatTitle)
	if err != nil {
		log.Error("store chat", "err", err)
		return
	}
	sess, err := pl.cfg.Store.OpenSession(ctx, chat.ID)
	if err != nil {
		log.Error("session", "err", err)
		return
	}
	step := &p.Steps[p.Current]
	step.Tries++
	p.Status, p.WaitUntil = statusRunning, nil
	if err := pl.cfg.Store.UpdatePlan(ctx, p); err != nil {
		log.Error("update plan", "err", err)
		return
	}
	var input strings.Builder
	fmt.Fprintf(&input, "[plan step %d of %d: %s]\nOverall task: %s\n\n%s", p.Current+1, len(p.Steps), step.Title, p.Task, step.Instructions)
	if suggestion != "" {
		fmt.Fprintf(&input, "\n\nThe user asked to redo this step with this suggestion: %s", suggestion)
	}
	input.WriteString("\n\nDo only this step, then reply with its result.")

	tctx, cancel := context.WithTimeout(ctx, pl.cfg.TurnTimeout)
	defer cancel()
	stop := pl.chats.Typing(tctx, orig)
	quiet := orig
	quiet.MessageID = ""
	res := pl.chats.RunTurn(tctx, router.ChatTurn{In: orig, Reply: quiet, ChatID: chat.ID, SessionID: sess.ID,
		Unrecorded: true, Log: log, Adjust: func(t *agent.Turn) {
			t.Kind, t.MaxSteps, t.InboxID = "plan", pl.cfg.StepMaxSteps, 0
			// A step cannot pause for approval (nobody resumes it): tools
			// that need one refuse, and after untrusted content tools that
			// act are withdrawn (agent.Tool.Acts).
			t.Approvals = false
			t.Input = llm.Message{Role: llm.RoleUser, Content: input.String()}
		}})
	stop()
	step.Result = clip(res.Reply, 300)
	switch res.StopReason {
	case agent.StopEndTurn, agent.StopToolRule:
		step.Status = stepDone
	case agent.StopMaxSteps:
		step.Status = stepCapped
	case agent.StopCancelled:
		step.Status = stepStopped
		if !pl.chats.ShuttingDown() {
			pl.finish(ctx, in, p, statusStopped)
		}
		return
	default:
		step.Status = stepFailed
	}
	if step.Status == stepDone && p.Current == len(p.Steps)-1 {
		pl.finish(ctx, in, p, statusDone)
		return
	}
	wait := time.Now().Add(pl.cfg.FeedbackTimeout)
	p.Status, p.WaitUntil = statusWaiting, &wait
	if err := pl.cfg.Store.UpdatePlan(ctx, p); err != nil {
		log.Error("update plan", "err", err)
		return
	}
	pl.ask(ctx, orig, p)
}

// ask asks how to go on after a step, with buttons where possible.
func (pl *Plans) ask(ctx context.Context, in channels.Inbound, p store.Plan) {
	step := p.Steps[p.Current]
	what := map[string]string{stepDone: "is done", stepCapped: "hit its step limit", stepFailed: "failed"}[step.Status]
	text := fmt.Sprintf("Step %d of %d (%s) %s. Continue, retry, skip or stop? Or reply with a suggestion and I'll redo it.",
		p.Current+1, len(p.Steps), step.Title, what)
	id := strconv.FormatInt(p.ID, 10)
	asker, ok := pl.chats.Channel(in.Channel).(channels.Asker)
	var err error
	if ok {
		_, err = asker.Ask(ctx, channels.Outbound{ChatID: in.ChatID, Text: text}, []channels.Button{
			{Label: "Continue", Action: "plan:" + id + ":continue"}, {Label: "Retry", Action: "plan:" + id + ":retry"},
			{Label: "Skip", Action: "plan:" + id + ":skip"}, {Label: "Stop", Action: "plan:" + id + ":stop"}})
	} else {
		quiet := in
		quiet.MessageID = ""
		_, err = pl.chats.Send(ctx, quiet, text)
	}
	if err != nil {
		pl.log.Warn("could not ask about the plan", "err", err)
	}
}

// finish closes a plan and posts a summary of its steps.
func (pl *Plans) finish(ctx context.Context, in channels.Inbound, p store.Plan, status string) {
	p.Status, p.WaitUntil = status, nil
	if err := pl.cfg.Store.UpdatePlan(context.WithoutCancel(ctx), p); err != nil {
		pl.log.Error("update plan", "err", err)
	}
	var b strings.Builder
	if status == statusStopped {
		fmt.Fprintf(&b, "Plan stopped: %s\n", p.Task)
	} else {
		fmt.Fprintf(&b, "Plan finished: %s\n", p.Task)
	}
	for i, s := range p.Steps {
		st := s.Status
		switch st {
		case "":
			st = "not run"
		case stepCapped:
			st = "hit its step limit"
		}
		fmt.Fprintf(&b, "%d. %s — %s\n", i+1, s.Title, st)
	}
	quiet := in
	quiet.MessageID = ""
	if _, err := pl.chats.Send(context.WithoutCancel(ctx), quiet, strings.TrimSpace(b.String())); err != nil {
		pl.log.Warn("could not post the plan summary", "err", err)
	}
}

// Sweep implements router.Sweeper: it moves on plans nobody answered
// in time.
func (pl *Plans) Sweep(ctx context.Context) {
	due, err := pl.cfg.Store.DuePlans(ctx)
	if err != nil {
		pl.log.Warn("due plans", "err", err)
		return
	}
	for _, p := range due {
		if won, err := pl.cfg.Store.ClaimPlan(ctx, p.ID); err != nil || !won {
			continue
		}
		in := channels.Inbound{Channel: p.Channel, ChatID: p.ChatKey, UserID: p.UserID}
		_ = json.Unmarshal(p.Origin, &in)
		pl.queue(in, move{planID: p.ID, verb: "continue"})
	}
}

// Stop implements router.Stopper: it stops the chat's waiting plan (a
// running one stops with its turn).
func (pl *Plans) Stop(ctx context.Context, in channels.Inbound) (string, bool) {
	p, found, err := pl.cfg.Store.OpenPlan(ctx, in.Channel, in.ChatID)
	if err != nil || !found || p.Status != statusWaiting {
		return "", false
	}
	if won, err := pl.cfg.Store.ClaimPlan(ctx, p.ID); err != nil || !won {
		return "", false
	}
	pl.queue(in, move{planID: p.ID, verb: "stop"})
	return "Stopping the plan.", true
}

// clip shortens s to n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
