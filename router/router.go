// Package router takes normalised messages from every channel and runs them:
// access check → commands → durable intake → a per-chat FIFO, so one chat
// runs one turn at a time while different chats run concurrently up to a
// limit. It replays stored-but-unfinished messages after a restart, answers
// the chats its owner gives it (owner.go: every chat, or with other
// replicas those whose lease it holds, cluster.go), and keeps a chat's
// order when the store takes no writes (storefaults.go). What goes to the
// chats (a turn's replies, previews, typing, the outbox) is package reply's,
// used through one port (sender).
//
// The features that hold a conversation between turns (approvals, plans) and
// background work (the delegate tool) live in their own packages and plug in
// through Interceptor and Tasks (collaborators.go).
package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/pricing"
	"github.com/switchboard-gateway/switchboard/reply"
	"github.com/switchboard-gateway/switchboard/store"

	"github.com/switchboard-gateway/switchboard/internal/slots"
	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

// Defaults.
const (
	// DefaultMaxConcurrentTurns is sized for turns that wait on the
	// network (the model, tools, the platform), not on the CPU: a burst of
	// 50 users is answered in one model latency, where 4 ran it in rounds
	// (config.defaultMaxConcurrentTurns says what it costs).
	DefaultMaxConcurrentTurns = 64
	// DefaultTurnTimeout bounds a turn end to end, tools included.
	DefaultTurnTimeout = 10 * time.Minute
)

// ErrShuttingDown is returned by Deliver once shutdown has begun.
var ErrShuttingDown = errors.New("router: shutting down")

// Runner runs agent turns (agent.Agent implements it).
type Runner interface {
	Run(ctx context.Context, t agent.Turn) agent.Result
}

// Store is the part of the store the router needs: everything it calls,
// so that no feature reaches past it (approvals, plans and background tasks
// declare their own).
type Store interface {
	pairings // the gate's (access.go)

	// Chats and their conversations.
	EnsureChat(ctx context.Context, channel, key, chatType, title string) (store.Chat, error)
	CurrentSession(ctx context.Context, chatID int64) (store.Session, error)
	OpenSession(ctx context.Context, chatID int64) (store.Session, error)
	NewSession(ctx context.Context, chatID int64) (store.Session, error)

	// The durable inbox: a message is stored before it is confirmed, and
	// its replies are recorded, so that a restart answers it once.
	Intake(ctx context.Context, it store.InboxItem) (int64, bool, error)
	FinishInbox(ctx context.Context, id int64, status string) error
	PendingInbox(ctx context.Context) ([]store.InboxItem, error)
	// The replies' deliveries and the parts of a reply split by its
	// channel (the reply side's, which the router hands it).
	reply.Store
	TurnForInbox(ctx context.Context, inboxID int64) (store.Turn, bool, error)

	// Turns: /status, the ones a restart or a stopped replica cut off, and
	// a reminder recorded in the conversation as a job turn.
	Turns(ctx context.Context, chatID int64, limit int) ([]store.Turn, error)
	SummaryCoverage(ctx context.Context, sessionID int64) (store.SummaryCoverage, error)
	// Tokens: a conversation's for /status, all users' by day for /usage.
	SessionUsage(ctx context.Context, sessionID int64) (int, llm.Usage, error)
	UsageByDay(ctx context.Context, since time.Time) ([]store.DayUsage, error)
	RunningTurns(ctx context.Context) ([]store.Turn, error)
	RunningTurnsOf(ctx context.Context, channel, chatKey string) ([]store.Turn, error)
	BeginTurn(ctx context.Context, t store.TurnStart, first []llm.Message) (int64, []int64, error)
	FinishTurn(ctx context.Context, turnID int64, e store.TurnEnd) error
}

var _ Store = (*store.Store)(nil)

// Ticker is the part of time.Ticker the router uses (injectable for tests).
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

type realTicker struct{ *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.Ticker.C }

