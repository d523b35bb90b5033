package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// When the model is unavailable (the model client gave up after its
// retries on a connection refused, a 5xx, a 429 asking for too long a
// wait, a broken stream), a message's turn stops with
// agent.StopModelUnavailable, left open with its committed steps, and the
// message stays pending, as with a store that takes no writes
// (storefaults.go): the chat is told once, and the message is tried again
// at the head of its chat's queue after a growing wait (or what the server
// asked for in Retry-After, if longer), or sooner when a
// model call succeeds anywhere (Config.ModelWait.Answered), while other chats
// go on. A message that waited Config.ModelWait.MaxAge is given up: the
// user is told, the turn is recorded as failed, and an ERROR is logged and
// counted. A restart keeps the message pending and resumes its turn.
//
// Messages of channels whose replies go to a waiting requester (the chat
// API, the terminal: channels.InProcessReplier) are not held: their requester is
// told at once that the model could not be reached, as before.
const (
	firstModelRetry = time.Second
	maxModelRetry   = 30 * time.Second
	// DefaultModelOutageMaxAge is how long a message waits for the model
	// by default: long enough for a provider's incident or a local model
	// server's restart, short enough that a late answer is still wanted.
	DefaultModelOutageMaxAge = time.Hour
)

// modelOutage is process's error for a message whose turn stopped because
// the model is unavailable.
type modelOutage struct {
	turnID int64
	steps  int
	err    error
	// resumed is the turn the attempt resumed, as process read it (zero:
	// it began a new one), so that the turn is read once per attempt.
	resumed store.Turn
}

func (e *modelOutage) Error() string {
	return fmt.Sprintf("router: turn %d: the model is unavailable: %v", e.turnID, e.err)
}

func (e *modelOutage) Unwrap() error { return e.err }

// modelWaits is what the router keeps of the messages waiting for the
// model.
type modelWaits struct {
	mu      sync.Mutex
	since   map[int64]time.Time      // inbox id → when its turn first found the model unavailable
	retry   map[string]time.Duration // chat → its next wait
	stop    chan struct{}            // closed at shutdown: waiting messages stay pending for the restart
	stopped bool

	held, answered, givenUp uint64
}

// init makes the maps; w.mu is held.
func (w *modelWaits) init() {
	if w.since == nil {
		w.since, w.retry = map[int64]time.Time{}, map[string]time.Duration{}
		w.stop = make(chan struct{})
	}
}

// shutdown ends every wait: the messages stay pending for the restart.
func (w *modelWaits) shutdown() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.init()
	if !w.stopped {
		w.stopped = true
		close(w.stop)
	}
}

// ModelWaitStats counts the messages that waited for the model.
type ModelWaitStats struct {
	Waiting  int    // waiting now (held, not answered or given up yet)
	Held     uint64 // held since the start
	Answered uint64 // held, then answered
	GivenUp  uint64 // held until ModelOutageMaxAge, then given up
}

// ModelWaits reports the messages that waited for the model, for the
// metrics.
func (r *Router) ModelWaits() ModelWaitStats {
	w := &r.waits
	w.mu.Lock()
	defer w.mu.Unlock()
	return ModelWaitStats{Waiting: len(w.since), Held: w.held, Answered: w.answered, GivenUp: w.givenUp}
}

// modelAnswered follows up on a message of chat key that was handled: the
// chat's wait and notice start again, and a held message counts as
// answered.
func (r *Router) modelAnswered(key string, it item) {
	w := &r.waits
	w.mu.Lock()
	defer w.mu.Unlock()
	w.init()
	delete(w.retry, key)
	r.modelNotices.reset(key)
	if since, ok := w.since[it.inboxID]; ok && it.plain() && r.base.Err() == nil { // not a checkpoint at shutdown
		delete(w.since, it.inboxID)
		w.answered++
		r.log.Info("answered a message that waited for the model", "channel", it.in.Channel, "chat", it.in.ChatID,
			"inbox_id", it.inboxID, "waited", time.Since(since).Round(time.Millisecond))
	}
}

// waitForModel holds a message whose turn found the model unavailable, as
// described above.
func (r *Router) waitForModel(ctx context.Context, key string, q *chatQueue, it item, mo *modelOutage) {
	log := r.log.With("channel", it.in.Channel, "chat", it.in.ChatID, "inbox_id", it.inboxID, "turn_id", mo.turnID)
	maxAge := r.cfg.ModelWait.MaxAge
	if maxAge <= 0 {
		maxAge = DefaultModelOutageMaxAge
	}
	now := time.Now()
	began := r.heldSince(it, mo, now)
	w := &r.waits
	w.mu.Lock()
	w.init()
	since, again := w.since[it.inboxID]
	if !again {
		since = began
		w.since[it.inboxID] = began
		w.held++
	}
	wait := max(w.retry[key], firstModelRetry)
	w.retry[key] = min(2*wait, maxModelRetry)
	stop := w.stop
	w.mu.Unlock()

	waited := now.Sub(since)
	if waited >= maxAge {
		r.giveUpOnModel(ctx, key, it, mo, waited, log)
		return
	}
	if le, ok := errors.AsType[*llm.Error](mo.err); ok && le.RetryAfter > wait {
		wait = le.RetryAfter // what the server asked for (over the client's budget)
	}
	wait = min(wait, maxAge-waited)
	if again {
		log.Info("the model is still unavailable; the message stays pending", "waited", waited.Round(time.Millisecond), "wait", wait, "err", mo.err)
	} else {
		log.Warn("the model is unavailable; the message stays pending and is tried again", "wait", wait, "max_age", maxAge, "err", mo.err)
	}
	r.tellModelDown(ctx, it.in)

	var back <-chan struct{}
	if r.cfg.ModelWait.Answered != nil {
		back = r.cfg.ModelWait.Answered()
	}
	switch sleepForModel(ctx, wait, back, stop) {
	case waitStopped:
		return // shutting down: pending for the restart
	case waitCancelled:
		if r.base.Err() == nil { // /stop
			r.forgetModelWait(it)
			bg := context.WithoutCancel(ctx)
			_ = r.cfg.Store.FinishTurn(bg, mo.turnID, store.TurnEnd{StopReason: string(agent.StopCancelled),
				Status: store.TurnCancelled, Steps: mo.steps, Error: "stopped while waiting for the model", FinishInbox: true})
			_ = r.cfg.Store.FinishInbox(bg, it.inboxID, store.InboxSkipped)
		}
		return
	}
	r.retryFirst(q, it) // its turn was begun: it resumes
}

