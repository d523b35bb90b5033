// Package agent owns the loop that turns a user's message into a reply:
// prompt → model → tools, step by step, with a stored transcript, a tool set
// rebuilt every step, context compaction, and one stop reason per turn.
// It sees chats only through the capabilities a turn carries (Chat).
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/fallback"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// Defaults of the loop, used where Config leaves a field zero.
const (
	// DefaultMaxSteps bounds a turn: generous for real multi-tool work, but
	// a runaway loop stops long before it burns a budget.
	DefaultMaxSteps = 50
	// DefaultContextWindow fits today's common models (128k tokens).
	DefaultContextWindow = 128_000
	// maxCompactionRetries bounds reactive compactions per step.
	maxCompactionRetries = 3
)

// StopStoreError is the failed-class stop reason when the transcript could
// not be written; the turn stops rather than go on with an unrecorded step.
const StopStoreError StopReason = "store_error"

// StopModelUnavailable is the failed-class stop reason of a turn that
// holds on an outage (Turn.HoldOnOutage) when the model server could not be
// reached or did not answer properly after the client's retries
// (llm.Unavailable). Like StopStoreError, the turn is left running with
// its committed steps and no reply: the caller tries it again later, and
// it resumes where it stopped.
const StopModelUnavailable StopReason = "model_unavailable"

// Model is the chat model the loop talks to (llm.Client implements it).
type Model interface {
	Complete(ctx context.Context, req llm.Request, onDelta func(llm.Delta)) (llm.Response, error)
}

// Store is the part of the store the loop needs.
type Store interface {
	BeginTurn(ctx context.Context, t store.TurnStart, first []llm.Message) (int64, []int64, error)
	CommitStep(ctx context.Context, turnID int64, step int, msgs []store.StepMessage, usage llm.Usage) ([]int64, error)
	FinishTurn(ctx context.Context, turnID int64, e store.TurnEnd) error
	// MessagesAfter may share the messages it returns: read them only.
	MessagesAfter(ctx context.Context, sessionID, afterID int64) ([]store.Message, error)
	LatestSummary(ctx context.Context, sessionID int64) (string, int64, bool, error)
	SaveSummary(ctx context.Context, sessionID, upToMessageID int64, text string) error
	UsageSince(ctx context.Context, userID string, since time.Time) (llm.Usage, error)
	ReopenTurn(ctx context.Context, turnID int64) error
}

// Chat is the conversation a turn belongs to, as the loop sees it.
type Chat interface {
	// Send delivers a message (Markdown) to the chat and returns its id.
	// An error wrapping ErrSendQueued means the platform did not take it
	// now but it is kept and delivered later: it counts as sent.
	Send(ctx context.Context, text string) (string, error)
}

// ErrSendQueued is returned (wrapped) by Chat.Send for a message the
// platform could not take now that is kept to be delivered later, in
// order (the router's outbox). The message counts as sent: sending it
// again would deliver it twice.
var ErrSendQueued = errors.New("queued for delivery")

// Config wires an Agent. Zero values take the documented defaults.
type Config struct {
	Model   Model
	Store   Store
	Sources []Source // tool sources in priority order (builtin first)

	Identity  Identity
	Catalogue func() string // skill catalogue for the static prefix; may be nil
	Location  *time.Location

	ContextWindow int // tokens; default DefaultContextWindow
	// HistoryBudget bounds the conversation history a request carries
	// (messages after the system prompt, and the rolling summary), in
	// tokens: past it, earlier turns' tool results are stubbed, then the
	// oldest turns are folded into the summary. 0: only the window bounds it.
	HistoryBudget        int
	MaxSteps             int // default DefaultMaxSteps
	ToolResultMaxChars   int // default DefaultToolResultMaxChars
	MaxOutputTokens      int // 0: server default
	TurnTokenBudget      int // 0: unlimited
	UserDailyTokenBudget int // 0: unlimited

	Now    func() time.Time
	Logger *slog.Logger

	// Redact replaces the gateway's secrets in every tool result, before
	// it is stored, sent to the model or shown; nil: results are kept as
	// the tools return them.
	Redact func(string) string
}

// Agent runs turns. It is safe for concurrent use by turns of different chats.
type Agent struct {
	cfg       Config
	log       *slog.Logger
	conflicts sync.Map // tool-name conflicts already reported
}

// New returns an Agent with defaults applied.
func New(cfg Config) (*Agent, error) {
	if cfg.Model == nil || cfg.Store == nil {
		return nil, errors.New("agent: model and store are required")
	}
	if cfg.ContextWindow <= 0 {
		cfg.ContextWindow = DefaultContextWindow
	}
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = DefaultMaxSteps
	}
	if cfg.ToolResultMaxChars <= 0 {
		cfg.ToolResultMaxChars = DefaultToolResultMaxChars
	}
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Agent{cfg: cfg, log: cfg.Logger}, nil
}