// Config wires a Router.
type Config struct {
	Store Store
	Agent Runner

	MaxConcurrentTurns int
	TurnTimeout        time.Duration
	Vision             bool // the model accepts image input
	// Transcribe turns a voice message into text; nil: voice messages reach
	// the model as a notice that transcription is not configured.
	Transcribe func(ctx context.Context, name string, audio []byte) (string, error)
	ModelName  string // for /status
	Location   *time.Location

	// Prices turn tokens into an estimated cost in /status and /usage;
	// nil: tokens only.
	Prices *pricing.Table
	// MaxInputChars caps an inbound message's text
	// (channels.max_input_chars): past it the chat is told in one sentence
	// and the message is not stored (input.go). 0:
	// channels.DefaultMaxInputChars; negative: no cap.
	MaxInputChars int

	// Replies is the reply side: previews, tool progress, the outbox, the
	// redaction and cap of what goes out, the files root (package reply).
	Replies reply.Options
	// Hooks are what the gateway adds to turns and observes of them.
	Hooks Hooks
	// ModelWait is how messages wait for a model that is unavailable
	// (modelwait.go).
	ModelWait ModelWait

	// Learning answers /memory and /profile (see learning.go); may be nil.
	Learning Learning
	// Interceptors hold chats' conversations between turns (approvals,
	// plans), consulted in order (see Interceptor); may be empty.
	Interceptors []Interceptor
	// Tasks is the chats' background work, for /tasks and /stop; may be nil.
	Tasks Tasks

	// NewTicker makes the interceptors' sweep ticker; nil uses
	// time.NewTicker.
	NewTicker func(d time.Duration) Ticker
	Logger    *slog.Logger
	// Cluster shares the chats with other replicas on the same store (see
	// cluster.go); nil: this process owns every chat (owner.go).
	Cluster Cluster
}

// Hooks are what the gateway adds to the turns and observes of them; each
// may be nil.
type Hooks struct {
	// Prepare returns what the turn answering a chat message adds to the
	// agent's defaults (skills, profile, memories, the delegate tool),
	// computed once at the start of the turn; chatID is the message's
	// stored chat, as the turn read it. The gateway's is
	// assembly.Assembler.Message.
	Prepare func(ctx context.Context, in channels.Inbound, chatID int64) Prepared
	// PrepareJob is Prepare for a scheduled task's turn (see RunJob); nil:
	// Prepare. The gateway's is assembly.Assembler.Job.
	PrepareJob func(ctx context.Context, in channels.Inbound, chatID int64) Prepared
	// StatusNotes returns the operator's lines for /status (skill
	// problems, channels and MCP servers that are down…), shown only to
	// the channel's admins (Access.Admins).
	StatusNotes func() []string
	// OnEvent observes every turn event (logs, metrics, dashboard).
	OnEvent func(in channels.Inbound, ev agent.Event)
	// Load observes the number of chats with a turn running or queued each
	// time it changes (the GC pacer); it runs under the router's lock and
	// must be quick.
	Load func(running int)
}

// ModelWait tunes how messages wait for a model that is unavailable
// (modelwait.go).
type ModelWait struct {
	// MaxAge bounds how long a message waits; 0: DefaultModelOutageMaxAge.
	MaxAge time.Duration
	// Answered returns a channel closed when a model call next succeeds,
	// which wakes the messages waiting for the model; nil: they wait out
	// their backoff.
	Answered func() <-chan struct{}
	// Down, if set, says why the model server is not answering ("" while
	// it is), for /status.
	Down func() string
}

// sender is the port the router sends to chats through (*reply.Sender):
// notices, replies kept in the outbox when the platform does not take
// them, the chats of turns and their typing indicators.
type sender interface {
	Send(ctx context.Context, in channels.Inbound, text string) (string, error)
	Deliver(ctx context.Context, m reply.Message) (string, error)
	Bind(b reply.Binding) *reply.Chat
	Typing(ctx context.Context, in channels.Inbound) (stop func())
	Answered(ctx context.Context, inboxID int64) bool
}

var _ sender = (*reply.Sender)(nil)

