// Package gcpace sets the Go garbage collector's target by load: Go's
// default while few turns run; less while many run at once, so that a burst of chats
// does not double the process's memory; and, once the gateway has been
// quiet for a while, a low target with the free memory handed back to the
// operating system, so that an idle gateway holds what it holds at start.
//
// Between collections the Go heap grows by GOGC percent (Go's default is
// 100) of what was live, goroutine stacks included, and never below
// 4 MB × GOGC/100. Normal was 400 % once, for a collection every few
// messages less; measured with bench/msgcost (300 messages in 20 chats, a
// run each at 100, 200 and 400 %), the CPU a message did not differ beyond
// the runs' noise (2.3–3.4 ms at each), while RssAnon after the messages
// was 18, 22 and 35 MB: 100 it is. A thousand
// turns waiting on the model, by contrast, hold tens of megabytes of stacks
// and requests, and the heap would grow by twice as much again before the
// next collection; at Many it grows by less, for a few more collections
// while most turns are waiting anyway.
//
// Even so, what a conversation left (its requests, its garbage, a heap
// goal of twice what was live) stays resident long after its
// last reply: the runtime returns free pages to the system only slowly. So
// Quiet after the last turn ended (or after start) the Pacer sets Idle and
// runs debug.FreeOSMemory once: one collection and every free page back.
// A timer, not a poll: nothing runs while the gateway stays idle, and the
// next turn puts Normal back.
//
// Except at Many, the heap grows between collections by no more than
// Headroom or Many percent of what was live, whichever is more (see
// Headroom): under steady traffic the memory stays flat.
//
// The pages of the binary that start-up read in go back once, at the first
// quiet time only: paged out at every quiet time, the next reply read its
// code from the disk again (60 ms more after a minute's pause), a tax on
// every user who writes after a pause for a few megabytes of page cache.
package gcpace

import (
	"os"
	"runtime/debug"
	"sync"
	"time"
)

// Defaults: Normal percent, Many from Busy turns at once until they are
// back to Calm (apart, so that a load around one threshold does not flip
// the target); Idle once no turn has run for Quiet.
const (
	Normal = 100
	Many   = 70
	Busy   = 64
	Calm   = 16
	Idle   = 50
	// Quiet is long enough that a conversation's back-and-forth and the
	// turns of a burst do not pay a collection each, short enough that a
	// conversation's memory is back well within a minute.
	Quiet = 5 * time.Second
)

// Pacer follows the number of turns running and sets the GC target.
type Pacer struct {
	set   func(int) int // debug.SetGCPercent
	free  func()        // debug.FreeOSMemory
	first func()        // at the first quiet only, after free (pageOutBinary)
	wake  func()        // at the first turn after first ran (readAheadBinary)
	quiet time.Duration

	mu       sync.Mutex
	target   int         // the percent in force
	running  int         // as last observed
	timer    *time.Timer // armed while nothing runs and not yet idle
	armed    uint64      // the arming the timer belongs to (a stale one does nothing)
	previous int         // the target before New, which Stop restores
	stopped  bool
	onQuiet  []func()  // run before free (OnQuiet)
	quiets   int       // quiet times so far
	asleep   bool      // first ran, wake not yet
	room     *headroom // the heap's growth between collections bounded; nil if GOMEMLIMIT is set
}

// New sets the Normal target and returns a Pacer, or nil if the operator
// set GOGC (their choice stands). A nil Pacer's Observe does nothing. The
// gateway counts as quiet from here until its first turn.
func New() *Pacer {
	if _, ok := os.LookupEnv("GOGC"); ok {
		return nil
	}
	p := newPacer(debug.SetGCPercent, release, pageOutBinary, readAheadBinary, Quiet)
	p.room = startHeadroom(Headroom, os.LookupEnv)
	return p
}

func newPacer(set func(int) int, free, first, wake func(), quiet time.Duration) *Pacer {
	p := &Pacer{set: set, free: free, first: first, wake: wake, quiet: quiet, target: Normal}
	p.previous = set(Normal)
	p.mu.Lock()
	p.arm()
	p.mu.Unlock()
	return p
}

// OnQuiet adds f to what runs when the gateway goes quiet, before the
// memory is handed back: caches that hold C memory or connections let go
// of them there (the store's idle connections).
func (p *Pacer) OnQuiet(f func()) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onQuiet = append(p.onQuiet, f)
}

// Stop puts back the target the process had before New; Observe does
// nothing after it.
func (p *Pacer) Stop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		p.disarm()
		p.room.stop()
		p.set(p.previous)
		p.stopped = true
	}
}

// Observe takes the number of turns running or queued now. It is cheap
// (it runs under the router's lock): a timer is armed or stopped, and the
// target changes only when a threshold is crossed.
func (p *Pacer) Observe(running int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.running = running
	switch {
	case running == 0:
		p.arm()
	default:
		p.disarm()
		if p.asleep {
			p.asleep = false
			go p.wake() // off the router's lock: it reads /proc
		}
	}
	want := p.target
	switch {
	case running >= Busy:
		want = Many
	case p.target == Idle && running > 0:
		want = Normal
	case p.target == Many && running <= Calm:
		want = Normal
	}
	p.setTarget(want)
}

func (p *Pacer) setTarget(percent int) {
	if percent != p.target {
		p.set(percent)
		p.target = percent
		p.room.follow(percent != Many) // Many bounds the growth on its own
	}
}

// arm starts the quiet timer unless it runs or the target is Idle; p.mu is
// held.
func (p *Pacer) arm() {
	if p.timer != nil || p.target == Idle {
		return
	}
	p.armed++
	n := p.armed
	p.timer = time.AfterFunc(p.quiet, func() { p.quietFor(n) })
}

// disarm stops the quiet timer; p.mu is held.
func (p *Pacer) disarm() {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
		p.armed++ // a callback already on its way finds it stale
	}
}

// quietFor runs when the timer of arming n fires: still nothing running,
// the target goes to Idle and the free memory back to the system.
func (p *Pacer) quietFor(n uint64) {
	p.mu.Lock()
	if p.stopped || n != p.armed || p.running != 0 {
		p.mu.Unlock()
		return
	}
	p.timer = nil
	p.setTarget(Idle)
	hooks := p.onQuiet
	p.quiets++
	first := p.quiets == 1
	p.mu.Unlock()
	// Outside the lock, which Observe takes under the router's: a full
	// collection takes a while.
	for _, f := range hooks {
		f()
	}
	p.free()
	if first && p.first != nil {
		p.first()
		p.mu.Lock()
		p.asleep = !p.stopped
		p.mu.Unlock()
	}
}

// release hands memory back to the system: the Go heap's free pages
// (after one collection) and the C allocator's.
func release() {
	debug.FreeOSMemory()
	trimC()
}
