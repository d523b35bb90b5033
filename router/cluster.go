package router

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/store"
)

// Cluster is the router's view of the other replicas sharing the store
// (cluster.Replica). With one, a chat's messages are processed only by the
// replica that holds the chat's lease:
//
//   - Deliver stores a message, then takes the chat if it can; a chat that
//     another live replica owns is left to it.
//   - A poll every PollInterval takes chats with pending messages that
//     nobody owns: messages another replica took in while this one owned
//     the chat, and the chats of a replica that died (after the lease TTL).
//   - A chat's queue, once empty, gives the lease back unless messages of
//     the chat are pending, so chats move to where the work arrives and a
//     job (scheduled on one replica) can take any chat.
//
// An inbound message is processed only while it is pending in the store and
// its chat's lease is held; the lease cannot be given back while a message
// of the chat is pending, so the two together make it processed once.
type Cluster interface {
	AcquireChat(ctx context.Context, channel, chat string) (bool, error)
	ReleaseChat(ctx context.Context, channel, chat string) (bool, error)
	Claimable(ctx context.Context) ([]store.InboxItem, error)
	PendingOf(ctx context.Context, channel, chat string) ([]store.InboxItem, error)
	InboxPending(ctx context.Context, id int64) (bool, error)
	PollInterval() time.Duration
}

// leased is the owner of a replica among others (Config.Cluster): it
// answers the chats whose lease it holds. Its maps are guarded by
// Router.mu.
type leased struct {
	r *Router
	c Cluster
	// Messages taken by this process, and chats whose lease to give back.
	inflight map[int64]bool
	held     map[string]bool
	pinned   map[string]int  // chats a request waits on here (InProcessReplier)
	owned    map[string]bool // chats whose lease this process holds (see acquired)
	takeMu   [64]sync.Mutex  // takeChat, striped by chat
}

func newLeased(r *Router, c Cluster) *leased {
	return &leased{r: r, c: c, inflight: map[int64]bool{}, held: map[string]bool{}, pinned: map[string]int{},
		owned: map[string]bool{}}
}

// start leaves pending messages to the chats' owners; the poll takes those
// of chats nobody owns, resuming their unfinished turns.
func (l *leased) start(context.Context) error {
	l.r.workers.Add(1)
	go l.poll()
	return nil
}

// pin takes the chat of a message that must be answered here (an
// InProcessReplier's) before it is stored.
func (l *leased) pin(ctx context.Context, in channels.Inbound) (func(), error) {
	if !l.r.inProcess(in.Channel) {
		return func() {}, nil
	}
	return l.pinChat(ctx, in.Channel, in.ChatID)
}

// stored: from here the chat's owner answers the message, this replica if
// it can take the chat, else the one that has it. A replica whose turn
// slots are all busy leaves a new chat to one with room (the polls).
func (l *leased) stored(ctx context.Context, _ int64, in channels.Inbound, log *slog.Logger) error {
	if !l.mayTake(in.Channel, in.ChatID) {
		return nil
	}
	if err := l.takeChat(ctx, in.Channel, in.ChatID); err != nil {
		log.Warn("stored a message but could not take its chat; the poll will", "err", err)
	}
	return nil
}

// idle offers the chat's lease back once per emptied queue.
func (l *leased) idle(q *chatQueue) {
	r := l.r
	if r.base.Err() != nil || q.handed {
		return
	}
	q.handed = true
	r.mu.Unlock()
	released := l.handBack(q.channel, q.chat) // may queue more
	r.mu.Lock()
	q.released = q.released || released
}

// next: the chat is taken again before a job, an interceptor's work, or a
// message queued after the lease was given back.
func (l *leased) next(q *chatQueue, it item) bool {
	q.handed = false
	retake := q.released || !it.plain()
	q.released = false
	return retake
}

func (l *leased) ready(ctx context.Context, q *chatQueue, it item, retake bool) bool {
	switch {
	case retake && !l.holdFor(ctx, q, it):
		// Stopping; a message stays pending, a job is abandoned.
		l.r.mu.Lock()
		q.released = true
		l.r.mu.Unlock()
		return false
	case it.plain() && !l.stillPending(ctx, it.inboxID):
		return false // answered meanwhile by the replica that had the chat
	}
	return true
}

