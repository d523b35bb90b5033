package reply_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/store"
)

// splitChannel splits a text at "|" into parts and uses the part record as
// an adapter must; the part numbered cut, when set, hangs until the send's
// context ends (the process is going away).
type splitChannel struct {
	mu      sync.Mutex
	cut     int // part index to hang on; -1: none
	hanging chan struct{}
	sent    []string
	records []bool // whether each send had a part record
}

func (c *splitChannel) Name() string                                   { return "fake" }
func (c *splitChannel) Run(ctx context.Context, _ channels.Sink) error { <-ctx.Done(); return nil }
func (c *splitChannel) Send(ctx context.Context, m channels.Outbound) (string, error) {
	c.mu.Lock()
	c.records = append(c.records, m.Parts != nil)
	c.mu.Unlock()
	var last string
	for i, p := range strings.Split(m.Text, "|") {
		if m.Parts != nil {
			if id, ok := m.Parts.Sent(i); ok {
				last = id
				continue
			}
		}
		c.mu.Lock()
		if i == c.cut {
			c.cut = -1
			c.mu.Unlock()
			close(c.hanging)
			<-ctx.Done()
			return "", ctx.Err()
		}
		c.sent = append(c.sent, p)
		last = fmt.Sprintf("m-%d", len(c.sent))
		c.mu.Unlock()
		if m.Parts != nil {
			m.Parts.Confirmed(ctx, i, last)
		}
	}
	return last, nil
}

func (c *splitChannel) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sent)
}

// replyRunner answers every message with the same reply; a send cut off by
// the end of the turn's context is a checkpoint, as in the agent.
type replyRunner struct{ replies []string }

func (f replyRunner) Run(ctx context.Context, t agent.Turn) agent.Result {
	for _, text := range f.replies {
		if _, err := t.Chat.Send(ctx, text); err != nil {
			if ctx.Err() != nil {
				return agent.Result{StopReason: agent.StopCancelled}
			}
			return agent.Result{StopReason: agent.StopLLMError, Err: err}
		}
	}
	return agent.Result{StopReason: agent.StopEndTurn, Delivered: true}
}

// A reply cut off between its parts (the process stopped while the third
// part was on its way) is completed by the next router on the same store:
// the resumed turn's reply has the same key as the first one's, so only the
// missing part goes out, and the message is then answered.
func TestResumedReplySendsOnlyMissingParts(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ch := &splitChannel{cut: 2, hanging: make(chan struct{})}
	start := func() *router.Router {
		r, err := router.New(router.Config{Store: st, Agent: replyRunner{replies: []string{"a|b|c"}},
			NewTicker: func(time.Duration) router.Ticker { return stoppedTicker{} }})
		if err != nil {
			t.Fatal(err)
		}
		r.AddChannel(ch, everyone)
		if err := r.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		return r
	}
	r1 := start()
	if err := r1.Deliver(t.Context(), msg("c1", "u", "tell me")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch.hanging:
	case <-t.Context().Done():
		t.Fatal("the third part was never sent")
	}
	stopped, cancel := context.WithCancel(context.Background())
	cancel() // no time to finish: the turn is checkpointed
	_ = r1.Shutdown(stopped)
	if got, want := ch.got(), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Fatalf("before the restart: sent %q, want %q", got, want)
	}

	r2 := start() // replays the pending message
	defer r2.Shutdown(context.Background())
	if err := r2.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := ch.got(), []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("after the restart: sent %q in all, want %q (each part once)", got, want)
	}
	if pending, err := st.PendingInbox(t.Context()); err != nil || len(pending) != 0 {
		t.Errorf("pending after the restart = %v, %v; want none", pending, err)
	}
	if slices.Contains(ch.records, false) {
		t.Errorf("a reply to a message went without a part record: %v", ch.records)
	}
}
