package llm_test

import (
	"context"
	"errors"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// With MaxConcurrentRequests, requests beyond the cap wait in the client
// (the server never sees them) and are told their place in line; a
// background request waits behind a turn's that came later; a request
// whose caller gives up leaves the line.
func TestMaxConcurrentRequests(t *testing.T) {
	h := newHarness(t, func(c *llm.Config) { c.MaxConcurrentRequests = 2 })
	b1, b2 := make(chan struct{}), make(chan struct{})
	h.fake.Push(testkit.Reply{Text: "first", Block: b1}, testkit.Reply{Text: "second", Block: b2},
		testkit.Reply{Text: "third"}, testkit.Reply{Text: "fourth"})
	type result struct {
		text string
		err  error
	}
	call := func(ctx context.Context) <-chan result {
		out := make(chan result, 1)
		go func() {
			resp, err := h.client.Complete(ctx, userSays("hi"), nil)
			out <- result{resp.Message.Content, err}
		}()
		return out
	}
	told := make(chan int, 4)
	notice := func(ctx context.Context) context.Context {
		return llm.WithWaitNotice(ctx, 0, func(ahead int) { told <- ahead })
	}
	first := call(t.Context())
	if err := h.fake.WaitCalls(t.Context(), 1); err != nil { // in this order: the replies go by arrival
		t.Fatal(err)
	}
	second := call(t.Context())
	if err := h.fake.WaitCalls(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	background := call(notice(llm.WithBackground(t.Context())))
	if ahead := <-told; ahead != 0 {
		t.Fatalf("the background request was told %d ahead, want 0", ahead)
	}
	gone, giveUp := context.WithCancel(notice(t.Context()))
	abandoned := call(gone)
	if ahead := <-told; ahead != 0 {
		t.Fatalf("the turn's request was told %d ahead, want 0 (before the background one)", ahead)
	}
	turn := call(notice(t.Context()))
	if ahead := <-told; ahead != 1 {
		t.Fatalf("the second turn's request was told %d ahead, want 1", ahead)
	}
	giveUp()
	if r := <-abandoned; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("abandoned request: %v, want context.Canceled", r.err)
	}
	if n := h.fake.Calls(); n != 2 {
		t.Fatalf("the server saw %d requests with 2 in flight and a cap of 2, want 2", n)
	}
	close(b1)
	if r := <-first; r.err != nil || r.text != "first" {
		t.Fatalf("first = %+v", r)
	}
	if r := <-turn; r.err != nil || r.text != "third" {
		t.Fatalf("the turn's request got %+v, want the third answer (before the background one)", r)
	}
	close(b2)
	if r := <-second; r.err != nil || r.text != "second" {
		t.Fatalf("second = %+v", r)
	}
	if r := <-background; r.err != nil || r.text != "fourth" {
		t.Fatalf("background = %+v, want the fourth answer", r)
	}
	if n := h.fake.Calls(); n != 4 {
		t.Errorf("the server saw %d requests, want 4", n)
	}
}
