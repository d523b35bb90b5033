package e2e

// Load and leaks (issue 10): a thousand chats at once through the real
// wiring (gateway.Build: router, agent loop, skills, SQLite store, the go-openai
// client) against a model on loopback. The channel is an in-memory one: the
// Telegram and Discord adapters under faults are in faults_test.go, and
// bench/ measures the binary end to end.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/gateway"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/transport"
	"github.com/switchboard-gateway/switchboard/router"
)

// echoModel is an OpenAI-compatible streaming model that answers
// "echo: <the last user message>" after delay. Unlike testkit.FakeLLM it
// keeps nothing of the requests, so the heap measured is the gateway's.
func echoModel(t *testing.T, delay time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		last := ""
		for _, m := range req.Messages {
			if s, ok := m.Content.(string); ok && m.Role == "user" {
				last = s
			}
		}
		timer := time.NewTimer(delay)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, chunk := range []string{
			`{"choices":[{"index":0,"delta":{"role":"assistant"}}]}`,
			fmt.Sprintf(`{"choices":[{"index":0,"delta":{"content":%q}}]}`, "echo: "+last),
			`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`,
			`[DONE]`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", chunk)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// memoryChannel records what the router sends, per chat, in order.
type memoryChannel struct {
	mu   sync.Mutex
	sent map[string][]string
	n    int
	cond *sync.Cond
}

func newMemoryChannel() *memoryChannel {
	c := &memoryChannel{sent: map[string][]string{}}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *memoryChannel) Name() string                                   { return "load" }
func (c *memoryChannel) Run(ctx context.Context, _ channels.Sink) error { <-ctx.Done(); return nil }
func (c *memoryChannel) Send(_ context.Context, m channels.Outbound) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent[m.ChatID] = append(c.sent[m.ChatID], m.Text)
	c.n++
	c.cond.Broadcast()
	return fmt.Sprint(c.n), nil
}

// wait waits until n messages were sent in all, or ctx ends.
func (c *memoryChannel) wait(ctx context.Context, n int) error {
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.cond.Broadcast()
	})
	defer stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.n < n {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%d of %d messages sent: %w", c.n, n, err)
		}
		c.cond.Wait()
	}
	return nil
}

// heapLive is the heap's live bytes after a full collection: what the
// process still holds. (HeapInuse counts whole spans, so after a load it
// also counts the spans that a few survivors keep from being reused, which
// varied by 5 MiB from one run to the next.)
func heapLive() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// Bounds of TestLoadThousandChats. The heap the gateway keeps after the load
// (queues gone, idle connections, the store's history cache of at most
// 4 MB) must stay small; while 1,000 turns run at once it holds their
// transcripts, requests and connections (SQLite's page cache is per
// connection).
const (
	loadChats       = 1000
	loadPerChat     = 2 // enough for an order; a turn costs ~10 ms of CPU under -race
	loadModelDelay  = 20 * time.Millisecond
	goroutineSlack  = 10       // timers winding down
	heapGrowthBound = 16 << 20 // live after the load, over the warm baseline (measured: 4–5 MiB)
	heapPeakBound   = 150 << 20
	// loadWallTimeMax only stops a hung load: the wall time depends on how
	// busy the machine is (measured: 14 s without -race, ~45 s with it on
	// 2 shared cores).
	loadWallTimeMax = 3 * time.Minute
	loadSampleEvery = 25 * time.Millisecond
)

