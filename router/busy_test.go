package router

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/reply"
)

// lineChannel records what was sent to each chat with the priority it
// was sent at; inProcess makes it an InProcessReplier (the chat API).
type lineChannel struct {
	name      string
	inProcess bool
	mu        sync.Mutex
	sent      map[string][]string
	preview   map[string][]bool // per send: sent at channels.PriorityPreview
	// pacePreviews drops every preview with channels.ErrPaced, as a
	// channel's outbound pacing does under pressure.
	pacePreviews bool
}

func newLineChannel(name string, inProcess bool) *lineChannel {
	return &lineChannel{name: name, inProcess: inProcess, sent: map[string][]string{}, preview: map[string][]bool{}}
}

func (c *lineChannel) Name() string                                   { return c.name }
func (c *lineChannel) Run(ctx context.Context, _ channels.Sink) error { <-ctx.Done(); return nil }
func (c *lineChannel) RepliesInProcess() bool                         { return c.inProcess }
func (c *lineChannel) Send(ctx context.Context, m channels.Outbound) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pacePreviews && channels.PriorityOf(ctx) == channels.PriorityPreview {
		return "", channels.ErrPaced
	}
	c.sent[m.ChatID] = append(c.sent[m.ChatID], m.Text)
	c.preview[m.ChatID] = append(c.preview[m.ChatID], channels.PriorityOf(ctx) == channels.PriorityPreview)
	return fmt.Sprintf("out-%d", len(c.sent)), nil
}

func (c *lineChannel) chat(id string) ([]string, []bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sent[id]), slices.Clone(c.preview[id])
}

// deliverAll delivers the messages in this order, one after the other
// in line, then waits until all are handled; it returns the time that took.
func deliverAll(t *testing.T, r *Router, ins ...channels.Inbound) time.Duration {
	t.Helper()
	start := time.Now()
	for _, in := range ins {
		if err := r.Deliver(t.Context(), in); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
	}
	if err := r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

func lineMsg(channel, chat, text string) channels.Inbound {
	in := msg(chat, "u-"+chat, text)
	in.Channel = channel
	return in
}

// slowRunner's turns take 5 s (of the test's virtual clock) without a
// model, then answer "echo: <text>".
type slowRunner struct{}

func (slowRunner) Run(ctx context.Context, t agent.Turn) agent.Result {
	elapse(5 * time.Second)
	if _, err := t.Chat.Send(ctx, "echo: "+t.Input.Content); err != nil {
		return agent.Result{StopReason: agent.StopLLMError, Err: err}
	}
	return agent.Result{StopReason: agent.StopEndTurn, Delivered: true}
}

// Messages that wait for a turn slot are served first come, first served,
// and a user who waited QueueNoticeAfter is told once, as a preview, how
// many are ahead; one whose wait ends sooner is told nothing, and the
// chat API's requester (an in-process channel) never is.
func TestTurnQueueNotice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openWaitStore(t)
		r, _ := startWaitRouter(t, Config{Store: st, Agent: slowRunner{}, MaxConcurrentTurns: 2})
		defer r.Shutdown(context.Background())
		tg, api := newLineChannel("tg", false), newLineChannel("api", true)
		r.AddChannel(tg, everyone)
		r.AddChannel(api, everyone)
		d := deliverAll(t, r, lineMsg("tg", "c1", "one"), lineMsg("tg", "c2", "two"),
			lineMsg("api", "a3", "three"), lineMsg("tg", "c4", "four"), lineMsg("tg", "c5", "five"))
		// c1 and c2 run at 0 s, a3 and c4 at 5 s, c5 at 10 s: everyone but
		// c1 and c2 waited more than 2 s.
		if d != 15*time.Second {
			t.Errorf("all answered after %s, want 15s", d)
		}
		want := map[string][]string{
			"c1": {"echo: one"},
			"c2": {"echo: two"},
			"c4": {busyText(1), "echo: four"},
			"c5": {busyText(2), "echo: five"},
		}
		for chat, w := range want {
			got, preview := tg.chat(chat)
			if !slices.Equal(got, w) {
				t.Errorf("%s got %q, want %q", chat, got, w)
				continue
			}
			if len(w) == 2 && (!preview[0] || preview[1]) {
				t.Errorf("%s: sent as previews %v, want only the notice", chat, preview)
			}
		}
		if got, _ := api.chat("a3"); !slices.Equal(got, []string{"echo: three"}) {
			t.Errorf("the in-process requester got %q, want only its answer", got)
		}
		if !strings.Contains(busyText(2), "2 people are ahead of you") || !strings.Contains(busyText(0), "you're next") {
			t.Errorf("notices %q, %q", busyText(2), busyText(0))
		}
	})
}