// Prefix is the static system prompt prefix as of now (with the
// configured catalogue).
func (a *Agent) Prefix() string { return a.prefix("") }

func (a *Agent) prefix(catalogue string) string {
	if catalogue == "" && a.cfg.Catalogue != nil {
		catalogue = a.cfg.Catalogue()
	}
	return BuildPrefix(a.cfg.Identity, catalogue)
}

// Turn is one user message (or scheduled prompt) to answer.
type Turn struct {
	ChatID, SessionID, InboxID int64
	// InboxKeep is what the store keeps of the inbox message once the turn
	// answered it (store.TurnEnd.InboxKeep); nil: all of it.
	InboxKeep []byte
	// ResumeTurnID continues a turn that was begun earlier and interrupted
	// (its user message is already stored); 0 starts a new turn.
	ResumeTurnID int64

	Channel, ChatType, ChatTitle  string
	ChatKey                       string // the chat's key within the channel, for tool sources
	UserID, UserName, DisplayName string
	Kind                          string // "user" (default) or "job"

	Input llm.Message // the user message (ignored on resume)
	// Note is the gateway's own word on the input (a scheduled task's
	// marker): stored after it as a system message, which no user can
	// write, so a user who types the same text cannot pass for the gateway.
	Note string
	Chat Chat

	MaxSteps  int            // 0: the agent's default
	Catalogue string         // skill catalogue for the prefix; "": the agent's
	Sources   []Source       // extra tool sources for this turn (after the agent's)
	Sections  []Section      // extra dynamic context (profile, memories)
	Location  *time.Location // the user's zone; nil: the agent's
	OnEvent   func(Event)    // may be nil; called synchronously, keep it fast
	// Approvals: the chat can ask the user to approve tool calls. Without
	// it, tools that require approval refuse to run.
	Approvals bool
	// Resolve resumes a turn paused for approval (with ResumeTurnID).
	Resolve *Resolution
	Model   string          // informational: recorded on the turn
	Allow   map[string]bool // non-nil: only these tools
	// Skills are the skills the turn engaged (by command or trigger; not
	// the always-on ones), for the after-turn review: the turn's
	// EventDone carries them.
	Skills []string
	// HoldOnOutage: when the model is unavailable (llm.Unavailable), the
	// turn of a stored message (InboxID set) stops with
	// StopModelUnavailable, unanswered and left open, for the caller to
	// try again; otherwise the user is told to try again, and the turn
	// fails.
	HoldOnOutage bool
}

// Resolution is the user's decision on a paused turn's tool calls.
type Resolution struct {
	Approved bool   // run the calls
	Reason   string // why not, for the model (denied, superseded, expired)
	Continue bool   // go on with the turn after the results (approve and deny do; superseded and expired do not)
}

// Result is how a turn ended.
type Result struct {
	TurnID     int64
	StopReason StopReason
	Steps      int
	ModelCalls int
	Usage      llm.Usage
	Delivered  bool // a send tool succeeded, or the fallback sent Reply
	// InboxDone: the turn's inbox message was marked done with the turn's
	// end (Turn.InboxID set, the turn finished).
	InboxDone bool
	Reply     string // what the fallback sent, if anything
	Err       error  // what failed, for failed-class stops
	// Pending are the calls waiting for approval (StopRequiresApproval).
	Pending []llm.ToolCall
}

// entry is a message of the conversation with its store identity.
type entry struct {
	llm.Message
	id     int64
	turnID int64
	hidden bool
}

type turnState struct {
	mu      sync.Mutex // serialises events and delivery marks from parallel tools
	t       Turn
	turnID  int64
	prompt  Prompt
	hist    []entry // earlier turns (after the stored summary)
	cur     []entry // this turn
	summary string
	layer   int // compaction layer in force for this turn (0-4)
	// The size of the last request: estimated tokens and bytes of text.
	reqTokens, reqBytes int

	steps      int
	modelCalls int
	usage      llm.Usage
	delivered  bool
	final      string
	model      string
	called     map[string]int
	calls      []string // tool names called in this turn, in order
	lastKey    string
	repeats    int
	stopRepeat bool
	emptyRetry bool
	approved   map[string]bool // the calls the user approved, by approvalKey
	pending    []llm.ToolCall  // calls waiting for approval

	// callHint, when set, is the hint the next model call carries after a
	// tool call written as text that could not be used (callRetried).
	callHint    string
	callRetried bool
}