// Prepared is what a turn adds to the agent's defaults.
type Prepared struct {
	Sources   []agent.Source  // per-turn tool sources (active skills)
	Sections  []agent.Section // dynamic prompt context
	MaxSteps  int             // 0: the agent's default
	Plan      bool            // run the message as a plan (a skill with mode: plan)
	Catalogue string          // the skill catalogue for the static prompt prefix
	Skills    []string        // the skills the turn engaged (agent.Turn.Skills)
}

// Router implements channels.Sink.
type Router struct {
	cfg      Config
	log      *slog.Logger
	channels map[string]channels.Channel
	turns    *slots.Slots // MaxConcurrentTurns, first come first served (busy.go)
	gate     *gate
	replies  sender
	outbox   *reply.Outbox // nil: no Config.Replies.Outbox
	own      owner         // which chats this process answers (owner.go)

	mu     sync.Mutex
	queues map[string]*chatQueue
	// storeNotices and modelNotices: chats told that the store takes no
	// writes, or that the model is unavailable (notice.go).
	storeNotices, modelNotices notices
	closing                    bool
	idle                       *sync.Cond
	running                    int
	base                       context.Context
	cancel                     context.CancelCauseFunc // with agent.ErrCheckpoint at shutdown
	workers                    sync.WaitGroup

	waits modelWaits // messages waiting for the model (modelwait.go)
}

type chatQueue struct {
	items   []item
	busy    bool
	cancel  context.CancelFunc // cancels the running turn
	current *item
	retry   time.Duration // the next wait before a message the store failed is tried again

	channel, chat string
	handed        bool // leased: the lease was offered back since the last item
	released      bool // … and given back: take it again before the next message
}

type item struct {
	inboxID int64
	in      channels.Inbound
	job     *jobRun                   // a scheduled job (RunJob) instead of a stored message
	run     func(ctx context.Context) // an interceptor's work (Chats.Queue)
	// fresh: stored by Deliver just now, in this process, and not tried
	// yet, so it has no turn and no reply to look for.
	fresh bool
	// busy: whether the user was told they wait in line (busy.go); set
	// by work, kept when the item is tried again.
	busy *atomic.Bool
}

// plain reports whether the item is an inbound message (not a job, or an
// interceptor's work: a decision on a paused turn, a plan step).
func (it item) plain() bool { return it.job == nil && it.run == nil }

// chatKey names a chat in the router's maps.
func chatKey(channel, chat string) string { return channel + "\x00" + chat }

// New returns a Router; call Start before delivering messages.
func New(cfg Config) (*Router, error) {
	if cfg.Store == nil || cfg.Agent == nil {
		return nil, errors.New("router: store and agent are required")
	}
	if cfg.MaxConcurrentTurns <= 0 {
		cfg.MaxConcurrentTurns = DefaultMaxConcurrentTurns
	}
	if cfg.TurnTimeout <= 0 {
		cfg.TurnTimeout = DefaultTurnTimeout
	}
	if cfg.MaxInputChars == 0 {
		cfg.MaxInputChars = channels.DefaultMaxInputChars
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NewTicker == nil {
		cfg.NewTicker = func(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }
	}
	r := &Router{
		cfg:          cfg,
		log:          cfg.Logger.With("component", "router"),
		channels:     map[string]channels.Channel{},
		turns:        slots.New(cfg.MaxConcurrentTurns),
		queues:       map[string]*chatQueue{},
		storeNotices: notices{what: "the store takes no writes"},
		modelNotices: notices{what: "the model is unavailable"},
	}
	r.own = newOwner(r, cfg.Cluster)
	out := reply.New(reply.Config{Options: cfg.Replies, Store: cfg.Store, Channel: r.Channel, InProcess: r.inProcess,
		Shared: cfg.Cluster != nil, Logger: r.log})
	r.replies, r.outbox = out, out.Outbox()
	r.gate = newGate(cfg.Store, r.Send)
	r.idle = sync.NewCond(&r.mu)
	return r, nil
}

// AddChannel registers a channel after New (before its messages arrive).
func (r *Router) AddChannel(ch channels.Channel, access Access) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.channels[ch.Name()] = ch
	r.gate.set(ch.Name(), access)
}

