package slack

import (
	"context"
	"sync"
)

// chatLocks holds the sends of one chat in turn, so that the parts of a
// reply stay together and in order, while a chat waiting out a rate limit
// never holds up another. A chat's entry lives while someone holds or
// waits for it.
type chatLocks struct {
	mu    sync.Mutex
	turns map[string]*turn
}

type turn struct {
	token   chan struct{} // holds one value while the chat is free
	waiting int
}

func (l *chatLocks) lock(ctx context.Context, chat string) (unlock func(), err error) {
	l.mu.Lock()
	if l.turns == nil {
		l.turns = make(map[string]*turn)
	}
	t, ok := l.turns[chat]
	if !ok {
		t = &turn{token: make(chan struct{}, 1)}
		t.token <- struct{}{}
		l.turns[chat] = t
	}
	t.waiting++
	l.mu.Unlock()
	leave := func() {
		l.mu.Lock()
		t.waiting--
		if t.waiting == 0 {
			delete(l.turns, chat)
		}
		l.mu.Unlock()
	}
	select {
	case <-t.token:
		return func() { t.token <- struct{}{}; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, context.Cause(ctx)
	}
}