func (st *turnState) emit(a *Agent, ev Event) {
	if st.t.OnEvent == nil {
		return
	}
	ev.TurnID = st.turnID
	ev.ChatID = st.t.ChatID
	if ev.Time.IsZero() {
		ev.Time = a.cfg.Now()
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.t.OnEvent(ev)
}

// Run answers one turn. It always returns a Result with a stop reason and
// emits exactly one EventDone.
func (a *Agent) Run(ctx context.Context, t Turn) (res Result) {
	start := a.cfg.Now()
	st := &turnState{t: t, called: map[string]int{}}
	if t.Kind == "" {
		st.t.Kind = "user"
	}
	loc := t.Location
	if loc == nil {
		loc = a.cfg.Location
	}
	maxSteps := t.MaxSteps
	if maxSteps <= 0 {
		maxSteps = a.cfg.MaxSteps
	}
	log := a.log.With("chat_id", t.ChatID, "session_id", t.SessionID)
	var limit time.Duration // the time the turn has, for telling the user
	if dl, ok := ctx.Deadline(); ok {
		limit = time.Until(dl)
	}

	if err := a.begin(ctx, st); err != nil {
		log.Error("begin turn", "err", err)
		res = Result{StopReason: StopStoreError, Err: err}
		st.emit(a, Event{Kind: EventDone, StopReason: res.StopReason, Err: err.Error()})
		return res
	}
	log = log.With("turn_id", st.turnID)
	st.prompt = Prompt{Prefix: a.prefix(t.Catalogue), Summary: st.summary, Tail: a.tail(st, loc, start)}
	st.emit(a, Event{Kind: EventTurnStart, Text: st.t.Input.Content})

	var reason StopReason
	var err error
	done := false
	if t.Resolve != nil {
		reason, done, err = a.resolve(ctx, st)
	}
	if !done && st.t.ResumeTurnID != 0 && len(st.cur) > 0 {
		// Resumed after its final answer was stored: deliver that answer
		// rather than ask the model again.
		if e := st.cur[len(st.cur)-1]; e.Role == llm.RoleAssistant && !e.hidden && len(e.ToolCalls) == 0 && strings.TrimSpace(e.Content) != "" {
			st.final, reason, done = e.Content, StopEndTurn, true
		}
	}
	if !done {
		reason, err = a.loop(ctx, st, maxSteps, log)
	}
	if reason == StopCancelled && timedOut(ctx) {
		// Past the turn's deadline: never silent. Unless a message of the
		// turn went out already, the user is told in one sentence.
		reason = StopTurnTimeout
		st.final = timeoutReply(limit)
		err = errors.Join(err, fmt.Errorf("agent: the turn ran past its time limit (%s, agent.turn_timeout) after %d steps",
			limit.Round(time.Second), st.steps))
		log.Warn("turn ran past its time limit; the user is told", "limit", limit.Round(time.Second), "steps", st.steps, "model_calls", st.modelCalls)
	}

	// Delivery: the fallback sends the final text once, unless a send tool
	// already delivered or the turn was cancelled.
	var reply string
	if reason != StopCancelled && st.t.Chat != nil {
		if text, send := fallback.Decide(st.delivered, st.final); send {
			sctx := context.WithoutCancel(ctx)
			_, serr := st.t.Chat.Send(sctx, text)
			if errors.Is(serr, ErrSendQueued) {
				log.Warn("reply queued for delivery", "err", serr)
				serr = nil
			}
			if serr != nil {
				log.Error("fallback send", "err", serr)
				err = errors.Join(err, fmt.Errorf("agent: send reply: %w", serr))
			} else {
				st.delivered = true
				reply = text
			}
		}
	}

	end := store.TurnEnd{StopReason: string(reason), Status: string(reason.Class()), Steps: st.steps, Model: st.model,
		FinishInbox: t.InboxID != 0, InboxKeep: t.InboxKeep, RequestTokens: st.reqTokens, RequestBytes: st.reqBytes}
	inboxDone := false
	if err != nil {
		end.Error = err.Error()
	}
	if reason == StopCancelled && t.InboxID != 0 && errors.Is(context.Cause(ctx), ErrCheckpoint) {
		log.Info("turn checkpointed; it resumes after a restart")
	} else if reason == StopStoreError && t.InboxID != 0 {
		// Left running with its committed steps, like a checkpoint: its
		// message stays pending, and the turn resumes once the store takes
		// writes again. Finished as failed, it could never be answered.
		log.Warn("turn left open: the store did not take its step", "err", err)
	} else if reason == StopModelUnavailable {
		// The same, until the model answers again (only with InboxID:
		// see holds).
		log.Warn("turn left open: the model is unavailable", "err", err)
	} else if ferr := a.cfg.Store.FinishTurn(context.WithoutCancel(ctx), st.turnID, end); ferr != nil {
		log.Error("finish turn", "err", ferr)
		err = errors.Join(err, ferr)
	} else {
		inboxDone = end.FinishInbox
	}
	res = Result{TurnID: st.turnID, StopReason: reason, Steps: st.steps, ModelCalls: st.modelCalls, InboxDone: inboxDone,
		Usage: st.usage, Delivered: st.delivered, Reply: reply, Err: err, Pending: st.pending}
	doneEv := Event{Kind: EventDone, StopReason: reason, Usage: st.usage, Text: reply, Model: st.model,
		Duration: a.cfg.Now().Sub(start), Skills: t.Skills}
	if err != nil {
		doneEv.Err = err.Error()
	}
	st.emit(a, doneEv)
	log.Info("turn done", "stop_reason", reason, "steps", st.steps, "model_calls", st.modelCalls,
		"tokens", st.usage.TotalTokens, "duration", a.cfg.Now().Sub(start).Round(time.Millisecond))
	return res
}

// begin loads the history and records the start of the turn.
func (a *Agent) begin(ctx context.Context, st *turnState) error {
	s := a.cfg.Store
	summary, upTo, _, err := s.LatestSummary(ctx, st.t.SessionID)
	if err != nil {
		return fmt.Errorf("agent: load summary: %w", err)
	}
	st.summary = summary
	msgs, err := s.MessagesAfter(ctx, st.t.SessionID, upTo)
	if err != nil {
		return fmt.Errorf("agent: load history: %w", err)
	}
	st.hist = make([]entry, 0, len(msgs))
	for _, m := range msgs {
		e := entry{Message: m.Message, id: m.ID, turnID: m.TurnID, hidden: m.Hidden}
		if st.t.ResumeTurnID != 0 && m.TurnID == st.t.ResumeTurnID {
			st.cur = append(st.cur, e)
		} else {
			st.hist = append(st.hist, e)
		}
	}
	if st.t.ResumeTurnID != 0 {
		st.turnID = st.t.ResumeTurnID
		input := false
		for _, e := range st.cur {
			if e.Role == llm.RoleUser && !e.hidden && !input {
				st.t.Input, input = e.Message, true
			}
			// Each stored step has one assistant message: the turn goes on
			// from where it was, and max_steps counts the steps before the
			// interruption too.
			if e.Role == llm.RoleAssistant && !e.hidden {
				st.steps++
			}
		}
		return nil
	}
	in := st.t.Input
	in.Role = llm.RoleUser
	first := []llm.Message{in}
	if st.t.Note != "" {
		first = append(first, SystemNote(st.t.Note))
	}
	id, ids, err := s.BeginTurn(ctx, store.TurnStart{ChatID: st.t.ChatID, SessionID: st.t.SessionID,
		InboxID: st.t.InboxID, UserID: st.t.UserID, Channel: st.t.Channel, Kind: st.t.Kind}, first)
	if err != nil {
		return fmt.Errorf("agent: begin turn: %w", err)
	}
	st.turnID = id
	for i, m := range first {
		st.cur = append(st.cur, entry{Message: m, id: ids[i], turnID: id})
	}
	return nil
}

func (a *Agent) tail(st *turnState, loc *time.Location, now time.Time) string {
	return BuildTail(TailInfo{Now: now, Location: loc, Channel: st.t.Channel, ChatType: st.t.ChatType,
		ChatTitle: st.t.ChatTitle, UserName: st.t.UserName, DisplayName: st.t.DisplayName, Sections: st.t.Sections})
}

// loop runs steps until the turn stops.
func (a *Agent) loop(ctx context.Context, st *turnState, maxSteps int, log *slog.Logger) (StopReason, error) {
	for {
		if err := ctx.Err(); err != nil {
			return StopCancelled, nil
		}
		if st.stopRepeat {
			return a.wrapUp(ctx, st, StopToolRule, "You called the same tool with the same arguments four times in a row, so the turn was stopped.")
		}
		if st.steps >= maxSteps {
			return a.wrapUp(ctx, st, StopMaxSteps, fmt.Sprintf("You have used all %d steps of this turn.", maxSteps))
		}
		if reason, ok := a.overBudget(ctx, st); ok {
			st.final = "I've reached my token budget for now, so I have to stop here. Please try again later."
			return reason, nil
		}

		step := st.steps + 1
		ts, rules, ruleStop := a.tools(st, step)
		if ruleStop {
			return a.wrapUp(ctx, st, StopToolRule, "The tool rules of the active skills leave no tool to call now.")
		}
		hint := st.callHint
		if hint != "" { // for this call only, like wrapUp's nudge
			st.cur = append(st.cur, entry{Message: SystemNote(hint), hidden: true})
		}
		resp, reason, err := a.call(ctx, st, step, ts.Specs(), true)
		if hint != "" {
			st.cur, st.callHint = st.cur[:len(st.cur)-1], ""
		}
		if err != nil {
			return reason, err
		}
		msg := resp.Message
		msg.Role = llm.RoleAssistant

		if len(msg.ToolCalls) == 0 && resp.MalformedCall != "" {
			// A tool call written as text that is no call: never stored,
			// never sent. Retry once with a hint, then apologise.
			if !st.callRetried {
				st.callRetried = true
				st.callHint = "Your last answer was a tool call written as text, and it could not be used: " + resp.MalformedCall +
					". Call tools only through the tool-calling interface, with a JSON object of arguments, or answer in plain text."
				st.emit(a, Event{Kind: EventRetry, Step: step, Text: "malformed tool call written as text: " + resp.MalformedCall})
				continue
			}
			st.final = "Sorry, I got stuck trying to use my tools for that. Could you rephrase it?"
			return StopInvalidResponse, fmt.Errorf("agent: the model wrote an unusable tool call as text twice: %s", resp.MalformedCall)
		}

		if len(msg.ToolCalls) == 0 {
			if strings.TrimSpace(msg.Content) == "" {
				// Never stored, never sent: retry once, then apologise.
				if !st.emptyRetry {
					st.emptyRetry = true
					st.emit(a, Event{Kind: EventRetry, Step: step, Text: "empty reply from the model"})
					continue
				}
				st.final = "Sorry, I couldn't come up with an answer to that. Could you rephrase it?"
				return StopInvalidResponse, errors.New("agent: the model returned an empty reply twice")
			}
			if missing := MissingRequired(rules, st.calls); len(missing) > 0 && step < maxSteps {
				// Not done yet: the answer stays in the transcript, unsent,
				// and a hidden nudge sends the model back to work.
				nudge := SystemNote("Before you finish, you must call: " + strings.Join(missing, ", ") + ". Do that now.")
				if err := a.commit(ctx, st, step, []store.StepMessage{{Message: msg}, {Message: nudge, Hidden: true}}, resp.Usage); err != nil {
					return StopStoreError, err
				}
				st.emit(a, Event{Kind: EventRetry, Step: step, Text: "required tools not called yet: " + strings.Join(missing, ", ")})
				continue
			}
			if err := a.commit(ctx, st, step, []store.StepMessage{{Message: msg}}, resp.Usage); err != nil {
				return StopStoreError, err
			}
			st.final = msg.Content
			if resp.FinishReason == llm.FinishLength {
				return StopMaxTokensExceeded, nil
			}
			return StopEndTurn, nil
		}

		if strings.TrimSpace(msg.Content) != "" {
			st.emit(a, Event{Kind: EventInterimText, Step: step, Text: msg.Content})
		}
		if st.t.Approvals && needsApproval(msg.ToolCalls, ts) {
			// Run nothing of this step: store the calls and wait for the user.
			for i := range msg.ToolCalls {
				if msg.ToolCalls[i].ID == "" {
					msg.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", step, i)
				}
			}
			if err := a.commit(ctx, st, step, []store.StepMessage{{Message: msg}}, resp.Usage); err != nil {
				return StopStoreError, err
			}
			st.pending = msg.ToolCalls
			return StopRequiresApproval, nil
		}
		results := a.execute(ctx, st, step, msg.ToolCalls, ts)
		step0 := []store.StepMessage{{Message: msg}}
		for _, r := range results {
			step0 = append(step0, store.StepMessage{Message: r})
		}
		// The step is written even if ctx was cancelled meanwhile, so the
		// transcript keeps every call with its result.
		if err := a.commit(context.WithoutCancel(ctx), st, step, step0, resp.Usage); err != nil {
			return StopStoreError, err
		}
		if terminalCalled(rules, msg.ToolCalls, results) {
			return StopToolRule, nil // a terminal tool ends the turn
		}
	}
}

// terminalCalled reports whether a terminal tool ran without error.
func terminalCalled(rules ToolRules, calls []llm.ToolCall, results []llm.Message) bool {
	for i, c := range calls {
		if slices.Contains(rules.Terminal, c.Name) && !strings.HasPrefix(results[i].Content, "error: ") {
			return true
		}
	}
	return false
}

// approvalKey identifies an approved call by its step and id: ids are the
// model server's, and some reuse them across steps.
func approvalKey(step int, callID string) string { return fmt.Sprintf("%d/%s", step, callID) }

// needsApproval reports whether any call is to a tool that requires it.
func needsApproval(calls []llm.ToolCall, ts *Toolset) bool {
	for _, c := range calls {
		if t, ok := ts.Lookup(c.Name); ok && t.RequiresApproval {
			return true
		}
	}
	return false
}

// resolve applies the user's decision to a paused turn: it runs the
// approved calls (or writes denial results) as the paused step's results.
// done reports that the turn ends here (superseded, expired, or a stop).
func (a *Agent) resolve(ctx context.Context, st *turnState) (reason StopReason, done bool, err error) {
	// The paused step is the last assistant message; only results after it
	// answer its calls: a server that reuses call ids (call_0 at every
	// step) must not make an earlier step's result answer this one's.
	var calls []llm.ToolCall
	answered := map[string]bool{}
	steps := 0
	for _, e := range st.cur {
		if e.Role == llm.RoleAssistant && !e.hidden {
			steps++
			calls = e.ToolCalls
			clear(answered)
		}
		if e.Role == llm.RoleTool {
			answered[e.ToolCallID] = true
		}
	}
	calls = slices.DeleteFunc(slices.Clone(calls), func(c llm.ToolCall) bool { return answered[c.ID] })
	if len(calls) == 0 {
		return StopCancelled, true, errors.New("agent: resume: the turn has no calls waiting for approval")
	}
	if err := a.cfg.Store.ReopenTurn(ctx, st.turnID); err != nil {
		return StopStoreError, true, err
	}
	st.steps = steps
	r := st.t.Resolve
	var results []llm.Message
	var rules ToolRules
	if r.Approved {
		var ts *Toolset
		ts, rules, _ = a.tools(st, steps)
		st.approved = map[string]bool{}
		for _, c := range calls {
			st.approved[approvalKey(steps, c.ID)] = true
		}
		results = a.execute(ctx, st, steps, calls, ts)
		st.approved = nil // this step's approval only: later steps ask again
	} else {
		why := r.Reason
		if why == "" {
			why = "the user denied it"
		}
		for _, c := range calls {
			text := "error: not run: " + why
			results = append(results, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: text})
			st.emit(a, Event{Kind: EventToolEnd, Step: steps, Tool: c.Name, CallID: c.ID, Args: c.Arguments, Result: text, IsError: true})
		}
	}
	msgs := make([]store.StepMessage, len(results))
	for i, m := range results {
		msgs[i] = store.StepMessage{Message: m}
	}
	if err := a.commit(context.WithoutCancel(ctx), st, steps, msgs, llm.Usage{}); err != nil {
		return StopStoreError, true, err
	}
	switch {
	case !r.Continue:
		return StopCancelled, true, nil
	case r.Approved && terminalCalled(rules, calls, results):
		return StopToolRule, true, nil
	}
	return "", false, nil
}

