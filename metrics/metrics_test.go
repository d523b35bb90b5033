package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/llm"
)

func TestObserveCountsTurnsStepsAndTools(t *testing.T) {
	m := New("v1.2.3")
	in := channels.Inbound{Channel: "telegram", ChatID: "1"}
	events := []agent.Event{
		{Kind: agent.EventTurnStart, TurnID: 7},
		{Kind: agent.EventUsage, TurnID: 7, Step: 1},
		{Kind: agent.EventToolEnd, TurnID: 7, Step: 1, Tool: "current_time", Duration: 3 * time.Millisecond},
		{Kind: agent.EventToolEnd, TurnID: 7, Step: 1, Tool: "fetch", IsError: true},
		{Kind: agent.EventUsage, TurnID: 7, Step: 2},
		{Kind: agent.EventDone, TurnID: 7, StopReason: agent.StopEndTurn, Duration: 2 * time.Second},
	}
	for _, ev := range events {
		m.Observe(in, ev)
	}
	m.Observe(channels.Inbound{Channel: "discord"}, agent.Event{Kind: agent.EventDone, TurnID: 8, StopReason: agent.StopLLMError})

	checks := []struct {
		name string
		got  float64
		want float64
	}{
		{"turns telegram end_turn", testutil.ToFloat64(m.turns.WithLabelValues("telegram", "end_turn")), 1},
		{"turns discord llm_error", testutil.ToFloat64(m.turns.WithLabelValues("discord", "llm_error")), 1},
		{"tool ok", testutil.ToFloat64(m.toolCalls.WithLabelValues("current_time", "ok")), 1},
		{"tool error", testutil.ToFloat64(m.toolCalls.WithLabelValues("fetch", "error")), 1},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	out := scrape(t, m)
	for _, want := range []string{
		`switchboard_turn_steps_sum{channel="telegram"} 2`,
		`switchboard_turn_steps_count{channel="telegram"} 1`,
		`switchboard_build_info{version="v1.2.3"} 1`,
		`switchboard_turn_duration_seconds_sum{channel="telegram"} 2`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if len(m.steps) != 0 {
		t.Errorf("steps of finished turns are kept: %v", m.steps)
	}
}

type scriptedModel struct {
	resp llm.Response
	err  error
}

func (s scriptedModel) Complete(ctx context.Context, _ llm.Request, _ func(llm.Delta)) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	return s.resp, s.err
}

func TestObservedModel(t *testing.T) {
	m := New("dev")
	ok := m.ObserveModel(scriptedModel{resp: llm.Response{Model: "gpt-x", Usage: llm.Usage{PromptTokens: 10, CompletionTokens: 4, TotalTokens: 14,
		CachedTokens: 6, ReasoningTokens: 3}}}, "main")
	if _, err := ok.Complete(t.Context(), llm.Request{}, nil); err != nil {
		t.Fatal(err)
	}
	if h := ok.Health(); h.LastOK.IsZero() || !h.LastFailure.IsZero() {
		t.Fatalf("health after success = %+v", h)
	}
	bad := m.ObserveModel(scriptedModel{err: &llm.Error{Model: "gpt-y", Status: 503, Message: "overloaded"}}, "main")
	if _, err := bad.Complete(t.Context(), llm.Request{}, nil); err == nil {
		t.Fatal("want the error through")
	}
	if h := bad.Health(); h.LastFailure.IsZero() || !strings.Contains(h.LastError, "overloaded") {
		t.Fatalf("health after failure = %+v", h)
	}
	// A call its caller cancelled says nothing about the server.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	quiet := m.ObserveModel(scriptedModel{err: errors.New("unused")}, "main")
	_, _ = quiet.Complete(ctx, llm.Request{}, nil)
	if h := quiet.Health(); !h.LastFailure.IsZero() {
		t.Fatalf("a cancelled call counted as a failure: %+v", h)
	}

	for kind, want := range map[string]float64{"prompt": 10, "completion": 4, "cached": 6, "reasoning": 3} {
		if got := testutil.ToFloat64(m.modelTokens.WithLabelValues("gpt-x", kind)); got != want {
			t.Errorf("%s tokens = %v, want %v", kind, got, want)
		}
	}
	out := scrape(t, m)
	for _, want := range []string{
		`switchboard_model_request_duration_seconds_count{model="gpt-x",outcome="ok"} 1`,
		`switchboard_model_request_duration_seconds_count{model="gpt-y",outcome="error"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(out, `model="main"`) {
		t.Error("the cancelled call was recorded")
	}
}

func TestQueueSendsJobsAndChannels(t *testing.T) {
	m := New("dev")
	depth := 3
	m.Queue(func() int { return depth }, func() int { return 2 })
	m.Sent("telegram", nil)
	m.Sent("telegram", errors.New("boom"))
	m.Sent("telegram", errors.New("boom"))
	m.JobDone("schedule", OK)
	m.JobDone("schedule", Error)
	m.JobSource("learning", func() map[string]uint64 { return map[string]uint64{OK: 4, Error: 1} })
	m.Channels(func() map[string]bool { return map[string]bool{"discord": true, "telegram": false} })
	m.ChannelRestarted("telegram")
	m.Paced("telegram", "dropped")
	m.Paced("telegram", "dropped")
	m.DeliveryStatus("whatsapp", "failed")
	m.DeliveryStatus("whatsapp", "warning")
	depth = 5
	out := scrape(t, m)
	for _, want := range []string{
		"switchboard_queue_depth 5",
		"switchboard_busy_chats 2",
		`switchboard_messages_sent_total{channel="telegram"} 1`,
		`switchboard_send_failures_total{channel="telegram"} 2`,
		`switchboard_background_jobs_total{job="schedule",outcome="ok"} 1`,
		`switchboard_background_jobs_total{job="schedule",outcome="error"} 1`,
		`switchboard_background_jobs_total{job="learning",outcome="ok"} 4`,
		`switchboard_background_jobs_total{job="learning",outcome="error"} 1`,
		`switchboard_channel_up{channel="discord"} 1`,
		`switchboard_channel_up{channel="telegram"} 0`,
		`switchboard_channel_restarts_total{channel="telegram"} 1`,
		`switchboard_outbound_paced_total{channel="telegram",outcome="dropped"} 2`,
		`switchboard_delivery_status_total{channel="whatsapp",status="failed"} 1`,
		`switchboard_delivery_status_total{channel="whatsapp",status="other"} 1`,
		"process_resident_memory_bytes",
		"go_goroutines",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return string(b)
}

// Among replicas, every series carries the replica's id, so that one
// Prometheus can tell them apart.
func TestReplicaLabel(t *testing.T) {
	m := NewReplica("dev", "gw-2")
	m.Queue(func() int { return 1 }, func() int { return 1 })
	m.Channels(func() map[string]bool { return map[string]bool{"telegram": true} })
	m.Sent("telegram", nil)
	out := scrape(t, m)
	for _, want := range []string{
		`switchboard_build_info{replica="gw-2",version="dev"} 1`,
		`switchboard_queue_depth{replica="gw-2"} 1`,
		`switchboard_channel_up{channel="telegram",replica="gw-2"} 1`,
		`switchboard_messages_sent_total{channel="telegram",replica="gw-2"} 1`,
		`go_goroutines{replica="gw-2"}`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if single := scrape(t, New("dev")); strings.Contains(single, "replica=") {
		t.Errorf("a single process's metrics carry a replica label")
	}
}

// The outbox's replies: queued, delivered late, dropped, and the gauge of
// those waiting.
func TestOutboxReplies(t *testing.T) {
	m := New("dev")
	pending := 2
	m.RepliesPending(func() int { return pending })
	m.Outbox("queued", "telegram")
	m.Outbox("queued", "telegram")
	m.Outbox("delivered", "telegram")
	m.Outbox("dropped", "discord")
	pending = 1
	out := scrape(t, m)
	for _, want := range []string{
		"switchboard_replies_pending 1",
		`switchboard_replies_queued_total{channel="telegram"} 2`,
		`switchboard_replies_delivered_late_total{channel="telegram"} 1`,
		`switchboard_replies_dropped_total{channel="discord"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// hangingModel streams one fragment when told, and answers when released.
type hangingModel struct{ delta, release chan struct{} }

func (h hangingModel) Complete(ctx context.Context, _ llm.Request, onDelta func(llm.Delta)) (llm.Response, error) {
	<-h.delta
	onDelta(llm.Delta{Text: "a"})
	<-h.release
	return llm.Response{Model: "m"}, nil
}

// Health counts the calls in flight and when the model last showed them
// life: the oldest call's start, then its last fragment; none after they
// end (/readyz's hang check).
func TestModelHealthInFlight(t *testing.T) {
	m := New("test")
	h := hangingModel{delta: make(chan struct{}), release: make(chan struct{})}
	o := m.ObserveModel(h, "m")
	clock := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	o.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	start := clock
	done := make(chan error)
	go func() {
		_, err := o.Complete(t.Context(), llm.Request{}, func(llm.Delta) {})
		done <- err
	}()
	waitHealth(t, o, func(h ModelHealth) bool { return h.InFlight == 1 })
	if got := o.Health(); got.Quiet != start {
		t.Errorf("quiet since %v, want the call's start %v", got.Quiet, start)
	}
	advance(time.Minute)
	h.delta <- struct{}{}
	waitHealth(t, o, func(h ModelHealth) bool { return h.Quiet.Equal(start.Add(time.Minute)) })
	close(h.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := o.Health(); got.InFlight != 0 || !got.Quiet.IsZero() {
		t.Errorf("after the call: %+v, want none in flight", got)
	}
}

// waitHealth polls o's health until ok (the call runs in its own
// goroutine; Health has no event to wait on).
func waitHealth(t *testing.T, o *Model, ok func(ModelHealth) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !ok(o.Health()) {
		select {
		case <-ctx.Done():
			t.Fatalf("health stayed %+v", o.Health())
		case <-tick.C:
		}
	}
}
