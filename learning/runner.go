// Package learning runs the work that follows a turn: after the reply is
// out, background jobs (memory extraction, profile updates, skill review)
// read what the user said since they last looked and learn from it. The
// runner gives each job its own context and timeout on a bounded queue,
// coalesces work per user and chat, gates it by frequency, contains panics,
// counts and retries failures, and on shutdown waits for running jobs up to
// a deadline. Jobs keep a cursor per user and chat in the store and move it
// only in the transaction that commits what they learned, so a failed,
// cancelled or crashed run leaves nothing half done and the next run
// resumes where the last committed one stopped.
package learning

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

// Defaults of the runner, used where Config leaves a field zero.
const (
	// DefaultEveryNTurns runs a pass after every tenth turn of a user in a
	// chat (or sooner, when the chat pauses: DefaultIdleAfter): one model
	// call learns from ten turns, a small fraction of what they cost.
	DefaultEveryNTurns = 10
	// DefaultIdleAfter runs a pass once a chat has been quiet this long, so
	// what was said before a pause is learned without waiting for more
	// turns.
	DefaultIdleAfter = 3 * time.Minute
	// DefaultTimeout bounds one job run: a model call or two, with room for
	// a slow provider.
	DefaultTimeout = 60 * time.Second
	// DefaultQueueSize bounds the users and chats waiting for a run. Beyond
	// it new work is dropped (and counted): the cursors keep the messages,
	// so the next turn of that user picks them up.
	DefaultQueueSize = 64
	// DefaultWorkers runs two users' jobs at once: jobs mostly wait on the
	// model, and a small box must keep its cores for turns.
	DefaultWorkers = 2
	// DefaultRetryDelay is the wait before the first retry of a failed job,
	// doubled for each further attempt.
	DefaultRetryDelay = time.Minute
	// DefaultMaxRetries retries a failed job three times (1, 2 and 4
	// minutes later); after that it waits for the user's next turn.
	DefaultMaxRetries = 3
)

// Trigger is a finished turn handed to the runner: whose messages, in which
// chat, to learn from.
type Trigger struct {
	Channel string
	UserID  string // the platform user id
	ChatID  int64  // the store's chat id
	Group   bool   // a group chat: private memories and profiles stay out of it
	TurnID  int64  // the newest turn (coalesced triggers keep the newest)
	// Skills lists the skills active at the end of each turn, by turn id;
	// coalesced triggers merge their maps.
	Skills map[int64][]string
}

func (t Trigger) key() string {
	return t.Channel + "\x00" + t.UserID + "\x00" + strconv.FormatInt(t.ChatID, 10)
}

// Job is one kind of background work.
type Job struct {
	Name string
	// Wants reports whether the job has anything to do for the trigger;
	// nil means always.
	Wants func(Trigger) bool
	// Run does the work. It must return when ctx ends and commit what it
	// learned together with its cursor, so that a failed run can simply be
	// run again.
	Run func(ctx context.Context, t Trigger) error
}

// Config wires a Runner. Zero values take the defaults above.
type Config struct {
	Jobs        []Job
	EveryNTurns int // run after every Nth turn of a user in a chat
	// IdleAfter runs the jobs for every user with turns not yet learned from
	// in a chat once nothing new has happened there for this long; < 0:
	// only every Nth turn.
	IdleAfter  time.Duration
	Timeout    time.Duration // per job run
	QueueSize  int           // users and chats waiting
	Workers    int
	RetryDelay time.Duration
	MaxRetries int // < 0: never retry
	Logger     *slog.Logger
	// AfterFunc schedules a retry or an idle pass; nil uses time.AfterFunc.
	// It returns a function that cancels it.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
	// OnDisabled is called once, from a worker, when a job finds that the
	// model cannot make forced function calls (Unsupported) and the runner
	// turns learning off.
	OnDisabled func(reason error)
}

// Stats are the runner's counters since it started, for metrics and status.
type Stats struct {
	Triggers  uint64 // turns handed to Notify
	Gated     uint64 // skipped by the frequency gate (picked up by a later run)
	Coalesced uint64 // merged into work already waiting for the same user and chat
	Dropped   uint64 // refused because the queue was full (picked up later)
	Runs      uint64 // job runs started
	Succeeded uint64
	Failed    uint64 // job runs that returned an error, panicked or timed out
	Panics    uint64
	TimedOut  uint64
	Retries   uint64            // retries scheduled
	Failures  map[string]uint64 // failed runs by job name
	Queued    int               // waiting now
	Running   int               // running now
	// Disabled is why learning turned itself off (the model cannot make
	// forced function calls); nil while it runs.
	Disabled error
}