// SystemNote is a note of the gateway's own to the model within a
// conversation (a nudge, a scheduled task's marker). It travels as a
// system message, which no user can write, so a user who types the same
// words is seen as a user; it follows the history, so the cached prompt
// prefix stays as it was.
func SystemNote(text string) llm.Message { return llm.Message{Role: llm.RoleSystem, Content: text} }

// history returns the turn's messages so far.
func (st *turnState) history() []llm.Message {
	out := make([]llm.Message, len(st.cur))
	for i, e := range st.cur {
		out[i] = e.Message
	}
	return out
}

// tools builds the tool set for a step: every source's tools, filtered by
// the turn's allowlist and the rules the sources contribute. stop reports
// that the rules left no tool although some were available.
func (a *Agent) tools(st *turnState, step int) (ts *Toolset, rules ToolRules, stop bool) {
	hist := st.history()
	info := TurnInfo{Channel: st.t.Channel, ChatKey: st.t.ChatKey, ChatType: st.t.ChatType, UserID: st.t.UserID, Chat: st.t.Chat,
		UserText: st.t.Input.Content, Step: step, Called: st.called, Calls: st.calls, History: hist, Kind: st.t.Kind,
		Tainted: Tainted(hist)}
	sources := a.cfg.Sources
	if len(st.t.Sources) > 0 {
		sources = append(append([]Source(nil), sources...), st.t.Sources...)
	}
	ts = BuildTools(sources, info, st.t.Allow)
	if info.Tainted {
		ts = ts.Guard(st.t.Approvals)
	}
	for _, c := range ts.Conflicts {
		if _, seen := a.conflicts.LoadOrStore(c, true); !seen {
			a.log.Warn("tool name offered twice; the first source wins", "conflict", c)
		}
	}
	for _, src := range sources {
		if rs, ok := src.(RuleSource); ok {
			rules = rules.Merge(rs.Rules(info))
		}
	}
	allowed, stop := AllowedTools(ts.Names(), rules, st.calls)
	if stop {
		return ts, rules, true
	}
	return ts.Only(allowed), rules, false
}