func (l *leased) dropped(it item) {
	if it.plain() {
		l.unclaim(it.inboxID)
	}
}

func (l *leased) done(q *chatQueue, it item) {
	if it.plain() && !l.requeued(q, it) {
		l.unclaim(it.inboxID)
	}
}

// claim marks a stored message as taken by this process (queued, running,
// or being dispatched); false: it is already.
func (l *leased) claim(id int64) bool {
	r := l.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.inflight[id] {
		return false
	}
	l.inflight[id] = true
	return true
}

func (l *leased) unclaim(id int64) {
	r := l.r
	r.mu.Lock()
	delete(l.inflight, id)
	r.mu.Unlock()
}

// takeChat takes the chat's lease if no other live replica holds it and
// dispatches its pending messages, oldest first, that this process has not
// taken yet.
func (l *leased) takeChat(ctx context.Context, channel, chat string) error {
	r := l.r
	r.mu.Lock()
	closing := r.closing
	r.mu.Unlock()
	if closing {
		return nil
	}
	// One take at a time per chat, or two (the poll and a worker giving
	// the chat back) could queue its messages out of order.
	mu := &l.takeMu[takeStripe(channel, chat)]
	mu.Lock()
	defer mu.Unlock()
	c := l.c
	ok, err := c.AcquireChat(ctx, channel, chat)
	if err != nil || !ok {
		return err
	}
	l.acquired(ctx, channel, chat)
	items, err := c.PendingOf(ctx, channel, chat)
	if err != nil {
		r.mu.Lock()
		l.held[chatKey(channel, chat)] = true // given back by a later poll
		r.mu.Unlock()
		return err
	}
	for _, it := range items {
		if !l.claim(it.ID) {
			continue
		}
		// Listed before it was finished here a moment ago?
		if pending, err := c.InboxPending(ctx, it.ID); err != nil || !pending {
			l.unclaim(it.ID)
			continue
		}
		var in channels.Inbound
		if err := json.Unmarshal(it.Payload, &in); err != nil {
			r.log.Error("stored message unreadable; skipping it", "inbox_id", it.ID, "err", err)
			_ = r.cfg.Store.FinishInbox(ctx, it.ID, store.InboxSkipped)
			l.unclaim(it.ID)
			continue
		}
		queued, err := r.dispatch(ctx, it.ID, in, false)
		if !queued {
			l.unclaim(it.ID)
		}
		if err != nil {
			r.log.Error("dispatch stored message", "inbox_id", it.ID, "channel", channel, "chat", chat, "err", err)
		}
	}
	// Whatever was queued, the next poll gives the chat back if no queue
	// has it then: its worker may be past giving it back already.
	r.mu.Lock()
	l.held[chatKey(channel, chat)] = true
	r.mu.Unlock()
	return nil
}

// inProcess reports whether channel's replies must come from this process.
func (r *Router) inProcess(channel string) bool {
	r.mu.Lock()
	ch := r.channels[channel]
	r.mu.Unlock()
	p, ok := ch.(channels.InProcessReplier)
	return ok && p.RepliesInProcess()
}

// pin takes the chat for a message that must be answered here, waiting
// while another replica answers the chat; the lease is kept until unpin.
func (l *leased) pinChat(ctx context.Context, channel, chat string) (unpin func(), err error) {
	r := l.r
	k := chatKey(channel, chat)
	r.mu.Lock()
	l.pinned[k]++
	r.mu.Unlock()
	unpin = func() {
		r.mu.Lock()
		if l.pinned[k]--; l.pinned[k] == 0 {
			delete(l.pinned, k)
		}
		l.held[k] = true // given back by the poll once idle
		r.mu.Unlock()
	}
	if !l.hold(ctx, channel, chat) {
		unpin()
		return nil, fmt.Errorf("router: waiting for chat %s/%s: %w", channel, chat, ctx.Err())
	}
	return unpin, nil
}

