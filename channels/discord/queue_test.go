package discord

import (
	"context"
	"slices"
	"sync"
	"testing"
)

func TestChatQueuesOrderPerChatParallelAcross(t *testing.T) {
	var q chatQueues
	var mu sync.Mutex
	var order []string
	record := func(s string) {
		mu.Lock()
		order = append(order, s)
		mu.Unlock()
	}
	blockA, aStarted := make(chan struct{}), make(chan struct{})
	q.push("a", func() { close(aStarted); <-blockA; record("a1") })
	q.push("a", func() { record("a2") })
	<-aStarted
	bDone := make(chan struct{})
	q.push("b", func() { record("b1"); close(bDone) })
	<-bDone // b ran while a's first item is still blocked
	close(blockA)
	q.wait()
	if want := []string{"b1", "a1", "a2"}; !slices.Equal(order, want) {
		t.Errorf("order = %v, want %v", order, want)
	}
	if len(q.m) != 0 {
		t.Errorf("idle queues left: %v", q.m)
	}
}

func TestChatLocks(t *testing.T) {
	var l chatLocks
	unlock, err := l.lock(t.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	other, err := l.lock(t.Context(), "d") // another chat is free
	if err != nil {
		t.Fatal(err)
	}
	other()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := l.lock(ctx, "c"); err == nil {
		t.Error("second lock of a held chat with a done ctx succeeded")
	}
	unlock()
	again, err := l.lock(t.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	again()
	if len(l.m) != 0 {
		t.Errorf("locks left: %v", l.m)
	}
}
