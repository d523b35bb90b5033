package waitfor

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestChangedWakesOnNotify(t *testing.T) {
	var c Changed
	var n atomic.Int32
	done := make(chan error, 1)
	go func() { done <- c.Wait(t.Context(), func() bool { return n.Load() >= 3 }) }()
	for range 3 {
		n.Add(1)
		c.Notify()
	}
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v", err)
	}
}

func TestChangedEndsWithContext(t *testing.T) {
	var c Changed
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if err := c.Wait(ctx, func() bool { return false }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want the deadline", err)
	}
}