// mayTake reports whether this replica should take the chat now: one it
// has (queued, or held since the last poll) always; a new one only while
// fewer chats are busy here than there are turn slots, so that under load
// new chats go to replicas with room (long polling takes every update in on
// one replica).
func (l *leased) mayTake(channel, chat string) bool {
	r := l.r
	k := chatKey(channel, chat)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.queues[k] != nil || l.held[k] || l.pinned[k] > 0 || r.running < r.cfg.MaxConcurrentTurns
}

// poll takes the chats with pending messages that this replica may own,
// and gives back chats it holds without work, until the router stops.
func (l *leased) poll() {
	r := l.r
	defer r.workers.Done()
	t := time.NewTicker(l.c.PollInterval())
	defer t.Stop()
	for {
		l.pollOnce(r.base)
		select {
		case <-r.base.Done():
			return
		case <-t.C:
		}
	}
}

func (l *leased) pollOnce(ctx context.Context) {
	r := l.r
	items, err := l.c.Claimable(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("look for messages to take over", "err", err)
		}
		return
	}
	// Chats with a message this process has not taken, in order of their
	// oldest such message.
	var chats [][2]string
	seen := map[string]bool{}
	r.mu.Lock()
	for _, it := range items {
		key := chatKey(it.Channel, it.ChatKey)
		if seen[key] || l.inflight[it.ID] {
			continue
		}
		seen[key] = true
		chats = append(chats, [2]string{it.Channel, it.ChatKey})
	}
	r.mu.Unlock()
	for _, c := range chats {
		if ctx.Err() != nil {
			return
		}
		if !l.mayTake(c[0], c[1]) {
			continue
		}
		if err := l.takeChat(ctx, c[0], c[1]); err != nil && ctx.Err() == nil {
			r.log.Warn("take over a chat", "channel", c[0], "chat", c[1], "err", err)
		}
	}
	l.releaseIdle(ctx)
}

// releaseIdle gives back the chats taken since the last poll that have no
// queue now (a busy chat's worker gives it back when done, and the next
// poll checks again).
func (l *leased) releaseIdle(ctx context.Context) {
	r := l.r
	r.mu.Lock()
	var idle []string
	for k := range l.held {
		if r.queues[k] == nil {
			idle = append(idle, k)
			delete(l.held, k)
		}
	}
	r.mu.Unlock()
	for _, k := range idle {
		channel, chat := splitKey(k)
		released, err := l.release(ctx, channel, chat, func() bool { return r.queues[k] == nil })
		if err != nil || !released {
			// Not released: messages are pending (the next poll takes them
			// here, the chat is still this replica's), or it is busy again.
			r.mu.Lock()
			l.held[k] = true
			r.mu.Unlock()
		}
	}
}

// release gives the chat's lease back if idle() (checked under r.mu) and
// no request waits for it here (pinned), unless messages of the chat are
// pending. It runs under the chat's take lock, so that it cannot undo a
// take that has just succeeded.
func (l *leased) release(ctx context.Context, channel, chat string, idle func() bool) (bool, error) {
	r := l.r
	mu := &l.takeMu[takeStripe(channel, chat)]
	mu.Lock()
	defer mu.Unlock()
	r.mu.Lock()
	ok := l.pinned[chatKey(channel, chat)] == 0 && idle()
	r.mu.Unlock()
	if !ok {
		return false, nil
	}
	released, err := l.c.ReleaseChat(ctx, channel, chat)
	if released {
		r.mu.Lock()
		delete(l.owned, chatKey(channel, chat))
		r.mu.Unlock()
	}
	return released, err
}