// Runner runs jobs in the background. Create it with NewRunner, then Start.
type Runner struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	cond     *sync.Cond
	base     context.Context
	cancel   context.CancelFunc
	started  bool
	closing  bool
	order    []string         // keys waiting, oldest first
	waiting  map[string]*task // key → its merged waiting work
	running  map[string]bool
	turns    map[string]int                // turns seen per key, for the gate
	carry    map[string]map[int64][]string // skills of gated turns, per key
	timers   map[int]func() bool           // pending retries
	idle     map[int64]*idleChat           // chats with turns waiting for a pause
	disabled error                         // set once: learning is off
	textOnly int                           // passes in a row answered with text instead of the forced call
	nextTick int
	active   int
	stats    Stats
	workers  sync.WaitGroup
}

// task is the work waiting for one key.
type task struct {
	trig    Trigger
	jobs    map[string]bool // nil: every job
	attempt int             // 0 for a first run
}

// NewRunner returns a runner with defaults applied.
func NewRunner(cfg Config) *Runner {
	if cfg.EveryNTurns <= 0 {
		cfg.EveryNTurns = DefaultEveryNTurns
	}
	if cfg.IdleAfter == 0 {
		cfg.IdleAfter = DefaultIdleAfter
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = DefaultRetryDelay
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.AfterFunc == nil {
		cfg.AfterFunc = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	r := &Runner{
		cfg: cfg, log: cfg.Logger.With("component", "learning"),
		waiting: map[string]*task{}, running: map[string]bool{}, turns: map[string]int{},
		carry: map[string]map[int64][]string{}, timers: map[int]func() bool{}, idle: map[int64]*idleChat{},
		stats: Stats{Failures: map[string]uint64{}},
	}
	r.cond = sync.NewCond(&r.mu)
	return r
}

// Start starts the workers. Jobs run under a context of their own, derived
// from ctx without its cancellation: Shutdown ends them.
func (r *Runner) Start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return
	}
	r.started = true
	r.base, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	for range r.cfg.Workers {
		r.workers.Add(1)
		go r.work()
	}
}

// idleChat is a chat whose turns wait for a pause: the newest trigger of
// each user with turns not yet run, and the timer that runs them.
type idleChat struct {
	users map[string]Trigger // key → newest trigger
	stop  func() bool
	gen   int // the timer's generation: a stale timer's run does nothing
}

// Notify hands the runner a finished turn. It never blocks: the work is
// queued at every Nth turn of the user in the chat (or merged into work
// waiting for the same user and chat, or dropped when the queue is full);
// other turns wait for the chat to pause (IdleAfter) and are run then. It
// reports whether work was queued or merged.
func (r *Runner) Notify(t Trigger) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started || r.closing || r.disabled != nil {
		return false
	}
	r.stats.Triggers++
	k := t.key()
	if len(t.Skills) > 0 {
		if r.carry[k] == nil {
			r.carry[k] = map[int64][]string{}
		}
		maps.Copy(r.carry[k], t.Skills)
	}
	r.turns[k]++
	ic := r.idle[t.ChatID]
	if r.turns[k] < r.cfg.EveryNTurns {
		r.stats.Gated++
		r.waitForPauseLocked(k, t)
		return false
	}
	if ic != nil {
		delete(ic.users, k)
		r.rearmLocked(t.ChatID, ic) // a new message: the pause starts again
	}
	return r.runNowLocked(k, t)
}

// runNowLocked queues a run for the key with its carried skills and starts
// its count of turns again.
func (r *Runner) runNowLocked(k string, t Trigger) bool {
	delete(r.turns, k)
	t.Skills = r.carry[k]
	delete(r.carry, k)
	return r.enqueueLocked(k, &task{trig: t})
}

// waitForPauseLocked remembers the user's turn until the chat pauses, and
// starts the chat's pause again.
func (r *Runner) waitForPauseLocked(k string, t Trigger) {
	if r.cfg.IdleAfter < 0 {
		return
	}
	ic := r.idle[t.ChatID]
	if ic == nil {
		ic = &idleChat{users: map[string]Trigger{}}
		r.idle[t.ChatID] = ic
	}
	ic.users[k] = t
	r.rearmLocked(t.ChatID, ic)
}

// rearmLocked (re)starts the chat's pause timer; a chat with nobody waiting
// is forgotten.
func (r *Runner) rearmLocked(chat int64, ic *idleChat) {
	if ic.stop != nil {
		ic.stop()
		ic.stop = nil
	}
	if len(ic.users) == 0 {
		delete(r.idle, chat)
		return
	}
	ic.gen++
	gen := ic.gen
	ic.stop = r.cfg.AfterFunc(r.cfg.IdleAfter, func() { r.paused(chat, gen) })
}

