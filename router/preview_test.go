package router

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// editChannel records sends and edits.
type editChannel struct {
	*fakeChannel
	mu    sync.Mutex
	edits []string // "id: text"
}

func (c *editChannel) Edit(_ context.Context, _, id, text string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.edits = append(c.edits, id+": "+text)
	return nil
}

func previewRig(t *testing.T) (*Router, *editChannel, *testkit.FakeLLM) {
	t.Helper()
	fake := testkit.NewFakeLLM(t)
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	model, _ := llm.New(llm.Config{BaseURL: fake.URL, Model: "fake-model", MaxRetries: -1})
	ag, _ := agent.New(agent.Config{Model: model, Store: st, Sources: []agent.Source{agent.Builtin(nil, nil), agent.ChannelContext()}})
	ch := &editChannel{fakeChannel: newFakeChannel()}
	clock := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	r, _ := New(Config{Store: st, Agent: ag, Preview: map[string]bool{"fake": true},
		Now: func() time.Time { // each look at the clock is 400 ms later
			mu.Lock()
			defer mu.Unlock()
			clock = clock.Add(400 * time.Millisecond)
			return clock
		},
		NewTicker: func(time.Duration) Ticker { return stoppedTicker{} }})
	r.AddChannel(ch, everyone)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(context.Background()) })
	return r, ch, fake
}

func runMsg(t *testing.T, r *Router, in channels.Inbound) {
	t.Helper()
	if err := r.Deliver(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	if err := r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// The preview grows in one message, edited at most once a second, and the
// final reply replaces it: one message, never two.
func TestStreamingPreview(t *testing.T) {
	r, ch, fake := previewRig(t)
	chunks := []string{"The answer ", "is forty-two, ", "because that is ", "what the book ", "says, and the ", "book is right."}
	fake.Push(testkit.Reply{TextChunks: chunks})
	runMsg(t, r, msg("c1", "u", "why?"))
	sent := ch.texts()
	if len(sent) != 1 || !strings.HasSuffix(sent[0], " …") {
		t.Fatalf("sent = %q; want one preview message", sent)
	}
	final := strings.Join(chunks, "")
	if n := len(ch.edits); n < 2 || ch.edits[n-1] != "out-1: "+final {
		t.Fatalf("edits = %q; want throttled growth then the final text", ch.edits)
	}
	// Throttled: 6 deltas at 400 ms steps give fewer edits than deltas.
	if len(ch.edits) > 4 {
		t.Fatalf("%d edits for 6 deltas: not throttled", len(ch.edits))
	}
}

// Text that comes with tool calls is taken back; the reply sent with
// send_message then takes over the same message.
func TestStreamingPreviewInterimText(t *testing.T) {
	r, ch, fake := previewRig(t)
	fake.Push(
		testkit.Reply{TextChunks: []string{"Let me look that up ", "for you right now."}, ToolCalls: []llm.ToolCall{testkit.Call("1", "current_time", `{}`)}},
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("2", "send_message", `{"text":"It is ten."}`)}},
		testkit.Reply{Text: "done"},
	)
	runMsg(t, r, msg("c1", "u", "time?"))
	if sent := ch.texts(); len(sent) != 1 {
		t.Fatalf("sent = %q; want the one preview message", sent)
	}
	if len(ch.edits) != 2 || ch.edits[0] != "out-1: …" || ch.edits[1] != "out-1: It is ten." {
		t.Fatalf("edits = %q", ch.edits)
	}
}

// Previews are off unless turned on for the channel.
func TestStreamingPreviewOff(t *testing.T) {
	r, ch, fake := previewRig(t)
	r.cfg.Preview = nil
	fake.Push(testkit.Reply{TextChunks: []string{"A long enough answer ", "to preview if it were on."}})
	runMsg(t, r, msg("c1", "u", "x"))
	if sent := ch.texts(); len(sent) != 1 || sent[0] != "A long enough answer to preview if it were on." || len(ch.edits) != 0 {
		t.Fatalf("sent %q, edits %q", sent, ch.edits)
	}
}

// A stream cut mid-answer (the model became unavailable) leaves no half
// answer on screen: the preview says it was interrupted, and the answer
// comes whole once the message is tried again.
func TestStreamingPreviewModelUnavailable(t *testing.T) {
	r, ch, fake := previewRig(t)
	fake.Push(
		testkit.Reply{TextChunks: []string{"The first half ", "of an answer, ", "long enough to preview"}, CutStream: true},
		testkit.Reply{Text: "The whole answer, long enough to preview too."},
	)
	runMsg(t, r, msg("c1", "u", "why?"))
	sent := ch.texts()
	if len(sent) != 3 || !strings.HasPrefix(sent[0], "The first half") || !strings.Contains(sent[1], "unavailable right now") ||
		!strings.HasPrefix(sent[2], "The whole answer") {
		t.Fatalf("sent = %q; want the cut preview, the notice, the new preview", sent)
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !slices.Contains(ch.edits, "out-1: (interrupted: the language model stopped answering)") ||
		ch.edits[len(ch.edits)-1] != "out-3: The whole answer, long enough to preview too." {
		t.Fatalf("edits = %q; want the cut preview marked interrupted, the answer whole in the new one", ch.edits)
	}
}
