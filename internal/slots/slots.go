// Package slots is a counting semaphore that serves its waiters first
// come, first served (background work after everyone else), and tells a
// waiter whose wait is real its place in the line: the router's turns and
// the model client's requests wait in it (issue 21: "3 people ahead of
// you").
//
// golang.org/x/sync/semaphore is FIFO too, but it can tell a waiter
// neither its place nor let background work step aside.
package slots

import (
	"context"
	"sync"
	"time"
)

// Slots hands out n slots. The zero value is not usable; see New.
type Slots struct {
	mu    sync.Mutex
	free  int
	queue []*waiter // waiting: everyone in arrival order, then background work in arrival order
}

type waiter struct {
	ready      chan struct{} // closed when the slot is handed over
	background bool
}

// New returns n slots (at least 1).
func New(n int) *Slots { return &Slots{free: max(n, 1)} }

// Wait says how an Acquire waits.
type Wait struct {
	// Background waits behind every other waiter, even those who came
	// later (learning jobs behind users' turns).
	Background bool
	// After a wait of After, if the slot has not come yet, Notify is
	// called once with the number of waiters ahead (0: next in line);
	// a nil Notify is never called.
	After  time.Duration
	Notify func(ahead int)
}

// Acquire takes a slot, waiting in line when none is free or others wait
// already. It returns ctx.Err() if ctx ends first (the slot is not
// taken). Call Release when done with the slot.
func (s *Slots) Acquire(ctx context.Context, w Wait) error {
	s.mu.Lock()
	if s.free > 0 { // then nobody waits: Release hands a slot to the line first
		s.free--
		s.mu.Unlock()
		return nil
	}
	if err := ctx.Err(); err != nil {
		s.mu.Unlock()
		return err
	}
	me := &waiter{ready: make(chan struct{}), background: w.Background}
	i := s.lineFor(w.Background)
	s.queue = append(s.queue, nil)
	copy(s.queue[i+1:], s.queue[i:])
	s.queue[i] = me
	s.mu.Unlock()

	var notice <-chan time.Time
	if w.Notify != nil {
		t := time.NewTimer(w.After)
		defer t.Stop()
		notice = t.C
	}
	for {
		select {
		case <-me.ready:
			return nil
		case <-notice:
			notice = nil
			if ahead, waiting := s.place(me); waiting {
				w.Notify(ahead)
			}
		case <-ctx.Done():
			s.mu.Lock()
			select {
			case <-me.ready: // handed over meanwhile: pass it on
				s.mu.Unlock()
				s.Release()
			default:
				s.remove(me)
				s.mu.Unlock()
			}
			return ctx.Err()
		}
	}
}

// Release gives a slot back: to the first in line, if any.
func (s *Slots) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		s.free++
		return
	}
	next := s.queue[0]
	s.queue = s.queue[1:]
	close(next.ready)
}

// Waiting is the number of waiters in line.
func (s *Slots) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// lineFor is where a new waiter joins the line: behind everyone, or
// behind only the other background waiters. s.mu is held.
func (s *Slots) lineFor(background bool) int {
	if background {
		return len(s.queue)
	}
	for i, w := range s.queue {
		if w.background {
			return i
		}
	}
	return len(s.queue)
}

// place is how many wait ahead of w, and whether w still waits.
func (s *Slots) place(w *waiter) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, o := range s.queue {
		if o == w {
			return i, true
		}
	}
	return 0, false
}

// remove takes w out of the line. s.mu is held.
func (s *Slots) remove(w *waiter) {
	for i, o := range s.queue {
		if o == w {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			return
		}
	}
}