// TestLoadThousandChats: 1,000 chats write at once, two messages each, and
// all of them may run a turn at the same time (max_concurrent_turns 1000).
// Every message is answered exactly once and in its chat's order; then the
// goroutines return to the baseline and the heap to a bound.
func TestLoadThousandChats(t *testing.T) {
	ctx := t.Context()
	model := echoModel(t, loadModelDelay)
	dir := t.TempDir()
	c := modelConfig(model.URL + "/v1")
	c.Store.Path = filepath.Join(dir, "switchboard.db")
	c.Skills.Dir = filepath.Join(dir, "skills")
	c.Agent.MaxConcurrentTurns = loadChats
	c.Learning.Enabled = false
	c.HTTP.Listen = ""
	cfg, err := gateway.LoadConfig(cfgfile.Write(t, c))
	if err != nil {
		t.Fatal(err)
	}
	a, err := gateway.Build(ctx, cfg, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ch := newMemoryChannel()
	a.Router().AddChannel(ch, router.Access{AllowAll: true})
	if err := a.Router().Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Router().Shutdown(context.Background())
	msg := func(chat, i int) channels.Inbound {
		text := fmt.Sprintf("chat %d, message %d", chat, i)
		return channels.Inbound{Channel: "load", ChatID: fmt.Sprint("c", chat), ChatType: channels.DM,
			MessageID: fmt.Sprint(chat, "-", i), UserID: fmt.Sprint("u", chat), Text: text, Mentioned: true}
	}

	// Warm up: one turn loads what is loaded once (skills, connections).
	if err := a.Router().Deliver(ctx, msg(-1, 0)); err != nil {
		t.Fatal(err)
	}
	if err := ch.wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := a.Router().Drain(ctx); err != nil {
		t.Fatal(err)
	}
	goroutines, heap := runtime.NumGoroutine(), heapLive()

	// Sample the heap while the load runs.
	var peak uint64
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(loadSampleEvery)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()

	start := time.Now()
	lctx, cancel := context.WithTimeout(ctx, loadWallTimeMax)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, loadChats)
	for c := range loadChats {
		wg.Go(func() {
			// Deliver returns once the message is stored and queued, so
			// each chat's messages are queued in the order they are sent.
			for i := range loadPerChat {
				if err := a.Router().Deliver(lctx, msg(c, i)); err != nil {
					errs <- fmt.Errorf("deliver %d/%d: %w", c, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := ch.wait(lctx, 1+loadChats*loadPerChat); err != nil {
		t.Fatal(err)
	}
	if err := a.Router().Drain(lctx); err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start)
	close(stopSampling)
	<-sampled

	ch.mu.Lock()
	for c := range loadChats {
		var want []string
		for i := range loadPerChat {
			want = append(want, "echo: "+msg(c, i).Text)
		}
		if got := ch.sent[fmt.Sprint("c", c)]; !slices.Equal(got, want) {
			t.Errorf("chat %d got %q, want %q (each once, in order)", c, got, want)
		}
	}
	if ch.n != 1+loadChats*loadPerChat {
		t.Errorf("%d messages sent in all, want %d", ch.n, 1+loadChats*loadPerChat)
	}
	ch.mu.Unlock()

	// Goroutines end as their work does: poll until they are back.
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	// The model client keeps up to MaxIdleConnsPerHost connections for
	// reuse, each with a read and a write goroutine, and one in the fake
	// model's server: a bounded pool, not a leak, and far below one per
	// chat (a leak of a goroutine per turn would be 2,000).
	slack := goroutineSlack + 3*transport.Reusing().MaxIdleConnsPerHost
	n := runtime.NumGoroutine()
	for n > goroutines+slack && time.Now().Before(deadline) {
		<-tick.C
		n = runtime.NumGoroutine()
	}
	if n > goroutines+slack {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after the load, want at most %d (baseline %d + %d):\n%s",
			n, goroutines+slack, goroutines, slack, buf[:runtime.Stack(buf, true)])
	}
	after := heapLive()
	if after > heap+heapGrowthBound {
		t.Errorf("live heap after the load = %d MiB, want at most %d MiB (baseline %d MiB + %d MiB)",
			after>>20, (heap+heapGrowthBound)>>20, heap>>20, heapGrowthBound>>20)
	}
	if peak > heapPeakBound {
		t.Errorf("peak heap in use during the load = %d MiB, want at most %d MiB", peak>>20, heapPeakBound>>20)
	}
	t.Logf("%d chats × %d messages, model delay %s: wall %s; goroutines %d → %d; live heap %d MiB → peak in use %d MiB → live %d MiB",
		loadChats, loadPerChat, loadModelDelay, wall.Round(time.Millisecond), goroutines, n, heap>>20, peak>>20, after>>20)
}
