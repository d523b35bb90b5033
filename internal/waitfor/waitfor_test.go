package waitfor

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
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

func TestSleep(t *testing.T) {
	if err := Sleep(t.Context(), 0); err != nil {
		t.Errorf("Sleep(0) = %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep after cancel = %v, want context.Canceled", err)
	}
}
