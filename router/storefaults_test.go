package router

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/store"
)

// fullRunner is an agent whose turn for a text fails as on a full disk the
// given number of times before it answers "echo: <text>".
type fullRunner struct {
	mu    sync.Mutex
	fails map[string]int
	runs  []string
}

func (f *fullRunner) Run(ctx context.Context, t agent.Turn) agent.Result {
	f.mu.Lock()
	f.runs = append(f.runs, t.Input.Content)
	fail := f.fails[t.Input.Content] > 0
	f.fails[t.Input.Content]--
	f.mu.Unlock()
	if fail {
		full := sqlite3.Error{Code: sqlite3.ErrFull}
		return agent.Result{StopReason: agent.StopStoreError, Err: fmt.Errorf("agent: commit step 1: %w", full)}
	}
	if _, err := t.Chat.Send(ctx, "echo: "+t.Input.Content); err != nil {
		return agent.Result{StopReason: agent.StopLLMError, Err: err}
	}
	return agent.Result{StopReason: agent.StopEndTurn, Delivered: true}
}

// A turn the store cannot record (storage full) is tried again after a
// growing wait, at the head of its chat's queue: the chat is told once, its
// next message waits its turn, and other chats go on meanwhile.
func TestStoreUnavailableRetriesInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "r.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		runner := &fullRunner{fails: map[string]int{"first": 2}}
		ch := newFakeChannel()
		r, _ := New(Config{Store: st, Agent: runner, NewTicker: func(time.Duration) Ticker { return stoppedTicker{} }})
		r.AddChannel(ch, everyone)
		if err := r.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer r.Shutdown(context.Background())
		start := time.Now()
		for _, m := range []struct{ chat, text string }{{"c1", "first"}, {"c1", "second"}, {"c2", "elsewhere"}} {
			if err := r.Deliver(t.Context(), msg(m.chat, "u", m.text)); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		// c1's first turn failed and waits; c2 was answered.
		got := ch.Texts()
		if len(got) != 2 || !strings.Contains(got[0]+got[1], "storage is full") || !slices.Contains(got, "echo: elsewhere") {
			t.Fatalf("sent %q before the retry, want the notice and c2's answer", got)
		}
		if err := r.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		// Failed twice: waited 1 s, then 2 s.
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("c1 was answered after %s, want 3s (waits of 1s and 2s)", d)
		}
		ch.Mu.Lock()
		var c1 []string
		for _, m := range ch.Sent {
			if m.ChatID == "c1" {
				c1 = append(c1, m.Text)
			}
		}
		ch.Mu.Unlock()
		if len(c1) != 3 || !strings.Contains(c1[0], "storage is full") || c1[1] != "echo: first" || c1[2] != "echo: second" {
			t.Errorf("c1 holds %q, want one notice, then the answers in order", c1)
		}
		runner.mu.Lock()
		defer runner.mu.Unlock()
		c1runs := slices.DeleteFunc(slices.Clone(runner.runs), func(s string) bool { return s == "elsewhere" })
		if want := []string{"first", "first", "first", "second"}; !slices.Equal(c1runs, want) || len(runner.runs) != 5 {
			t.Errorf("turns ran for %q, want c1's %q and c2's once", runner.runs, want)
		}
		pending, err := st.PendingInbox(t.Context())
		if err != nil || len(pending) != 0 {
			t.Errorf("pending messages = %+v, %v; want none", pending, err)
		}
	})
}
