package httpapi

// A real gateway for the tests: SQLite in a temporary directory, the agent
// loop, the router, the metrics and this package's server on 127.0.0.1,
// with the scripted fake model server from internal/testkit. The chat API
// of channels/chatapi, mounted as in serve, makes the turns.

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/approvals"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/chatapi"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/metrics"
	"github.com/switchboard-gateway/switchboard/reply"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/store"
)

const testToken = "test-http-token-0123456789"

// The chat API as the server mounts it.
var _ ChatAPI = (*chatapi.API)(nil)

type stack struct {
	t        *testing.T
	fake     *testkit.FakeLLM
	store    *store.Store
	router   *router.Router
	api      *chatapi.API
	activity *Activity
	metrics  *metrics.Metrics
	model    *metrics.Model
	srv      *Server
	url      string
	token    string
	stopAPI  func() // ends the API channel's Run, as serve's context does at SIGTERM
}

// stackExtras adds to a stack: tools, and the approvals interceptor.
type stackExtras struct {
	tools     []*agent.Tool
	approvals bool
}

// newStack starts the gateway; edit adjusts the server options (a token,
// channel statuses) before the server is built.
func newStack(t *testing.T, edit func(*Options), extras ...stackExtras) *stack {
	t.Helper()
	var ex stackExtras
	for _, e := range extras {
		ex = e
	}
	s := &stack{t: t, fake: testkit.NewFakeLLM(t)}
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "switchboard.db"))
	if err != nil {
		t.Fatal(err)
	}
	s.store = st
	client, err := llm.New(llm.Config{BaseURL: s.fake.URL, APIKey: "sk-test", Model: "fake-model", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	s.metrics = metrics.New("test")
	s.model = s.metrics.ObserveModel(client, "fake-model")
	ag, err := agent.New(agent.Config{Model: s.model, Store: st,
		Sources: []agent.Source{agent.Builtin(nil, time.UTC), agent.ChannelContext(), agent.StaticSource{SourceName: "test", List: ex.tools}}})
	if err != nil {
		t.Fatal(err)
	}
	s.activity = NewActivity()
	s.api = chatapi.New("Switchboard", func(err error) bool { return errors.Is(err, router.ErrShuttingDown) }, nil)
	var interceptors []router.Interceptor
	if ex.approvals {
		interceptors = append(interceptors, approvals.New(approvals.Config{Store: st}))
	}
	rt, err := router.New(router.Config{Store: st, Agent: ag, ModelName: "fake-model", Interceptors: interceptors,
		Hooks: router.Hooks{OnEvent: func(in channels.Inbound, ev agent.Event) {
			s.metrics.Observe(in, ev)
			s.activity.Observe(in, ev)
		}},
		Replies: reply.Options{OnSend: s.metrics.Sent},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.router = rt
	s.metrics.Queue(rt.QueueDepth, rt.Busy)
	rt.AddChannel(s.api, router.Access{AllowAll: true})
	if err := rt.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		_ = s.api.Run(runCtx, rt)
	}()
	<-s.api.Started()
	s.stopAPI = func() {
		stopRun()
		<-runDone
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Listen: ln.Addr().String(), AgentName: "Switchboard", ModelName: "fake-model", Version: "test",
		Store: st, Metrics: s.metrics.Handler(), Gatherer: s.metrics.Registry(), API: s.api, Activity: s.activity, Model: s.model, Probe: client.Probe,
		Queue: func() (int, int) { return rt.QueueDepth(), rt.Busy() }}
	if edit != nil {
		edit(&opts)
	}
	s.token = opts.Token
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.srv = srv
	s.url = "http://" + ln.Addr().String()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Shutdown(ctx)
		s.stopAPI()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		st.Close()
	})
	return s
}

// do sends a request with the stack's token (if any) and returns status
// and body.
func (s *stack) do(method, path, body string, header map[string]string) (int, string) {
	s.t.Helper()
	return testkit.HTTPDo(s.t, s.url, s.token, method, path, body, header)
}

// chat posts a non-streaming chat completion and returns the reply text.
func (s *stack) chat(user, text string) (string, map[string]any) {
	s.t.Helper()
	return testkit.Chat(s.t, s.url, s.token, user, text)
}

// scriptToolTurn queues a turn that calls current_time, then answers.
func (s *stack) scriptToolTurn(answer string) { testkit.ScriptToolTurn(s.fake, answer) }
