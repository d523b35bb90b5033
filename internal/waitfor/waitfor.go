// Package waitfor waits on a condition variable until a predicate holds or
// a context ends — the "drain" both the router and the learning runner need.
package waitfor

import (
	"context"
	"sync"
	"time"
)

// Cond waits until done() is true or ctx ends. c.L must not be held by the
// caller; done is evaluated with c.L held. Whoever changes what done reads
// must call c.Broadcast (with c.L held).
func Cond(ctx context.Context, c *sync.Cond, done func() bool) error {
	stop := context.AfterFunc(ctx, func() {
		c.L.Lock()
		c.Broadcast()
		c.L.Unlock()
	})
	defer stop()
	c.L.Lock()
	defer c.L.Unlock()
	for !done() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.Wait()
	}
	return nil
}

// Poll checks cond every interval until it holds (nil) or ctx ends (its
// error). For conditions no one signals, such as another process's state.
func Poll(ctx context.Context, every time.Duration, cond func() bool) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Sleep waits d, or less if ctx ends first: nil after d, ctx.Err() if ctx
// ended. The retry and backoff waits of the adapters, the model client and
// the supervisor.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
