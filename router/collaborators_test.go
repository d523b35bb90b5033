package router

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// fakeInterceptor records how the router consults it: it consumes "answer",
// takes "/take", queues a turn of its own on "resume" and stops on /stop.
type fakeInterceptor struct {
	mu     sync.Mutex
	calls  []string
	paused []int64
	chats  Chats
	st     *store.Store
	swept  chan struct{}
}

func (f *fakeInterceptor) note(s string) {
	f.mu.Lock()
	f.calls = append(f.calls, s)
	f.mu.Unlock()
}

func (f *fakeInterceptor) Start(_ context.Context, c Chats) { f.chats = c }

func (f *fakeInterceptor) Intercept(_ context.Context, in channels.Inbound) (bool, error) {
	f.note("intercept " + in.Text)
	switch in.Text {
	case "answer":
		return true, nil
	case "resume":
		f.chats.Queue(in, func(ctx context.Context) {
			chat, _ := f.st.EnsureChat(ctx, in.Channel, in.ChatID, string(in.ChatType), "")
			sess, _ := f.st.OpenSession(ctx, chat.ID)
			f.chats.RunTurn(ctx, ChatTurn{In: in, Reply: in, ChatID: chat.ID, SessionID: sess.ID, Unrecorded: true,
				Adjust: func(t *agent.Turn) { t.Input = llm.Message{Role: llm.RoleUser, Content: "resumed"} }})
		})
		return true, nil
	}
	return false, nil
}

func (f *fakeInterceptor) Take(_ context.Context, in channels.Inbound, prepare func() Prepared) bool {
	f.note("take " + in.Text)
	if in.Text == "/take" {
		return true
	}
	prepare()
	return false
}

func (f *fakeInterceptor) Paused(_ context.Context, in channels.Inbound, inboxID int64, _ agent.Result) {
	f.note("paused " + in.Text)
	f.mu.Lock()
	f.paused = append(f.paused, inboxID)
	f.mu.Unlock()
}

func (f *fakeInterceptor) Stop(context.Context, channels.Inbound) (string, bool) {
	f.note("stop")
	return "Stopping the fake.", true
}

func (f *fakeInterceptor) Sweep(context.Context) {
	f.note("sweep")
	f.swept <- struct{}{}
}

// pausingRunner pauses the turn of "pause" for approval.
type pausingRunner struct{ *fakeRunner }

func (p pausingRunner) Run(ctx context.Context, t agent.Turn) agent.Result {
	if t.Input.Content == "pause" {
		return agent.Result{StopReason: agent.StopRequiresApproval, TurnID: 7}
	}
	return p.fakeRunner.Run(ctx, t)
}

// The router consults its interceptors at each point of a message's way,
// and runs the work they queue in the chat's FIFO.
func TestInterceptorSeam(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ticks := make(chan time.Time)
	ic := &fakeInterceptor{st: st, swept: make(chan struct{}, 1)}
	prepared := 0
	runner := newFakeRunner()
	r, err := New(Config{Store: st, Agent: pausingRunner{runner}, Interceptors: []Interceptor{ic},
		Hooks:     Hooks{Prepare: func(context.Context, channels.Inbound, int64) Prepared { prepared++; return Prepared{} }},
		NewTicker: func(time.Duration) Ticker { return manualTicker{c: ticks} }})
	if err != nil {
		t.Fatal(err)
	}
	ch := newFakeChannel()
	r.AddChannel(ch, everyone)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(context.Background())
	say := func(text string) {
		t.Helper()
		if err := r.Deliver(t.Context(), msg("c1", "u", text)); err != nil {
			t.Fatal(err)
		}
		if err := r.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for _, text := range []string{"answer", "/take", "hello", "pause", "resume", "/stop"} {
		say(text)
	}
	ticks <- time.Now()
	<-ic.swept

	want := []string{"intercept answer", "intercept /take", "take /take", "intercept hello", "take hello",
		"intercept pause", "take pause", "paused pause", "intercept resume", "stop", "sweep"}
	if !slices.Equal(ic.calls, want) {
		t.Fatalf("calls = %q\nwant    %q", ic.calls, want)
	}
	// Once a turn (hello, pause, the resumed one), shared by the
	// interceptors' Take and the turn; none for /take.
	if prepared != 3 {
		t.Fatalf("Prepare ran %d times; want 3", prepared)
	}
	if got := ch.Texts(); !slices.Equal(got, []string{"echo: hello", "echo: resumed", "Stopping the fake."}) {
		t.Fatalf("sent %q", got)
	}
	if len(ic.paused) != 1 || ic.paused[0] == 0 {
		t.Fatalf("paused inbox ids = %v", ic.paused)
	}
	if pending, _ := st.PendingInbox(t.Context()); len(pending) != 0 {
		t.Fatalf("%d messages pending", len(pending))
	}
}

// pairInterceptor has only the required pair: it consumes "answer".
type pairInterceptor struct{ intercepted []string }

func (p *pairInterceptor) Start(context.Context, Chats) {}

func (p *pairInterceptor) Intercept(_ context.Context, in channels.Inbound) (bool, error) {
	p.intercepted = append(p.intercepted, in.Text)
	return in.Text == "answer", nil
}

// An interceptor without the optional interfaces (Taker, Pauser, Stopper,
// Sweeper) is consulted only through the required pair: every other
// message takes its usual way, and its sweep ticks call nothing.
func TestInterceptorRequiredPairOnly(t *testing.T) {
	ticks := make(chan time.Time)
	ic := &pairInterceptor{}
	ch := newFakeChannel()
	r := startRouter(t, Config{Agent: pausingRunner{newFakeRunner()}, Interceptors: []Interceptor{ic},
		NewTicker: func(time.Duration) Ticker { return manualTicker{c: ticks} }}, ch)
	defer r.Shutdown(context.Background())
	for _, text := range []string{"answer", "/take", "pause", "/stop"} {
		if err := r.Deliver(t.Context(), msg("c1", "u", text)); err != nil {
			t.Fatal(err)
		}
		if err := r.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	ticks <- time.Now() // the sweep goroutine takes the tick and calls nothing
	if want := []string{"answer", "/take", "pause"}; !slices.Equal(ic.intercepted, want) {
		t.Fatalf("intercepted %q, want %q", ic.intercepted, want)
	}
	if got, want := ch.Texts(), []string{"echo: /take", "Nothing to stop."}; !slices.Equal(got, want) {
		t.Fatalf("sent %q, want %q", got, want)
	}
}

// manualTicker is a ticker the test drives (the interceptors' sweep).
type manualTicker struct{ c chan time.Time }

func (m manualTicker) C() <-chan time.Time { return m.c }
func (m manualTicker) Stop()               {}
