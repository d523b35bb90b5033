package waitfor

import (
	"context"
	"errors"
	"sync"
	"testing"
)

func TestCond(t *testing.T) {
	var mu sync.Mutex
	c := sync.NewCond(&mu)
	n := 2
	errc := make(chan error, 1)
	go func() { errc <- Cond(t.Context(), c, func() bool { return n == 0 }) }()
	for range 2 {
		mu.Lock()
		n--
		c.Broadcast()
		mu.Unlock()
	}
	if err := <-errc; err != nil {
		t.Fatalf("Cond = %v; want nil once the predicate holds", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	go func() { errc <- Cond(ctx, c, func() bool { return false }) }()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Cond = %v; want context.Canceled when ctx ends first", err)
	}
}
