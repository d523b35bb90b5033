package router

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"switchboard/agent"
	"switchboard/channels"
	"switchboard/llm"
	"switchboard/store"
)

// Plan defaults.
const (
	// DefaultPlanStepMaxSteps caps each plan step's own loop: a step is a
	// focused piece of work, not a whole task.
	DefaultPlanStepMaxSteps = 10
	// DefaultPlanFeedbackTimeout: without an answer the plan continues.
	DefaultPlanFeedbackTimeout = 10 * time.Minute
)

// Planner breaks a task into steps (agent.Agent implements it).
type Planner interface {
	MakePlan(ctx context.Context, task, context string) ([]agent.PlanStep, llm.Usage, error)
}

type planStore interface {
	CreatePlan(ctx context.Context, p store.Plan) (int64, error)
	OpenPlan(ctx context.Context, channel, chatKey string) (store.Plan, bool, error)
	GetPlan(ctx context.Context, id int64) (store.Plan, error)
	UpdatePlan(ctx context.Context, p store.Plan) error
	ClaimPlan(ctx context.Context, id int64) (bool, error)
	DuePlans(ctx context.Context) ([]store.Plan, error)
}

// planMove is the user's answer after a plan step, queued on its chat.
type planMove struct {
	planID     int64
	verb       string // continue, retry, skip, stop
	suggestion string // with retry: what to do differently
}

// planAnswer reads an answer to a waiting plan: a button or words. Any
// other text is a suggestion: the step is redone with it.
func planAnswer(in channels.Inbound, planID int64) (planMove, bool) {
	if in.Action != "" {
		parts := strings.Split(in.Action, ":")
		if len(parts) != 3 || parts[0] != "plan" || parts[1] != strconv.FormatInt(planID, 10) {
			return planMove{}, false
		}
		return planMove{planID: planID, verb: parts[2]}, true
	}
	text := strings.TrimSpace(in.Text)
	switch strings.ToLower(strings.Trim(text, ".!")) {
	case "", "continue", "next", "go on", "ok", "okay", "yes", "go":
		return planMove{planID: planID, verb: "continue"}, true
	case "retry", "again", "redo":
		return planMove{planID: planID, verb: "retry"}, true
	case "skip":
		return planMove{planID: planID, verb: "skip"}, true
	case "stop", "cancel", "abort":
		return planMove{planID: planID, verb: "stop"}, true
	}
	return planMove{planID: planID, verb: "retry", suggestion: text}, true
}

// interceptPlan consumes an answer to the chat's waiting plan.
func (r *Router) interceptPlan(ctx context.Context, in channels.Inbound) (bool, error) {
	ps, ok := r.cfg.Store.(planStore)
	if !ok {
		return false, nil
	}
	button := strings.HasPrefix(in.Action, "plan:")
	p, found, err := ps.OpenPlan(ctx, in.Channel, in.ChatID)
	if err != nil || !found || p.Status != "waiting" {
		return button, err // a button of a finished plan: a no-op
	}
	if p.UserID != "" && in.UserID != p.UserID {
		return button, nil
	}
	mv, ok := planAnswer(in, p.ID)
	if !ok {
		return in.Action != "", nil
	}
	if won, err := ps.ClaimPlan(ctx, p.ID); err != nil || !won {
		return true, err // answered meanwhile: a no-op
	}
	r.enqueue(item{in: in, plan: &mv})
	return true, nil
}