// acquired is called, under the chat's take lock, each time this process
// has acquired or renewed the chat's lease. When the chat was not already
// this process's, no turn of it runs here, and a turn of it still marked
// running was cut off where its replica died (the lease passes on only
// after that): one whose message is pending is resumed with that message;
// any other (a job's, or one whose message was finished) is recorded as
// cancelled, so that it does not stay running for ever.
func (l *leased) acquired(ctx context.Context, channel, chat string) {
	r := l.r
	k := chatKey(channel, chat)
	r.mu.Lock()
	had := l.owned[k]
	l.owned[k] = true
	r.mu.Unlock()
	if had {
		return
	}
	turns, err := r.cfg.Store.RunningTurnsOf(ctx, channel, chat)
	if err != nil {
		r.log.Warn("look for turns a stopped replica left running", "channel", channel, "chat", chat, "err", err)
		r.mu.Lock()
		delete(l.owned, k) // look again at the next acquisition
		r.mu.Unlock()
		return
	}
	for _, t := range turns {
		if t.InboxID != 0 {
			if pending, err := l.c.InboxPending(ctx, t.InboxID); err != nil || pending {
				continue // resumed with its message (or looked at again next time)
			}
		}
		err := r.cfg.Store.FinishTurn(context.WithoutCancel(ctx), t.ID, store.TurnEnd{StopReason: string(agent.StopCancelled),
			Status: store.TurnCancelled, Steps: t.Steps, Error: "interrupted: the replica running it stopped"})
		if err != nil {
			r.log.Warn("finish a turn a stopped replica left running", "turn_id", t.ID, "err", err)
			continue
		}
		r.log.Info("finished a turn a stopped replica left running", "turn_id", t.ID, "kind", t.Kind, "channel", channel, "chat", chat)
	}
}

// handBack gives the chat's lease back once its queue is empty; if messages
// of the chat are pending (taken in by another replica meanwhile), it keeps
// the lease and queues them. It reports whether the lease was given back.
func (l *leased) handBack(channel, chat string) bool {
	r := l.r
	released, err := l.release(r.base, channel, chat, func() bool { return true })
	if err != nil {
		if r.base.Err() == nil {
			r.log.Warn("give a chat back", "channel", channel, "chat", chat, "err", err)
		}
		r.mu.Lock()
		l.held[chatKey(channel, chat)] = true
		r.mu.Unlock()
		return false
	}
	if !released {
		if err := l.takeChat(r.base, channel, chat); err != nil && r.base.Err() == nil {
			r.log.Warn("take a chat's pending messages", "channel", channel, "chat", chat, "err", err)
		}
	}
	return released
}

// hold waits until this replica holds the chat's lease, or ctx ends
// (false).
func (l *leased) hold(ctx context.Context, channel, chat string) bool {
	r := l.r
	wait := l.c.PollInterval()
	mu := &l.takeMu[takeStripe(channel, chat)]
	for {
		mu.Lock()
		ok, err := l.c.AcquireChat(ctx, channel, chat)
		if err == nil && ok {
			l.acquired(ctx, channel, chat)
		}
		mu.Unlock()
		if err == nil && ok {
			return true
		}
		if err != nil && ctx.Err() == nil {
			r.log.Warn("take a chat", "channel", channel, "chat", chat, "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// holdFor takes the queue's chat again before it (a job, or a message
// queued after the lease was given back); false if ctx (or the job's own)
// ended first.
func (l *leased) holdFor(ctx context.Context, q *chatQueue, it item) bool {
	if it.job != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(it.job.ctx, cancel)()
	}
	return l.hold(ctx, q.channel, q.chat)
}

// requeued reports whether afterProcess put the message back at the head
// of its queue (the store failed it and it is tried again).
func (l *leased) requeued(q *chatQueue, it item) bool {
	r := l.r
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(q.items) > 0 && q.items[0].inboxID == it.inboxID && q.items[0].plain()
}

// stillPending reports whether a queued message is still to be processed
// (another replica may have answered it while this one waited for its chat).
func (l *leased) stillPending(ctx context.Context, id int64) bool {
	r := l.r
	pending, err := l.c.InboxPending(ctx, id)
	if err != nil {
		r.log.Warn("check a queued message", "inbox_id", id, "err", err)
		return true // process it: the turn's own store writes fail if the store does
	}
	return pending
}

// takeStripe picks the takeMu lock of a chat.
func takeStripe(channel, chat string) int {
	h := fnv.New32a()
	h.Write([]byte(channel))
	h.Write([]byte{0})
	h.Write([]byte(chat))
	return int(h.Sum32() % uint32(len(leased{}.takeMu)))
}

func splitKey(k string) (channel, chat string) {
	channel, chat, _ = strings.Cut(k, "\x00")
	return channel, chat
}