// Start readies the router and requeues messages that were stored but not
// finished before a restart (or crash), oldest first.
func (r *Router) Start(ctx context.Context) error {
	r.mu.Lock()
	r.base, r.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	r.mu.Unlock()
	for _, ic := range r.cfg.Interceptors {
		ic.Start(r.base, r)
	}
	if r.cfg.Tasks != nil {
		r.cfg.Tasks.Start(r.base, r)
	}
	if r.outbox != nil {
		// Replies kept before a restart are picked up by its first pass;
		// new replies to their chats wait behind them.
		r.outbox.Load(ctx)
		r.workers.Add(1)
		go func() {
			defer r.workers.Done()
			r.outbox.Run(r.base)
		}()
	}
	if len(r.cfg.Interceptors) > 0 {
		r.workers.Add(1)
		go func() {
			defer r.workers.Done()
			r.sweep(r.base)
		}()
	}
	return r.own.start(ctx)
}

// Deliver implements channels.Sink: it returns once the message is stored
// (or was a duplicate, refused, or not addressed to the bot).
func (r *Router) Deliver(ctx context.Context, in channels.Inbound) error {
	r.mu.Lock()
	closing, started := r.closing, r.base != nil
	r.mu.Unlock()
	if closing {
		return ErrShuttingDown
	}
	if !started {
		return errors.New("router: not started")
	}
	if in.Channel == "" || in.ChatID == "" || in.MessageID == "" {
		r.log.Warn("dropping malformed inbound message: channel, chat id and message id are required",
			"channel", in.Channel, "chat", in.ChatID, "message_id", in.MessageID)
		return nil
	}
	log := r.log.With("channel", in.Channel, "chat", in.ChatID, "user_id", in.UserID)
	if in.ChatType == channels.Group && !in.Mentioned {
		return nil // groups: only when addressed
	}
	if admitted, err := r.gate.admit(ctx, in, log); !admitted {
		return err
	}
	if r.refuseTooLong(ctx, in, log) {
		return nil
	}
	payload, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("router: encode message: %w", err)
	}
	unpin, err := r.own.pin(ctx, in)
	if err != nil {
		return err
	}
	defer unpin()
	id, fresh, err := r.cfg.Store.Intake(ctx, store.InboxItem{Channel: in.Channel, ChatKey: in.ChatID,
		MessageID: in.MessageID, UserID: in.UserID, Payload: payload})
	if err != nil {
		// Not stored, so not confirmed to the platform: a channel that
		// delivers again (Telegram) gets it answered once the store is back.
		if why, ok := store.Unavailable(err); ok {
			r.tellUnavailable(ctx, in, why)
		}
		return fmt.Errorf("router: store message: %w", err)
	}
	if !fresh {
		log.Debug("duplicate message ignored", "message_id", in.MessageID)
		return nil
	}
	return r.own.stored(ctx, id, in, log)
}

// dispatch handles a stored message: a command that must not wait, an
// answer a paused turn or plan waits for, or a message for the chat's
// queue (queued is true).
func (r *Router) dispatch(ctx context.Context, id int64, in channels.Inbound, fresh bool) (queued bool, err error) {
	if r.immediate(ctx, id, in) {
		return false, nil
	}
	consumed, err := r.intercept(ctx, in)
	if err != nil {
		return false, err
	}
	if consumed || in.Action != "" { // a button nobody waits for is a no-op
		return false, r.cfg.Store.FinishInbox(ctx, id, store.InboxDone)
	}
	r.enqueue(item{inboxID: id, in: in, fresh: fresh})
	return true, nil
}

// Send sends text to the chat of in, quoting in.MessageID in groups
// (Chats).
func (r *Router) Send(ctx context.Context, in channels.Inbound, text string) (string, error) {
	return r.replies.Send(ctx, in, text)
}

