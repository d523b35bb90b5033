package llm

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/slots"
)

// With Config.MaxConcurrentRequests set, each model (the primary and each
// fallback) takes at most that many requests at once; more wait in line,
// first come first served, the requests of background work
// (WithBackground: learning) behind everyone else's. A request holds its
// slot while it streams, not while it waits to retry; the wait in line
// does not count toward RequestTimeout.

type backgroundKey struct{}

type waitNoticeKey struct{}

type waitNotice struct {
	after  time.Duration
	notify func(ahead int)
}

// WithBackground marks the model requests made with ctx as background
// work: under Config.MaxConcurrentRequests they wait behind every other
// request, even those that came later.
func WithBackground(ctx context.Context) context.Context {
	return context.WithValue(ctx, backgroundKey{}, true)
}

// WithWaitNotice asks that notify be called when a model request made with
// ctx has waited after for a slot under Config.MaxConcurrentRequests and
// still waits, with the number of requests ahead of it (0: next). It is
// called at most once per request, from the waiting call's goroutine.
func WithWaitNotice(ctx context.Context, after time.Duration, notify func(ahead int)) context.Context {
	return context.WithValue(ctx, waitNoticeKey{}, waitNotice{after: after, notify: notify})
}

// newLimits returns a line of n slots per model; nil when n <= 0 (no cap).
func newLimits(n int, models []string) map[string]*slots.Slots {
	if n <= 0 {
		return nil
	}
	m := make(map[string]*slots.Slots, len(models))
	for _, model := range models {
		if m[model] == nil {
			m[model] = slots.New(n)
		}
	}
	return m
}

// slot waits for a request slot for model, if there is a cap; release
// gives it back.
func (c *Client) slot(ctx context.Context, model string) (release func(), err error) {
	s := c.limits[model]
	if s == nil {
		return func() {}, nil
	}
	w := slots.Wait{}
	w.Background, _ = ctx.Value(backgroundKey{}).(bool)
	if n, ok := ctx.Value(waitNoticeKey{}).(waitNotice); ok {
		w.After, w.Notify = n.after, n.notify
	}
	if err := s.Acquire(ctx, w); err != nil {
		return nil, fmt.Errorf("llm: model %s: wait for a request slot: %w", model, err)
	}
	return s.Release, nil
}