// paused runs the turns waiting in a chat that has been quiet for IdleAfter.
func (r *Runner) paused(chat int64, gen int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ic := r.idle[chat]
	if ic == nil || ic.gen != gen || r.closing || r.disabled != nil {
		return
	}
	delete(r.idle, chat)
	for _, k := range slices.Sorted(maps.Keys(ic.users)) {
		r.runNowLocked(k, ic.users[k])
	}
}

func (r *Runner) enqueueLocked(k string, t *task) bool {
	if w := r.waiting[k]; w != nil {
		w.merge(t)
		r.stats.Coalesced++
		return true
	}
	if len(r.order) >= r.cfg.QueueSize {
		r.stats.Dropped++
		r.log.Warn("learning queue full; this turn is learned from on the user's next run",
			"queue_size", r.cfg.QueueSize, "channel", t.trig.Channel, "user_id", t.trig.UserID, "chat_id", t.trig.ChatID)
		return false
	}
	r.waiting[k] = t
	r.order = append(r.order, k)
	r.cond.Signal()
	return true
}

// merge folds newer work into t: the newest turn, every turn's skills, and
// every job either asked for.
func (t *task) merge(o *task) {
	t.trig.TurnID = max(t.trig.TurnID, o.trig.TurnID)
	if len(o.trig.Skills) > 0 {
		if t.trig.Skills == nil {
			t.trig.Skills = map[int64][]string{}
		}
		maps.Copy(t.trig.Skills, o.trig.Skills)
	}
	if t.jobs == nil || o.jobs == nil {
		t.jobs = nil
	} else {
		maps.Copy(t.jobs, o.jobs)
	}
	t.attempt = min(t.attempt, o.attempt)
}

// work runs waiting tasks until shutdown, never two of the same key at once.
func (r *Runner) work() {
	defer r.workers.Done()
	for {
		r.mu.Lock()
		i := -1
		for {
			if r.closing {
				r.mu.Unlock()
				return
			}
			i = slices.IndexFunc(r.order, func(k string) bool { return !r.running[k] })
			if i >= 0 {
				break
			}
			r.cond.Wait()
		}
		k := r.order[i]
		r.order = slices.Delete(r.order, i, i+1)
		t := r.waiting[k]
		delete(r.waiting, k)
		r.running[k] = true
		r.active++
		r.mu.Unlock()

		r.runTask(k, t)

		r.mu.Lock()
		delete(r.running, k)
		r.active--
		r.cond.Broadcast()
		r.mu.Unlock()
	}
}

func (r *Runner) runTask(k string, t *task) {
	failed := map[string]bool{}
	for _, j := range r.cfg.Jobs {
		if t.jobs != nil && !t.jobs[j.Name] {
			continue
		}
		if j.Wants != nil && !j.Wants(t.trig) {
			continue
		}
		r.mu.Lock()
		closing := r.closing
		r.mu.Unlock()
		if closing {
			return // the cursors keep the rest for the next start
		}
		if err := r.runJob(j, t.trig); err != nil {
			if Unsupported(err) {
				if r.unsupported(err) {
					r.disable(err)
					return
				}
				continue // not retried: the cursor keeps its messages for the next pass
			}
			failed[j.Name] = true
		}
	}
	if len(failed) > 0 {
		r.retry(k, &task{trig: t.trig, jobs: failed, attempt: t.attempt + 1})
	}
}

