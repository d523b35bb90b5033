package testkit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// WaitFor sees what is written after it started waiting, and gives up with
// ctx's error.
func TestSyncBufferWaitFor(t *testing.T) {
	var b SyncBuffer
	b.Write([]byte("starting\n"))
	contains := func(want string) func(string) (string, bool) {
		return func(text string) (string, bool) { return want, strings.Contains(text, want) }
	}
	// "ready" is written once WaitFor has looked and not found it.
	looked := make(chan struct{})
	var once sync.Once
	go func() {
		<-looked
		b.Write([]byte("ready\n"))
	}()
	waitReady := func(text string) (string, bool) {
		got, ok := contains("ready")(text)
		if !ok {
			once.Do(func() { close(looked) })
		}
		return got, ok
	}
	if got, err := b.WaitFor(t.Context(), waitReady); err != nil || got != "ready" {
		t.Fatalf("WaitFor = %q, %v", got, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := b.WaitFor(ctx, contains("never")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFor of what never comes: %v", err)
	}
	if got := b.String(); got != "starting\nready\n" {
		t.Errorf("String = %q", got)
	}
}