// startPlan makes a plan for a task and runs its first step.
func (r *Router) startPlan(ctx context.Context, in channels.Inbound, task string) {
	ps, ok := r.cfg.Store.(planStore)
	if !ok || r.cfg.Planner == nil {
		_, _ = r.send(ctx, in, "Plans are not available here.")
		return
	}
	if strings.TrimSpace(task) == "" {
		_, _ = r.send(ctx, in, "Usage: /plan <task>, for example /plan compare three laptops under 1000 EUR")
		return
	}
	stop := r.keepTyping(ctx, in)
	steps, _, err := r.cfg.Planner.MakePlan(ctx, task, "")
	stop()
	if err != nil {
		r.log.Warn("plan failed", "err", err)
		_, _ = r.send(ctx, in, "Sorry, I couldn't make a plan for that: "+clip(err.Error(), 200))
		return
	}
	origin, _ := json.Marshal(in)
	p := store.Plan{Channel: in.Channel, ChatKey: in.ChatID, UserID: in.UserID, Task: task, Status: "running", Origin: origin}
	for _, s := range steps {
		p.Steps = append(p.Steps, store.PlanStep{Title: s.Title, Instructions: s.Instructions})
	}
	if p.ID, err = ps.CreatePlan(ctx, p); err != nil {
		r.log.Error("store plan", "err", err)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Plan for: %s\n", task)
	for i, s := range p.Steps {
		fmt.Fprintf(&b, "%d. %s\n", i+1, s.Title)
	}
	b.WriteString("I'll run the steps one by one and check with you after each.")
	_, _ = r.send(ctx, in, b.String())
	r.runPlanStep(ctx, in, p, "")
}

// movePlan applies the user's answer after a step.
func (r *Router) movePlan(ctx context.Context, in channels.Inbound, mv planMove) {
	ps := r.cfg.Store.(planStore)
	p, err := ps.GetPlan(ctx, mv.planID)
	if err != nil {
		r.log.Error("load plan", "err", err)
		return
	}
	cur := &p.Steps[p.Current]
	switch mv.verb {
	case "retry":
		r.runPlanStep(ctx, in, p, mv.suggestion)
		return
	case "stop":
		r.finishPlan(ctx, in, p, "stopped")
		return
	case "skip":
		if cur.Status != "done" {
			cur.Status = "skipped"
		}
	}
	p.Current++
	if p.Current >= len(p.Steps) {
		p.Current = len(p.Steps) - 1
		r.finishPlan(ctx, in, p, "done")
		return
	}
	r.runPlanStep(ctx, in, p, "")
}

// runPlanStep runs the current step as its own loop with its own step cap
// over the chat's shared history, then asks the user how to go on.
func (r *Router) runPlanStep(ctx context.Context, in channels.Inbound, p store.Plan, suggestion string) {
	ps := r.cfg.Store.(planStore)
	log := r.log.With("channel", in.Channel, "chat", in.ChatID, "plan", p.ID)
	orig := in
	if err := json.Unmarshal(p.Origin, &orig); err != nil {
		orig = in
	}
	chat, err := r.cfg.Store.EnsureChat(ctx, orig.Channel, orig.ChatID, string(orig.ChatType), orig.ChatTitle)
	if err != nil {
		log.Error("store chat", "err", err)
		return
	}
	sess, err := r.cfg.Store.OpenSession(ctx, chat.ID)
	if err != nil {
		log.Error("session", "err", err)
		return
	}
	step := &p.Steps[p.Current]
	step.Tries++
	p.Status, p.WaitUntil = "running", nil
	if err := ps.UpdatePlan(ctx, p); err != nil {
		log.Error("update plan", "err", err)
		return
	}
	var input strings.Builder
	fmt.Fprintf(&input, "[plan step %d of %d: %s]\nOverall task: %s\n\n%s", p.Current+1, len(p.Steps), step.Title, p.Task, step.Instructions)
	if suggestion != "" {
		fmt.Fprintf(&input, "\n\nThe user asked to redo this step with this suggestion: %s", suggestion)
	}
	input.WriteString("\n\nDo only this step, then reply with its result.")

	tctx, cancel := context.WithTimeout(ctx, r.cfg.TurnTimeout)
	defer cancel()
	stop := r.keepTyping(tctx, orig)
	quiet := orig
	quiet.MessageID = ""
	binding := &chatBinding{r: r, in: quiet, log: log, delivered: func(context.Context, int64, string) {}}
	res := r.cfg.Agent.Run(tctx, r.turnFor(tctx, orig, chat.ID, sess.ID, 0, binding, nil, func(t *agent.Turn) {
		t.Kind, t.MaxSteps, t.InboxID = "plan", r.cfg.PlanStepMaxSteps, 0
		t.Input = llm.Message{Role: llm.RoleUser, Content: input.String()}
	}))
	stop()
	step.Result = clip(res.Reply, 300)
	switch res.StopReason {
	case agent.StopEndTurn, agent.StopToolRule:
		step.Status = "done"
	case agent.StopMaxSteps:
		step.Status = "capped"
	case agent.StopCancelled:
		step.Status = "stopped"
		if r.base.Err() == nil {
			r.finishPlan(ctx, in, p, "stopped")
		}
		return
	default:
		step.Status = "failed"
	}
	if step.Status == "done" && p.Current == len(p.Steps)-1 {
		r.finishPlan(ctx, in, p, "done")
		return
	}
	wait := time.Now().Add(r.cfg.PlanFeedbackTimeout)
	p.Status, p.WaitUntil = "waiting", &wait
	if err := ps.UpdatePlan(ctx, p); err != nil {
		log.Error("update plan", "err", err)
		return
	}
	r.askPlan(ctx, orig, p)
}

// askPlan asks how to go on after a step, with buttons where possible.
func (r *Router) askPlan(ctx context.Context, in channels.Inbound, p store.Plan) {
	step := p.Steps[p.Current]
	what := map[string]string{"done": "is done", "capped": "hit its step limit", "failed": "failed"}[step.Status]
	text := fmt.Sprintf("Step %d of %d (%s) %s. Continue, retry, skip or stop? Or reply with a suggestion and I'll redo it.",
		p.Current+1, len(p.Steps), step.Title, what)
	id := strconv.FormatInt(p.ID, 10)
	r.mu.Lock()
	asker, ok := r.channels[in.Channel].(channels.Asker)
	r.mu.Unlock()
	var err error
	if ok {
		_, err = asker.Ask(ctx, channels.Outbound{ChatID: in.ChatID, Text: text}, []channels.Button{
			{Label: "Continue", Action: "plan:" + id + ":continue"}, {Label: "Retry", Action: "plan:" + id + ":retry"},
			{Label: "Skip", Action: "plan:" + id + ":skip"}, {Label: "Stop", Action: "plan:" + id + ":stop"}})
	} else {
		quiet := in
		quiet.MessageID = ""
		_, err = r.send(ctx, quiet, text)
	}
	if err != nil {
		r.log.Warn("could not ask about the plan", "err", err)
	}
}

// finishPlan closes a plan and posts a summary of its steps.
func (r *Router) finishPlan(ctx context.Context, in channels.Inbound, p store.Plan, status string) {
	ps := r.cfg.Store.(planStore)
	p.Status, p.WaitUntil = status, nil
	if err := ps.UpdatePlan(context.WithoutCancel(ctx), p); err != nil {
		r.log.Error("update plan", "err", err)
	}
	var b strings.Builder
	if status == "stopped" {
		fmt.Fprintf(&b, "Plan stopped: %s\n", p.Task)
	} else {
		fmt.Fprintf(&b, "Plan finished: %s\n", p.Task)
	}
	for i, s := range p.Steps {
		st := s.Status
		switch st {
		case "":
			st = "not run"
		case "capped":
			st = "hit its step limit"
		}
		fmt.Fprintf(&b, "%d. %s — %s\n", i+1, s.Title, st)
	}
	quiet := in
	quiet.MessageID = ""
	if _, err := r.send(context.WithoutCancel(ctx), quiet, strings.TrimSpace(b.String())); err != nil {
		r.log.Warn("could not post the plan summary", "err", err)
	}
}

// continueDuePlans moves on plans nobody answered in time.
func (r *Router) continueDuePlans(ctx context.Context) {
	ps, ok := r.cfg.Store.(planStore)
	if !ok {
		return
	}
	due, err := ps.DuePlans(ctx)
	if err != nil {
		r.log.Warn("due plans", "err", err)
		return
	}
	for _, p := range due {
		if won, err := ps.ClaimPlan(ctx, p.ID); err != nil || !won {
			continue
		}
		in := channels.Inbound{Channel: p.Channel, ChatID: p.ChatKey, UserID: p.UserID}
		_ = json.Unmarshal(p.Origin, &in)
		r.enqueue(item{in: in, plan: &planMove{planID: p.ID, verb: "continue"}})
	}
}

// stopPlan stops the chat's waiting plan (a running one stops with its turn).
func (r *Router) stopPlan(ctx context.Context, in channels.Inbound) bool {
	ps, ok := r.cfg.Store.(planStore)
	if !ok {
		return false
	}
	p, found, err := ps.OpenPlan(ctx, in.Channel, in.ChatID)
	if err != nil || !found || p.Status != "waiting" {
		return false
	}
	if won, err := ps.ClaimPlan(ctx, p.ID); err != nil || !won {
		return false
	}
	r.enqueue(item{in: in, plan: &planMove{planID: p.ID, verb: "stop"}})
	return true
}
