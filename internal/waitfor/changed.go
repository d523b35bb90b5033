package waitfor

import (
	"context"
	"sync"
)

// Changed wakes waiters when the state they watch changes: whoever
// changes it calls Notify, a waiter calls Wait with its condition. The
// zero value is ready; a channel is made only while someone waits.
type Changed struct {
	mu sync.Mutex
	ch chan struct{} // closed by the next Notify; nil: nobody waits
}

// Notify wakes every Wait to re-check its condition.
func (c *Changed) Notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

func (c *Changed) next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// Wait returns nil once cond holds, checking it now and after every
// Notify, or ctx's cause when ctx ends first. cond runs without c's lock,
// so it may take the caller's own locks.
func (c *Changed) Wait(ctx context.Context, cond func() bool) error {
	for {
		ch := c.next()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}