// runJob runs one job with its own timeout, containing a panic.
func (r *Runner) runJob(j Job, t Trigger) (err error) {
	ctx, cancel := context.WithTimeout(r.base, r.cfg.Timeout)
	defer cancel()
	log := r.log.With("job", j.Name, "channel", t.Channel, "user_id", t.UserID, "chat_id", t.ChatID)
	r.count(func(s *Stats) { s.Runs++ })
	start := time.Now()
	panicked := false
	func() {
		defer func() {
			if p := recover(); p != nil {
				panicked = true
				err = fmt.Errorf("learning: job %s panicked: %v", j.Name, p)
				log.Error("learning job panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			}
		}()
		err = j.Run(ctx, t)
	}()
	switch {
	case err == nil:
		r.mu.Lock()
		r.textOnly = 0
		r.mu.Unlock()
		r.count(func(s *Stats) { s.Succeeded++ })
		log.Debug("learning job done", "duration", time.Since(start).Round(time.Millisecond))
		return nil
	case r.base.Err() != nil && !panicked:
		log.Info("learning job cancelled by shutdown; it resumes from its cursor", "err", err)
		return nil
	}
	if !panicked && Unsupported(err) {
		return err // the runner turns learning off, with one warning (disable)
	}
	timedOut := !panicked && (errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded))
	r.count(func(s *Stats) {
		s.Failed++
		s.Failures[j.Name]++
		if panicked {
			s.Panics++
		}
		if timedOut {
			s.TimedOut++
		}
	})
	if !panicked {
		log.Warn("learning job failed; it will be retried", "err", err, "timed_out", timedOut,
			"duration", time.Since(start).Round(time.Millisecond))
	}
	return err
}

// textOnlyLimit is how many passes in a row a model may answer with text
// instead of the forced call before learning is turned off: a capable model
// that slips once keeps learning, one that never makes the call costs three
// passes, not one per turn.
const textOnlyLimit = 3

// unsupported counts a run that failed with Unsupported(err) and reports
// whether learning must be turned off: at once when the server refused the
// request's tools or tool_choice, after textOnlyLimit passes in a row when
// the model answered with text.
func (r *Runner) unsupported(err error) bool {
	if !errors.Is(err, ErrNoCall) {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.textOnly++
	if r.textOnly < textOnlyLimit {
		r.log.Info("learning: the model answered with text instead of the forced call; the messages wait for the next pass",
			"in_a_row", r.textOnly, "limit", textOnlyLimit)
		return false
	}
	return true
}

// disable turns learning off for good (until the next start) because the
// model cannot make forced function calls: waiting work, pending retries and
// pauses are dropped, further turns are ignored, and this is said once.
func (r *Runner) disable(reason error) {
	r.mu.Lock()
	if r.disabled != nil {
		r.mu.Unlock()
		return
	}
	r.disabled = reason
	r.stopTimersLocked()
	r.order, r.waiting = nil, map[string]*task{}
	r.mu.Unlock()
	r.log.Warn("learning is off: the model cannot make forced function calls, which memories, profiles and skill reviews need; "+
		"use a model (or server) that supports tool_choice, or set learning.enabled: false; it is tried again at the next start",
		"err", reason)
	if r.cfg.OnDisabled != nil {
		r.cfg.OnDisabled(reason)
	}
}

// stopTimersLocked cancels pending retries and pauses.
func (r *Runner) stopTimersLocked() {
	for id, stop := range r.timers {
		stop()
		delete(r.timers, id)
	}
	for chat, ic := range r.idle {
		if ic.stop != nil {
			ic.stop()
		}
		delete(r.idle, chat)
	}
}

// retry schedules failed jobs again, with exponential backoff.
func (r *Runner) retry(k string, t *task) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing || r.disabled != nil || r.cfg.MaxRetries < 0 || t.attempt > r.cfg.MaxRetries {
		return
	}
	r.stats.Retries++
	id := r.nextTick
	r.nextTick++
	delay := r.cfg.RetryDelay << (t.attempt - 1)
	r.timers[id] = r.cfg.AfterFunc(delay, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.timers, id)
		if !r.closing && r.disabled == nil {
			r.enqueueLocked(k, t)
		}
	})
}

func (r *Runner) count(f func(*Stats)) {
	r.mu.Lock()
	f(&r.stats)
	r.mu.Unlock()
}

// Stats returns a snapshot of the counters.
func (r *Runner) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Failures = maps.Clone(r.stats.Failures)
	s.Queued = len(r.order)
	s.Running = r.active
	s.Disabled = r.disabled
	return s
}

// Drain waits until no work is waiting or running (retries scheduled for
// later do not count), or ctx ends.
func (r *Runner) Drain(ctx context.Context) error {
	return waitfor.Cond(ctx, r.cond, func() bool { return len(r.order) == 0 && r.active == 0 })
}

// Shutdown stops taking work, drops waiting work and pending retries (the
// cursors keep it for later), and waits for running jobs until ctx ends;
// then it cancels them, which rolls back whatever they had not committed,
// and waits for them to return.
func (r *Runner) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	if !r.started || r.closing {
		r.closing = true
		r.mu.Unlock()
		r.workers.Wait()
		return nil
	}
	r.closing = true
	r.stopTimersLocked()
	r.order, r.waiting = nil, map[string]*task{}
	r.cond.Broadcast()
	r.mu.Unlock()

	done := make(chan struct{})
	go func() {
		r.workers.Wait()
		close(done)
	}()
	select {
	case <-done:
		r.cancel()
		return nil
	case <-ctx.Done():
		r.log.Warn("learning jobs still running at the shutdown deadline were cancelled; they resume from their cursors")
		r.cancel()
		<-done
		return ctx.Err()
	}
}