// heldSince is when the message began to wait for the model, as far as a
// process that has not held it yet can tell: the start of its open turn,
// which a restart resumes (its first attempt met the outage), so that
// ModelOutageMaxAge counts across restarts; now for a message this
// process has not tried before, or when the store could not say. The turn
// is the one process read before the attempt (mo.resumed), not read again.
func (r *Router) heldSince(it item, mo *modelOutage, now time.Time) time.Time {
	if it.fresh || mo.turnID == 0 {
		return now
	}
	r.waits.mu.Lock()
	_, known := r.waits.since[it.inboxID]
	r.waits.mu.Unlock()
	if known {
		return now // unused: the wait already has its start
	}
	t := mo.resumed
	if t.ID == 0 || t.ID != mo.turnID || t.StartedAt.IsZero() || t.StartedAt.After(now) {
		return now
	}
	return t.StartedAt
}

type waitEnd int

const (
	waitOver      waitEnd = iota // try again
	waitStopped                  // shutdown
	waitCancelled                // the message's context ended (/stop)
)

// sleepForModel waits at least firstModelRetry (or wait, if shorter), then
// until wait is over or back is closed (a model call succeeded), whichever
// comes first.
func sleepForModel(ctx context.Context, wait time.Duration, back, stop <-chan struct{}) waitEnd {
	least := min(wait, firstModelRetry)
	t := time.NewTimer(least)
	defer t.Stop()
	inLeast, woken := true, false
	for {
		select {
		case <-t.C:
			if !inLeast || woken || wait <= least {
				return waitOver
			}
			inLeast = false
			t.Reset(wait - least)
		case <-back:
			back = nil
			if !inLeast {
				return waitOver
			}
			woken = true
		case <-stop:
			return waitStopped
		case <-ctx.Done():
			return waitCancelled
		}
	}
}

// forgetModelWait drops a held message that ends otherwise (/stop).
func (r *Router) forgetModelWait(it item) {
	w := &r.waits
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.since, it.inboxID)
}

// giveUpOnModel ends a message that waited for the model for too long:
// the user is told, the turn fails and the message is done.
func (r *Router) giveUpOnModel(ctx context.Context, key string, it item, mo *modelOutage, waited time.Duration, log *slog.Logger) {
	w := &r.waits
	w.mu.Lock()
	delete(w.since, it.inboxID)
	r.modelNotices.reset(key) // the chat's next message gets its own notice
	w.givenUp++
	w.mu.Unlock()
	log.Error("the model stayed unavailable; giving up on the message", "waited", waited.Round(time.Second), "err", mo.err)
	bg := context.WithoutCancel(ctx)
	text := fmt.Sprintf("Sorry, the language model has been unavailable for %s, so I couldn't answer this message. Please send it again later.", roughly(waited))
	if id, err := r.Send(ctx, it.in, text); err != nil {
		log.Warn("could not tell the user that their message was given up", "err", err)
	} else if err := r.cfg.Store.RecordDelivery(bg, it.inboxID, mo.turnID, id); err != nil {
		log.Warn("record delivery", "err", err)
	}
	err := r.cfg.Store.FinishTurn(bg, mo.turnID, store.TurnEnd{StopReason: string(agent.StopModelUnavailable), Status: store.TurnFailed,
		Steps: mo.steps, Error: "given up after the model was unavailable for " + waited.Round(time.Second).String() + ": " + mo.err.Error(),
		FinishInbox: true})
	if err != nil && !errors.Is(err, store.ErrTurnNotRunning) {
		log.Error("finish turn", "err", err)
	}
	if err := r.cfg.Store.FinishInbox(bg, it.inboxID, store.InboxDone); err != nil {
		log.Error("finish message", "err", err)
	}
}

// roughly renders a wait for people: "45 seconds", "12 minutes", "2 hours".
func roughly(d time.Duration) string {
	switch {
	case d < 2*time.Minute:
		return fmt.Sprintf("%d seconds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%d minutes", int(d.Minutes()))
	default:
		return fmt.Sprintf("%d hours", int(d.Hours()))
	}
}

// tellModelDown tells the chat, once until one of its messages is
// answered, that the model is unavailable and the message will be answered
// later.
func (r *Router) tellModelDown(ctx context.Context, in channels.Inbound) {
	r.modelNotices.tell(ctx, r, in, "Sorry, the language model is unavailable right now. I'll answer your message when it's back.")
}
