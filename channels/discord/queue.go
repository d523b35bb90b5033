package discord

import (
	"context"
	"sync"
)

// chatQueues runs work in order per chat and in parallel across chats: the
// gateway reader hands events over without blocking, a slow download in one
// chat never delays another, and two messages of one chat reach the sink in
// the order Discord sent them.
type chatQueues struct {
	mu sync.Mutex
	m  map[string][]func() // a key is present while its worker runs
	wg sync.WaitGroup
}

func (q *chatQueues) push(key string, fn func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.m == nil {
		q.m = map[string][]func(){}
	}
	pending, busy := q.m[key]
	q.m[key] = append(pending, fn)
	if !busy {
		q.wg.Add(1)
		go q.drain(key)
	}
}

func (q *chatQueues) drain(key string) {
	defer q.wg.Done()
	for {
		q.mu.Lock()
		fns := q.m[key]
		if len(fns) == 0 {
			delete(q.m, key)
			q.mu.Unlock()
			return
		}
		fn := fns[0]
		q.m[key] = fns[1:]
		q.mu.Unlock()
		fn()
	}
}

// wait blocks until every queued function has run.
func (q *chatQueues) wait() { q.wg.Wait() }

// chatLocks serialises sends per chat, so the parts of one reply stay
// together and in order, while a rate-limited chat never holds up another.
type chatLocks struct {
	mu sync.Mutex
	m  map[string]*chatLock
}

type chatLock struct {
	sem  chan struct{}
	refs int
}

func (l *chatLocks) lock(ctx context.Context, key string) (unlock func(), err error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*chatLock{}
	}
	c := l.m[key]
	if c == nil {
		c = &chatLock{sem: make(chan struct{}, 1)}
		l.m[key] = c
	}
	c.refs++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if c.refs--; c.refs == 0 {
			delete(l.m, key)
		}
	}
	select {
	case c.sem <- struct{}{}:
		return func() { <-c.sem; release() }, nil
	case <-ctx.Done():
		release()
		return nil, context.Cause(ctx)
	}
}