// call makes one model call for a step, compacting first when the request
// would not fit, and again (at most maxCompactionRetries times) when the
// provider says it did not.
func (a *Agent) call(ctx context.Context, st *turnState, step int, specs []llm.ToolSpec, countStep bool) (llm.Response, StopReason, error) {
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return llm.Response{}, StopCancelled, nil
		}
		msgs, err := a.fit(ctx, st, specs, step)
		if err != nil {
			if errors.Is(err, errOverflow) {
				st.final = "This conversation no longer fits in my memory. Send /new to start a fresh one."
				return llm.Response{}, StopContextOverflow, err
			}
			if ctx.Err() != nil {
				return llm.Response{}, StopCancelled, nil
			}
			if st.holds(err) {
				return llm.Response{}, StopModelUnavailable, err
			}
			st.final = errorReply(err)
			return llm.Response{}, StopLLMError, err
		}
		req := llm.Request{Messages: msgs, Tools: specs, MaxTokens: a.cfg.MaxOutputTokens}
		st.reqTokens, st.reqBytes = EstimateTokens(msgs, specs), requestBytes(msgs, specs)
		var replies replyDecoders // the text of send_message calls, as they stream
		thinking := false
		if offers(specs, sendMessage) {
			req.StreamCalls, replies = []string{sendMessage}, replyDecoders{}
		}
		resp, err := a.cfg.Model.Complete(ctx, req, func(d llm.Delta) {
			if d.Thinking && !thinking { // its text is never an event
				thinking = true
				st.emit(a, Event{Kind: EventThinking, Step: step})
			}
			if d.Retract {
				st.emit(a, Event{Kind: EventRetry, Step: step, Text: "the text so far was the model's reasoning: taken back"})
			}
			if d.Text != "" {
				st.emit(a, Event{Kind: EventTextDelta, Step: step, Text: d.Text})
			}
			if d.ToolName == sendMessage && replies != nil {
				if text := replies.feed(d); text != "" {
					st.emit(a, Event{Kind: EventReplyDelta, Step: step, Tool: d.ToolName, CallID: d.ToolID, Text: text})
				}
			}
		})
		st.modelCalls++
		if err == nil {
			if countStep {
				st.steps = step
			}
			st.usage = st.usage.Add(resp.Usage)
			st.model = resp.Model
			st.emit(a, Event{Kind: EventUsage, Step: step, Usage: resp.Usage, Model: resp.Model})
			return resp, "", nil
		}
		if ctx.Err() != nil {
			return llm.Response{}, StopCancelled, nil
		}
		if errors.Is(err, llm.ErrContextLength) && attempt < maxCompactionRetries {
			st.emit(a, Event{Kind: EventRetry, Step: step, Text: "context length exceeded: compacting"})
			if cerr := a.escalate(ctx, st, specs, step); cerr != nil {
				st.final = "This conversation no longer fits in my memory. Send /new to start a fresh one."
				return llm.Response{}, StopContextOverflow, errors.Join(err, cerr)
			}
			continue
		}
		if errors.Is(err, llm.ErrContextLength) {
			st.final = "This conversation no longer fits in my memory. Send /new to start a fresh one."
			return llm.Response{}, StopContextOverflow, err
		}
		if st.holds(err) {
			return llm.Response{}, StopModelUnavailable, err
		}
		st.final = errorReply(err)
		return llm.Response{}, StopLLMError, err
	}
}

