// Package gcpace sets the Go garbage collector's target by load: more
// room than Go's default while few turns run, for fewer collections and
// lower latency; less while many run at once, so that a burst of chats
// does not double the process's memory.
//
// Between collections the Go heap grows by GOGC percent (Go's default is
// 100) of what was live, goroutine stacks included. With a heap of a few
// megabytes the collector ran every few messages, a tenth of a message's
// CPU and the slowest replies; at Normal it runs a quarter as often, for a
// few megabytes more (idle RSS did not change measurably). A
// thousand turns waiting on the model, by contrast, hold tens of megabytes
// of stacks and requests, and the heap would grow by twice as much again
// before the next collection; at Many it grows by less, for a few more
// collections while most turns are waiting anyway.
package gcpace

import (
	"os"
	"runtime/debug"
	"sync"
)

// Defaults: Normal percent, Many from Busy turns at once until they are
// back to Calm (apart, so that a load around one threshold does not flip
// the target).
const (
	Normal = 400
	Many   = 70
	Busy   = 64
	Calm   = 16
)

// Pacer follows the number of turns running and sets the GC target.
type Pacer struct {
	set func(int) int // debug.SetGCPercent

	mu       sync.Mutex
	high     bool // Many is in force
	previous int  // the target before New, which Stop restores
	stopped  bool
}

// New sets the Normal target and returns a Pacer, or nil if the operator
// set GOGC (their choice stands). A nil Pacer's Observe does nothing.
func New() *Pacer {
	if _, ok := os.LookupEnv("GOGC"); ok {
		return nil
	}
	return newPacer(debug.SetGCPercent)
}

func newPacer(set func(int) int) *Pacer {
	previous := set(Normal)
	return &Pacer{set: set, previous: previous}
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
		p.set(p.previous)
		p.stopped = true
	}
}

// Observe takes the number of turns running or queued now. It is cheap
// unless a threshold is crossed.
func (p *Pacer) Observe(running int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.stopped:
	case !p.high && running >= Busy:
		p.set(Many)
		p.high = true
	case p.high && running <= Calm:
		p.set(Normal)
		p.high = false
	}
}