// A queue notice that the channel's pacing drops is not a failed send: the
// send metrics see only the answers, which went.
func TestDroppedQueueNoticeIsNoFailedSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openWaitStore(t)
		var mu sync.Mutex
		var outcomes []error
		onSend := func(_ string, err error) { mu.Lock(); outcomes = append(outcomes, err); mu.Unlock() }
		r, _ := startWaitRouter(t, Config{Store: st, Agent: slowRunner{}, MaxConcurrentTurns: 1, Replies: reply.Options{OnSend: onSend}})
		defer r.Shutdown(context.Background())
		tg := newLineChannel("tg", false)
		tg.pacePreviews = true
		r.AddChannel(tg, everyone)
		deliverAll(t, r, lineMsg("tg", "c1", "one"), lineMsg("tg", "c2", "two"))
		if got, _ := tg.chat("c2"); !slices.Equal(got, []string{"echo: two"}) {
			t.Errorf("c2 got %q, want its answer (the notice dropped)", got)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(outcomes) != 2 || outcomes[0] != nil || outcomes[1] != nil {
			t.Errorf("send outcomes %v, want the two answers, both sent", outcomes)
		}
	})
}

// A burst that clears within QueueNoticeAfter tells nobody anything.
func TestShortWaitNoNotice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openWaitStore(t)
		r, _ := startWaitRouter(t, Config{Store: st, Agent: quickRunner{}, MaxConcurrentTurns: 1})
		defer r.Shutdown(context.Background())
		tg := newLineChannel("tg", false)
		r.AddChannel(tg, everyone)
		deliverAll(t, r, lineMsg("tg", "c1", "hi"), lineMsg("tg", "c2", "hi"), lineMsg("tg", "c3", "hi"))
		for _, c := range []string{"c1", "c2", "c3"} { // the last waited 1.8 s
			if got, _ := tg.chat(c); !slices.Equal(got, []string{"echo: hi"}) {
				t.Errorf("%s got %q, want only the answer", c, got)
			}
		}
	})
}

// quickRunner's turns take 900 ms.
type quickRunner struct{}

func (quickRunner) Run(ctx context.Context, t agent.Turn) agent.Result {
	elapse(900 * time.Millisecond)
	_, _ = t.Chat.Send(ctx, "echo: "+t.Input.Content)
	return agent.Result{StopReason: agent.StopEndTurn, Delivered: true}
}

// slowModel is an OpenAI-compatible server in memory: every request
// answers "ok" after 5 s of the test's virtual clock.
type slowModel struct{}

func (slowModel) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	select {
	case <-time.After(5 * time.Second):
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	body := `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"ok"}}]}` + "\n\n" +
		`data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
}

// twoCalls runs turns of two model requests through a real model client.
type twoCalls struct{ model *llm.Client }

func (m twoCalls) Run(ctx context.Context, t agent.Turn) agent.Result {
	for range 2 {
		if _, err := m.model.Complete(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: t.Input.Content}}}, nil); err != nil {
			return agent.Result{StopReason: agent.StopLLMError, Err: err}
		}
	}
	_, _ = t.Chat.Send(ctx, "echo: "+t.Input.Content)
	return agent.Result{StopReason: agent.StopEndTurn, Delivered: true}
}

// A turn whose model request waits under llm.max_concurrent_requests
// tells its user once, however many of its requests wait.
func TestModelQueueNotice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		model, err := llm.New(llm.Config{BaseURL: "http://model.invalid/v1", Model: "m", MaxConcurrentRequests: 1,
			HTTPClient: &http.Client{Transport: slowModel{}}})
		if err != nil {
			t.Fatal(err)
		}
		st := openWaitStore(t)
		r, _ := startWaitRouter(t, Config{Store: st, Agent: twoCalls{model}})
		defer r.Shutdown(context.Background())
		tg := newLineChannel("tg", false)
		r.AddChannel(tg, everyone)
		d := deliverAll(t, r, lineMsg("tg", "c1", "hi c1"), lineMsg("tg", "c2", "hi c2"))
		// One request at a time, 5 s each: c1 0-5, c2 5-10, c1 10-15, c2
		// 15-20. c2 waited from 0 (told at 2 s) and from 10; c1 from 5
		// (told at 7 s).
		if d != 20*time.Second {
			t.Errorf("all answered after %s, want 20s", d)
		}
		for _, c := range []string{"c1", "c2"} {
			got, preview := tg.chat(c)
			if want := []string{busyText(0), "echo: hi " + c}; !slices.Equal(got, want) || !preview[0] {
				t.Errorf("%s got %q (previews %v), want %q with the notice a preview", c, got, preview, want)
			}
		}
	})
}