// Typing shows the chat's typing indicator until stop is called (Chats).
func (r *Router) Typing(ctx context.Context, in channels.Inbound) (stop func()) {
	return r.replies.Typing(ctx, in)
}

// PendingReplies is the number of replies waiting in the outbox.
func (r *Router) PendingReplies() int {
	if r.outbox == nil {
		return 0
	}
	return r.outbox.Pending()
}

func (r *Router) enqueue(it item) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := chatKey(it.in.Channel, it.in.ChatID)
	q := r.queues[key]
	if q == nil {
		q = &chatQueue{channel: it.in.Channel, chat: it.in.ChatID}
		r.queues[key] = q
	}
	q.items = append(q.items, it)
	if !q.busy {
		q.busy = true
		r.running++
		r.observeLoad()
		r.workers.Add(1)
		go r.work(key, q)
	}
}

// work drains one chat's queue, one turn at a time.
func (r *Router) work(key string, q *chatQueue) {
	defer r.workers.Done()
	for {
		r.mu.Lock()
		if len(q.items) == 0 {
			r.own.idle(q) // may queue more
		}
		if len(q.items) == 0 || r.base.Err() != nil {
			q.items = abandonJobs(q.items, ErrShuttingDown)
			q.busy = false
			q.current = nil
			r.running--
			r.observeLoad()
			if len(q.items) == 0 {
				delete(r.queues, key)
			}
			r.idle.Broadcast()
			r.mu.Unlock()
			return
		}
		it := q.items[0]
		q.items = q.items[1:]
		ctx, cancel := context.WithCancel(r.base)
		q.cancel = cancel
		q.current = &it
		retake := r.own.next(q, it)
		r.mu.Unlock()

		skip := !r.own.ready(ctx, q, it, retake)
		if it.busy == nil {
			it.busy = new(atomic.Bool)
		}
		if !skip && r.turns.Acquire(ctx, r.inLine(ctx, it)) == nil {
			var storeErr error
			if it.job != nil {
				r.runJob(ctx, it.job)
			} else if it.run != nil {
				it.run(ctx)
			} else {
				storeErr = r.process(ctx, it)
			}
			r.turns.Release()
			r.afterProcess(ctx, key, q, it, storeErr)
		}
		r.own.done(q, it)
		abandonJobs([]item{it}, r.dropReason()) // a no-op unless a job ended without running
		cancel()
		r.mu.Lock()
		q.cancel = nil
		r.mu.Unlock()
	}
}

// observeLoad reports r.running to Config.Hooks.Load; r.mu is held.
func (r *Router) observeLoad() {
	if r.cfg.Hooks.Load != nil {
		r.cfg.Hooks.Load(r.running)
	}
}

// Drain waits until no chat has queued or running messages, or ctx ends.
func (r *Router) Drain(ctx context.Context) error {
	return waitfor.Cond(ctx, r.idle, func() bool { return r.running == 0 })
}

// Shutdown stops taking messages, lets running turns finish until ctx ends,
// then cancels them (their transcripts stay valid and their messages stay
// pending, to be resumed after a restart).
func (r *Router) Shutdown(ctx context.Context) error {
	r.waits.shutdown() // messages waiting for the model stay pending
	r.mu.Lock()
	r.closing = true
	// Queued but not started messages stay pending in the store; queued
	// jobs are told they will not run.
	for _, q := range r.queues {
		abandonJobs(q.items, ErrShuttingDown)
		q.items = nil
	}
	r.mu.Unlock()
	err := r.Drain(ctx)
	if r.cancel != nil {
		// Turns still running are checkpointed, not ended: they stay
		// running in the store with their message pending, and resume
		// after a restart.
		r.cancel(agent.ErrCheckpoint)
	}
	r.workers.Wait()
	if r.cfg.Tasks != nil {
		r.cfg.Tasks.Wait()
	}
	return err
}

// Busy reports how many chats have a queued or running message.
func (r *Router) Busy() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running
}

// QueueDepth returns the number of messages waiting (not running) overall.
func (r *Router) QueueDepth() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, q := range r.queues {
		n += len(q.items)
	}
	return n
}