// holds reports whether the turn stops on err to be tried again later
// (StopModelUnavailable) rather than fail: it holds on an outage, has a
// stored message to resume from, and the model is unavailable.
func (st *turnState) holds(err error) bool {
	return st.t.HoldOnOutage && st.t.InboxID != 0 && llm.Unavailable(err)
}

// timedOut reports whether ctx ended at its deadline (agent.turn_timeout),
// not by a /stop, a shutdown or a checkpoint.
func timedOut(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.DeadlineExceeded) && errors.Is(context.Cause(ctx), context.DeadlineExceeded)
}

// timeoutReply is the one sentence a user gets when their turn ran past
// its time limit.
func timeoutReply(limit time.Duration) string {
	if limit < time.Second {
		return "Sorry, this took longer than I may spend on one message, so I stopped before finishing; please send it again, perhaps in smaller steps."
	}
	return fmt.Sprintf("Sorry, this took longer than the %s I may spend on one message, so I stopped before finishing; please send it again, perhaps in smaller steps.", plainDuration(limit))
}

// plainDuration renders a time limit for people: "45 seconds", "10 minutes".
func plainDuration(d time.Duration) string {
	switch {
	case d < 2*time.Minute:
		return fmt.Sprintf("%d seconds", int(d.Round(time.Second).Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%d minutes", int(d.Round(time.Minute).Minutes()))
	default:
		return fmt.Sprintf("%d hours", int(d.Round(time.Hour).Hours()))
	}
}

// errorReply is the short message a user gets when the model failed.
func errorReply(err error) string {
	var le *llm.Error
	if errors.As(err, &le) && le.Status != 0 {
		return fmt.Sprintf("Sorry, I couldn't reach the language model just now (HTTP %d). Please try again in a moment.", le.Status)
	}
	return "Sorry, I couldn't reach the language model just now. Please try again in a moment."
}

// stoppedBecause says in plain words why wrapUp stopped a turn.
func stoppedBecause(reason StopReason) string {
	switch reason {
	case StopMaxSteps:
		return "I used all the steps I may take for one message"
	case StopToolRule:
		return "my rules for using tools stopped me"
	}
	return "something stopped me"
}

// wrapUp ends a turn that ran out of steps (or was stopped by a rule) with
// one last model call without tools that tells the user where things stand.
func (a *Agent) wrapUp(ctx context.Context, st *turnState, reason StopReason, why string) (StopReason, error) {
	nudge := SystemNote(why + " Do not call tools. In a few sentences, tell the user what you did, what you found, and what is left to do.")
	st.cur = append(st.cur, entry{Message: nudge, hidden: true})
	resp, r, err := a.call(ctx, st, st.steps+1, nil, false)
	st.cur = st.cur[:len(st.cur)-1]
	if err != nil || r == StopCancelled {
		switch r {
		case StopCancelled:
			return StopCancelled, nil
		case StopModelUnavailable:
			return r, err // wrapped up when the turn resumes
		}
		st.final = "I had to stop before finishing: " + stoppedBecause(reason) + ", and I couldn't summarise my progress."
		return reason, err
	}
	msg := resp.Message
	msg.Role = llm.RoleAssistant
	msg.ToolCalls = nil
	if strings.TrimSpace(msg.Content) == "" {
		st.final = "I had to stop before finishing: " + stoppedBecause(reason) + "."
		return reason, nil
	}
	if err := a.commit(context.WithoutCancel(ctx), st, st.steps+1,
		[]store.StepMessage{{Message: nudge, Hidden: true}, {Message: msg}}, resp.Usage); err != nil {
		return StopStoreError, err
	}
	st.final = msg.Content
	return reason, nil
}

// commit writes a step atomically and appends it to the turn's messages.
func (a *Agent) commit(ctx context.Context, st *turnState, step int, msgs []store.StepMessage, usage llm.Usage) error {
	ids, err := a.cfg.Store.CommitStep(ctx, st.turnID, step, msgs, usage)
	if err != nil {
		return fmt.Errorf("agent: commit step %d: %w", step, err)
	}
	for i, m := range msgs {
		var id int64
		if i < len(ids) {
			id = ids[i]
		}
		st.cur = append(st.cur, entry{Message: m.Message, id: id, turnID: st.turnID, hidden: m.Hidden})
	}
	if step > st.steps {
		st.steps = step
	}
	return nil
}

// overBudget checks the per-turn and per-user daily token budgets.
func (a *Agent) overBudget(ctx context.Context, st *turnState) (StopReason, bool) {
	if b := a.cfg.TurnTokenBudget; b > 0 && st.usage.TotalTokens >= b {
		return StopBudgetExceeded, true
	}
	if b := a.cfg.UserDailyTokenBudget; b > 0 && st.t.UserID != "" {
		loc := st.t.Location
		if loc == nil {
			loc = a.cfg.Location
		}
		now := a.cfg.Now().In(loc)
		midnight := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
		u, err := a.cfg.Store.UsageSince(ctx, st.t.UserID, midnight)
		if err != nil {
			a.log.Warn("budget check", "err", err)
			return "", false
		}
		if u.TotalTokens >= b {
			return StopBudgetExceeded, true
		}
	}
	return "", false
}
