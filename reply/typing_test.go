package reply_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-gateway/switchboard/reply"
	"github.com/switchboard-gateway/switchboard/router"
)

// advance moves a synctest bubble's clock by d (it moves when every
// goroutine in the bubble waits: a timer due by then fires at once) and
// waits for what that started.
func advance(d time.Duration) {
	<-time.NewTimer(d).C
	synctest.Wait()
}

// Liveness: the typing indicator shows once a turn has run reply.TypingDelay, is
// refreshed every reply.TypingEvery while it runs (here a long tool), and stops
// with the turn.
func TestTypingKeptAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runner := newFakeRunner()
		ch := newFakeChannel()
		r := startRouter(t, router.Config{Agent: runner}, ch)
		typing := ch.Typed
		release := runner.Hold("slow")
		if err := r.Deliver(t.Context(), msg("c1", "u", "slow")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := typing(); n != 0 {
			t.Fatalf("typing sent %d times before reply.TypingDelay; want 0", n)
		}
		advance(reply.TypingDelay)
		if n := typing(); n != 1 {
			t.Fatalf("typing sent %d times after reply.TypingDelay; want 1", n)
		}
		for range 3 {
			advance(reply.TypingEvery)
		}
		if n := typing(); n != 4 {
			t.Fatalf("typing sent %d times; want 4 (first + 3 refreshes)", n)
		}
		close(release)
		if err := r.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		advance(3 * reply.TypingEvery)
		if n := typing(); n != 4 {
			t.Fatalf("typing sent %d times after the turn; want it stopped at 4", n)
		}
		_ = r.Shutdown(context.Background())
	})
}

// A turn answered within reply.TypingDelay shows no typing indicator, and none
// comes after its reply.
func TestTypingNotForQuickReplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := newFakeChannel()
		r := startRouter(t, router.Config{Agent: newFakeRunner()}, ch)
		if err := r.Deliver(t.Context(), msg("c1", "u", "quick")); err != nil {
			t.Fatal(err)
		}
		if err := r.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := ch.Texts(); !slices.Equal(got, []string{"echo: quick"}) {
			t.Fatalf("sent %q, want the echo", got)
		}
		advance(reply.TypingEvery)
		if n := ch.Typed(); n != 0 {
			t.Errorf("typing sent %d times for a reply within reply.TypingDelay; want 0", n)
		}
		_ = r.Shutdown(context.Background())
	})
}

// blockingTyper is a channel whose typing indicators take until released.
type blockingTyper struct {
	*fakeChannel
	release chan struct{}
}

func (b blockingTyper) Typing(ctx context.Context, chat string) error {
	_ = b.fakeChannel.Typing(ctx, chat)
	<-b.release
	return nil
}

// Typing indicators are bounded per channel: with reply.TypingInFlight of them
// still being sent (a slow platform, a burst of turns), a further turn's
// beat is skipped rather than queued, and it types again at its next
// refresh once slots are free.
func TestTypingBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runner := newFakeRunner()
		ch := blockingTyper{newFakeChannel(), make(chan struct{})}
		r := startRouter(t, router.Config{Agent: runner, MaxConcurrentTurns: 2 * reply.TypingInFlight}, ch)
		typing := ch.Typed
		var releases []chan struct{}
		for i := range reply.TypingInFlight + 2 {
			text := fmt.Sprint("slow ", i)
			releases = append(releases, runner.Hold(text))
			if err := r.Deliver(t.Context(), msg(fmt.Sprint("c", i), "u", text)); err != nil {
				t.Fatal(err)
			}
		}
		advance(reply.TypingDelay)
		if n := typing(); n != reply.TypingInFlight {
			t.Errorf("%d typing indicators sent for %d turns, want %d: the rest wait for none", n, reply.TypingInFlight+2, reply.TypingInFlight)
		}
		close(ch.release)
		synctest.Wait()
		advance(reply.TypingEvery)
		if n := typing(); n != 2*reply.TypingInFlight+2 {
			t.Errorf("%d typing indicators after a refresh, want %d (every turn types again)", n, 2*reply.TypingInFlight+2)
		}
		for _, rel := range releases {
			close(rel)
		}
		if err := r.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		_ = r.Shutdown(context.Background())
	})
}
