// Package router takes normalised messages from every channel and runs them:
// access check → commands → durable intake → a per-chat FIFO, so one chat
// runs one turn at a time while different chats run concurrently up to a
// limit. It binds each turn to its chat for replies and typing indicators,
// replays stored-but-unfinished messages after a restart, shares the chats
// with other replicas through leases (cluster.go), and keeps a chat's
// order when the store takes no writes (storefaults.go).
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
	RecordDelivery(ctx context.Context, inboxID, turnID int64, platformMsgID string) error
	Deliveries(ctx context.Context, inboxID int64) (int, error)
	// The parts of a reply split by its channel, so that a crash between
	// them resends only the missing ones (parts.go).
	RecordReplyPart(ctx context.Context, inboxID int64, reply string, part int, platformMsgID string) error
	ReplyParts(ctx context.Context, inboxID int64, reply string) (map[int]string, error)
	TurnForInbox(ctx context.Context, inboxID int64) (store.Turn, bool, error)

	// Turns: /status, the ones a restart or a stopped replica cut off, and
	// a reminder recorded in the conversation as a job turn.
	Turns(ctx context.Context, chatID int64, limit int) ([]store.Turn, error)
	SummaryCoverage(ctx context.Context, sessionID int64) (store.SummaryCoverage, error)
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
	Store    Store
	Agent    Runner
	Channels []channels.Channel
	Access   map[string]Access // by channel name; a channel without an entry admits nobody (see access.go)

	MaxConcurrentTurns int
	TurnTimeout        time.Duration
	Vision             bool // the model accepts image input
	// Transcribe turns a voice message into text; nil: voice messages reach
	// the model as a notice that transcription is not configured.
	Transcribe func(ctx context.Context, name string, audio []byte) (string, error)
	// Preview turns on streaming previews per channel (by name): a draft,
	// or one message edited as the model writes, which the final reply
	// replaces (preview.go).
	Preview map[string]bool
	// ToolProgress turns on, per channel, the line that says what tools
	// running longer than a moment are doing (preview.go).
	ToolProgress map[string]bool
	// Now is the outbox's clock; nil: time.Now.
	Now       func() time.Time
	FilesRoot string // the only directory send_file may send from (the workspace)
	ModelName string // for /status
	Location  *time.Location

	// Prepare returns what the turn answering a chat message adds to the
	// agent's defaults (skills, profile, memories, the delegate tool),
	// computed once at the start of the turn; may be nil. The gateway's is
	// assembly.Assembler.Message.
	Prepare func(ctx context.Context, in channels.Inbound) Prepared
	// PrepareJob is Prepare for a scheduled task's turn (see RunJob); nil:
	// Prepare. The gateway's is assembly.Assembler.Job.
	PrepareJob func(ctx context.Context, in channels.Inbound) Prepared
	// StatusNotes returns the operator's lines for /status (skill
	// problems, channels and MCP servers that are down…), shown only to
	// the channel's admins (Access.Admins); may be nil.
	StatusNotes func() []string
	// Learning answers /memory and /profile (see learning.go); may be nil.
	Learning Learning
	// OnEvent observes every turn event (logs, metrics, dashboard); may be nil.
	OnEvent func(in channels.Inbound, ev agent.Event)
	// OnSend observes the outcome of every message sent to a chat
	// (metrics: send failures); may be nil.
	OnSend func(channel string, err error)
	// Load observes the number of chats with a turn running or queued each
	// time it changes (the GC pacer); it runs under the router's lock and
	// must be quick. May be nil.
	Load func(running int)
	// NewTicker makes the interceptors' sweep ticker; nil uses
	// time.NewTicker.
	NewTicker func(d time.Duration) Ticker
	Logger    *slog.Logger
	// Cluster shares the chats with other replicas on the same store (see
	// cluster.go); nil: this process owns every chat.
	Cluster Cluster

	// Interceptors hold chats' conversations between turns (approvals,
	// plans), consulted in order (see Interceptor); may be empty.
	Interceptors []Interceptor
	// Tasks is the chats' background work, for /tasks and /stop; may be nil.
	Tasks Tasks

	// ModelOutageMaxAge bounds how long a message waits for a model that
	// is unavailable (modelwait.go); 0: DefaultModelOutageMaxAge.
	ModelOutageMaxAge time.Duration
	// ModelAnswered returns a channel closed when a model call next
	// succeeds, which wakes the messages waiting for the model; nil: they
	// wait out their backoff.
	ModelAnswered func() <-chan struct{}
	// Outbox keeps the replies the platform did not take, to deliver them
	// later (outbox.go); nil: no outbox, such a reply is lost. The
	// gateway's is its *store.Store.
	Outbox OutboxStore
	// OutboxConfig tunes the outbox's delivery; zero values take the
	// defaults.
	OutboxConfig OutboxConfig

	// Redact replaces the gateway's secrets in what is sent to chats;
	// nil: text goes out as written.
	Redact func(string) string
	// ReplyMaxChars caps a message to a chat (channels.reply_max_chars);
	// past it the reply is cut and says so (shape.go). 0:
	// DefaultReplyMaxChars; negative: no cap.
	ReplyMaxChars int
	// MaxInputChars caps an inbound message's text
	// (channels.max_input_chars): past it the chat is told in one sentence
	// and the message is not stored (input.go). 0:
	// channels.DefaultMaxInputChars; negative: no cap.
	MaxInputChars int
}

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
	turns    *slots.Slots             // MaxConcurrentTurns, first come first served (busy.go)
	typing   map[string]chan struct{} // per channel, typingInFlight slots; under mu
	gate     *gate

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

	leases leases     // with a Cluster (cluster.go)
	waits  modelWaits // messages waiting for the model (modelwait.go)
	outbox *outbox    // nil: no Config.Outbox
}

