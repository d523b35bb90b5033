package router

import (
	"context"
	"log/slog"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
)

// The router routes; features that hold a chat's conversation between
// turns (approvals, plans: packages approvals and plans) and background
// work (package delegate) live outside it. They plug in through two small
// interfaces, Interceptor and Tasks, and act in chats through Chats, which
// the router lends them when it starts.

// An Interceptor holds a chat's conversation for the user's answer between
// turns: approvals (a turn paused before tool calls that need consent) and
// plans (a task run step by step, with feedback after each). Each declares
// the store it needs itself. The router consults its interceptors in order
// (Config.Interceptors):
//
//   - Start, once from Router.Start, with the router's lifetime (ctx ends
//     at shutdown) and the chats to act in.
//   - Intercept, for every stored message before it is queued: true when
//     the message was an answer it waited for (or a button of its own),
//     which consumes it. The first that consumes it wins.
//
// An interceptor that does more says so by implementing the optional
// interfaces below (Taker, Pauser, Stopper, Sweeper), which the router
// discovers by type assertion.
//
// Work an interceptor does in a chat (a resumed turn, a plan step) goes
// through Chats.Queue, in the chat's FIFO.
type Interceptor interface {
	Start(ctx context.Context, chats Chats)
	Intercept(ctx context.Context, in channels.Inbound) (consumed bool, err error)
}

// A Taker is an Interceptor that may handle a message itself instead of
// its agent turn (a /plan). Take is called for every queued message that
// would start an agent turn: true when it handled the message. prepare
// computes what the turn would add (Config.Hooks.Prepare), once.
type Taker interface {
	Take(ctx context.Context, in channels.Inbound, prepare func() Prepared) bool
}

// A Pauser is an Interceptor that takes over a turn that stopped with
// agent.StopRequiresApproval: Paused is called with the message and the
// turn's result.
type Pauser interface {
	Paused(ctx context.Context, in channels.Inbound, inboxID int64, res agent.Result)
}

// A Stopper is an Interceptor that has something to stop on /stop in the
// chat (after the chat's queue was dropped and its turn cancelled): Stop
// returns the reply when it stopped something. The first that stops wins.
type Stopper interface {
	Stop(ctx context.Context, in channels.Inbound) (reply string, stopped bool)
}

// A Sweeper is an Interceptor with work that can wait too long (expired
// approvals, plans nobody answered): Sweep is called every minute.
type Sweeper interface {
	Sweep(ctx context.Context)
}

// Tasks is the chats' background work (delegate.Tasks): Start is called
// once from Router.Start (ctx ends at shutdown), /tasks lists a chat's
// work (Describe), /stop cancels it (Cancel), and Shutdown waits for it
// (Wait, after ctx ended).
type Tasks interface {
	Start(ctx context.Context, chats Chats)
	Describe(channel, chat string) string
	Cancel(channel, chat string) int
	Wait()
}

// Chats is what the router lends its collaborators to act in chats, from
// Start on. *Router implements it.
type Chats interface {
	// Queue runs fn in the chat of in, in its FIFO like a message: after a
	// running turn, sharing the limit on concurrent turns; /stop and
	// shutdown cancel its ctx.
	Queue(in channels.Inbound, fn func(ctx context.Context))
	// Send sends text to the chat of in (quoting in.MessageID in groups).
	Send(ctx context.Context, in channels.Inbound, text string) (string, error)
	// Channel returns the running channel of that name, or nil.
	Channel(name string) channels.Channel
	// Typing shows the chat's typing indicator until stop is called.
	Typing(ctx context.Context, in channels.Inbound) (stop func())
	// RunTurn runs an agent turn in a chat, bound to it like a message's.
	RunTurn(ctx context.Context, t ChatTurn) agent.Result
	// ShuttingDown reports whether the router is stopping (as opposed to a
	// /stop cancelling a chat's work).
	ShuttingDown() bool
}

// ChatTurn is an agent turn a collaborator runs in a chat (Chats.RunTurn),
// from work it queued: a resumed turn, a plan step.
type ChatTurn struct {
	// In is the message the turn is for: it decides the skills and context
	// (Config.Hooks.Prepare) and is what observers see.
	In channels.Inbound
	// Reply is where and how the turn's messages go: its chat, and the
	// message quoted in groups (none when its MessageID is empty).
	Reply             channels.Inbound
	ChatID, SessionID int64 // the stored chat and session
	// InboxID is the message the turn answers; its messages are recorded
	// as that message's deliveries, by TurnID until the turn reports its
	// own id (a resumed turn knows it from the start).
	InboxID, TurnID int64
	// Unrecorded: its messages are not recorded as deliveries (plan steps).
	Unrecorded bool
	// Adjust sets what differs from a message's turn (resume, resolution,
	// kind, input, step cap); may be nil.
	Adjust func(*agent.Turn)
	// Log logs the turn's failed delivery records; nil: the router's.
	Log *slog.Logger
}

var _ Chats = (*Router)(nil)

// Queue implements Chats.
func (r *Router) Queue(in channels.Inbound, fn func(ctx context.Context)) {
	r.enqueue(item{in: in, run: fn})
}

// Channel implements Chats.
func (r *Router) Channel(name string) channels.Channel {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.channels[name]
}

// RunTurn implements Chats.
func (r *Router) RunTurn(ctx context.Context, t ChatTurn) agent.Result {
	log := t.Log
	if log == nil {
		log = r.log.With("channel", t.In.Channel, "chat", t.In.ChatID)
	}
	binding := r.bindChatTurn(t, log)
	return r.cfg.Agent.Run(ctx, r.turnFor(ctx, t.In, t.ChatID, t.SessionID, t.InboxID, binding, nil, t.Adjust))
}

// ShuttingDown implements Chats.
func (r *Router) ShuttingDown() bool { return r.base != nil && r.base.Err() != nil }

// sweep runs the interceptors' Sweep every minute until ctx ends.
func (r *Router) sweep(ctx context.Context) {
	tick := r.cfg.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
			for _, ic := range r.cfg.Interceptors {
				if sw, ok := ic.(Sweeper); ok {
					sw.Sweep(ctx)
				}
			}
		}
	}
}

// intercept offers a stored message to the interceptors; true: consumed.
func (r *Router) intercept(ctx context.Context, in channels.Inbound) (bool, error) {
	for _, ic := range r.cfg.Interceptors {
		if consumed, err := ic.Intercept(ctx, in); err != nil || consumed {
			return consumed, err
		}
	}
	return false, nil
}

// take offers a queued message to the interceptors before its turn; true:
// one handled it.
func (r *Router) take(ctx context.Context, in channels.Inbound, prepare func() Prepared) bool {
	for _, ic := range r.cfg.Interceptors {
		if tk, ok := ic.(Taker); ok && tk.Take(ctx, in, prepare) {
			return true
		}
	}
	return false
}