// leases is what a Router keeps of the chats' leases with a Cluster: the
// maps are guarded by Router.mu.
type leases struct {
	// Messages taken by this process, and chats whose lease to give back.
	inflight map[int64]bool
	held     map[string]bool
	pinned   map[string]int  // chats a request waits on here (channels.InProcessReplier)
	owned    map[string]bool // chats whose lease this process holds (see acquired)
	takeMu   [64]sync.Mutex  // takeChat, striped by chat
}

type chatQueue struct {
	items   []item
	busy    bool
	cancel  context.CancelFunc // cancels the running turn
	current *item
	retry   time.Duration // the next wait before a message the store failed is tried again

	channel, chat string
	handed        bool // with a Cluster: the lease was offered back since the last item
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
	if cfg.ReplyMaxChars == 0 {
		cfg.ReplyMaxChars = DefaultReplyMaxChars
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
		leases: leases{inflight: map[int64]bool{}, held: map[string]bool{}, pinned: map[string]int{},
			owned: map[string]bool{}},
		typing: map[string]chan struct{}{},
	}
	r.gate = newGate(cfg.Store, cfg.Access, r.Send)
	r.idle = sync.NewCond(&r.mu)
	if cfg.Outbox != nil {
		r.outbox = newOutbox(r, cfg.Outbox, cfg.OutboxConfig, cfg.Now)
	}
	for _, ch := range cfg.Channels {
		r.channels[ch.Name()] = ch
	}
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
		r.outbox.load(ctx)
		r.workers.Add(1)
		go func() {
			defer r.workers.Done()
			r.outbox.run(r.base)
		}()
	}
	if len(r.cfg.Interceptors) > 0 {
		r.workers.Add(1)
		go func() {
			defer r.workers.Done()
			r.sweep(r.base)
		}()
	}
	if r.cfg.Cluster != nil {
		// Pending messages belong to the chats' owners; the poll takes
		// those of chats nobody owns, resuming their unfinished turns.
		r.workers.Add(1)
		go r.poll()
		return nil
	}
	pending, err := r.cfg.Store.PendingInbox(ctx)
	if err != nil {
		return fmt.Errorf("router: load pending messages: %w", err)
	}
	pendingIDs := map[int64]bool{}
	for _, it := range pending {
		var in channels.Inbound
		if err := json.Unmarshal(it.Payload, &in); err != nil {
			r.log.Error("stored message unreadable; skipping it", "inbox_id", it.ID, "err", err)
			_ = r.cfg.Store.FinishInbox(ctx, it.ID, store.InboxSkipped)
			continue
		}
		pendingIDs[it.ID] = true
		r.log.Info("resuming unfinished message", "inbox_id", it.ID, "channel", in.Channel, "chat", in.ChatID)
		r.enqueue(item{inboxID: it.ID, in: in})
	}
	// Turns left running by a crash and not tied to a pending message can
	// not be resumed: record them as failed so the history stays honest.
	running, err := r.cfg.Store.RunningTurns(ctx)
	if err != nil {
		return fmt.Errorf("router: load running turns: %w", err)
	}
	for _, t := range running {
		if t.InboxID != 0 && pendingIDs[t.InboxID] {
			continue
		}
		_ = r.cfg.Store.FinishTurn(ctx, t.ID, store.TurnEnd{StopReason: string(agent.StopCancelled),
			Status: store.TurnCancelled, Steps: t.Steps, Error: "interrupted by a restart"})
	}
	return nil
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
	if r.cfg.Cluster != nil && r.inProcess(in.Channel) {
		unpin, err := r.pin(ctx, in.Channel, in.ChatID)
		if err != nil {
			return err
		}
		defer unpin()
	}
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
	if r.cfg.Cluster != nil {
		// Stored: from here the chat's owner answers it, this replica if it
		// can take the chat, else the one that has it. A replica whose turn
		// slots are all busy leaves a new chat to one with room (the polls).
		if !r.mayTake(in.Channel, in.ChatID) {
			return nil
		}
		if err := r.takeChat(ctx, in.Channel, in.ChatID); err != nil {
			log.Warn("stored a message but could not take its chat; the poll will", "err", err)
		}
		return nil
	}
	_, err = r.dispatch(ctx, id, in, true)
	return err
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
	return r.send(ctx, in, text, nil)
}

// send is Send with the durable record of the reply's parts, if any.
func (r *Router) send(ctx context.Context, in channels.Inbound, text string, parts channels.Parts) (string, error) {
	r.mu.Lock()
	ch := r.channels[in.Channel]
	r.mu.Unlock()
	if ch == nil {
		return "", fmt.Errorf("router: no channel %q", in.Channel)
	}
	out := outbound(in, r.outText(text))
	out.Parts = parts
	// The mark tells a channel that pairs replies with requests (the HTTP
	// API) which message this answers.
	id, err := ch.Send(channels.WithInbound(ctx, in), out)
	// A preview dropped by outbound pacing (a queue notice) is not a
	// failed send; the adapter counts it as paced.
	if r.cfg.OnSend != nil && !errors.Is(err, channels.ErrPaced) {
		r.cfg.OnSend(in.Channel, err)
	}
	return id, err
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
		if len(q.items) == 0 && r.cfg.Cluster != nil && r.base.Err() == nil && !q.handed {
			q.handed = true
			r.mu.Unlock()
			released := r.handBack(q.channel, q.chat) // may queue more
			r.mu.Lock()
			q.released = q.released || released
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
		q.handed = false
		plain := it.plain()
		retake := r.cfg.Cluster != nil && (q.released || !plain)
		q.released = false
		r.mu.Unlock()

		skip := false
		switch {
		case retake && !r.holdFor(ctx, q, it):
			skip = true // stopping; a message stays pending, a job is abandoned below
			r.mu.Lock()
			q.released = true
			r.mu.Unlock()
		case r.cfg.Cluster != nil && plain && !r.stillPending(ctx, it.inboxID):
			skip = true // answered meanwhile by the replica that had the chat
		}
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
		if r.cfg.Cluster != nil && plain && !r.requeued(q, it) {
			r.unclaim(it.inboxID)
		}
		abandonJobs([]item{it}, r.dropReason()) // a no-op unless a job ended without running
		cancel()
		r.mu.Lock()
		q.cancel = nil
		r.mu.Unlock()
	}
}

// observeLoad reports r.running to Config.Load; r.mu is held.
func (r *Router) observeLoad() {
	if r.cfg.Load != nil {
		r.cfg.Load(r.running)
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
