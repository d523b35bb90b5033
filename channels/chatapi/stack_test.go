package chatapi

// A real gateway for the tests: SQLite in a temporary directory, the agent
// loop, the router and this channel's routes served on 127.0.0.1, with the
// scripted fake model server from internal/testkit. The HTTP server of
// httpapi is not part of it (it imports this package): a token, when the
// stack has one, is checked here the way that server checks it.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/approvals"
	"github.com/switchboard-gateway/switchboard/internal/httpjson"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/store"
)

const testToken = "test-http-token-0123456789"

type stack struct {
	t       *testing.T
	fake    *testkit.FakeLLM
	store   *store.Store
	router  *router.Router
	api     *API
	srv     *http.Server
	url     string
	token   string
	stopAPI func() // ends the API channel's Run, as serve's context does at SIGTERM
	model   *llm.Client
	agent   *agent.Agent
}

// stackExtras adds to a stack: tools, the approvals interceptor, a logger
// for the API channel.
type stackExtras struct {
	tools     []*agent.Tool
	approvals bool
	log       *slog.Logger
	// fake is the model server (default: a new testkit fake); model
	// adjusts the model client's configuration; maxOutput is the agent's
	// output cap.
	fake      *testkit.FakeLLM
	model     func(*llm.Config)
	maxOutput int
	// runLater, when set, holds the chat API's Run until it is closed
	// (the gateway starting: the HTTP server listens first).
	runLater chan struct{}
}

// newStack starts the gateway with the chat API's routes; with a token,
// requests without it are refused.
func newStack(t *testing.T, token string, extras ...stackExtras) *stack {
	t.Helper()
	var ex stackExtras
	for _, e := range extras {
		ex = e
	}
	s := &stack{t: t, fake: ex.fake, token: token}
	if s.fake == nil {
		s.fake = testkit.NewFakeLLM(t)
	}
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "switchboard.db"))
	if err != nil {
		t.Fatal(err)
	}
	s.store = st
	mc := llm.Config{BaseURL: s.fake.URL, APIKey: "sk-test", Model: "fake-model", MaxRetries: -1}
	if ex.model != nil {
		ex.model(&mc)
	}
	client, err := llm.New(mc)
	if err != nil {
		t.Fatal(err)
	}
	s.model = client
	ag, err := agent.New(agent.Config{Model: client, Store: st, MaxOutputTokens: ex.maxOutput,
		Sources: []agent.Source{agent.Builtin(nil, time.UTC), agent.ChannelContext(), agent.StaticSource{SourceName: "test", List: ex.tools}}})
	if err != nil {
		t.Fatal(err)
	}
	s.agent = ag
	s.api = New("Switchboard", func(err error) bool { return errors.Is(err, router.ErrShuttingDown) }, ex.log)
	var interceptors []router.Interceptor
	if ex.approvals {
		interceptors = append(interceptors, approvals.New(approvals.Config{Store: st}))
	}
	rt, err := router.New(router.Config{Store: st, Agent: ag, ModelName: "fake-model", Interceptors: interceptors})
	if err != nil {
		t.Fatal(err)
	}
	s.router = rt
	rt.AddChannel(s.api, router.Access{AllowAll: true})
	if err := rt.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		if ex.runLater != nil {
			select {
			case <-ex.runLater:
			case <-runCtx.Done():
				return
			}
		}
		_ = s.api.Run(runCtx, rt)
	}()
	if ex.runLater == nil {
		<-s.api.Started()
	}
	s.stopAPI = func() {
		stopRun()
		<-runDone
	}

	mux := http.NewServeMux()
	for pattern, h := range s.api.Routes() {
		mux.Handle(pattern, s.requireToken(h))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.url = "http://" + ln.Addr().String()
	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Shutdown(ctx)
		s.stopAPI()
		if err := s.shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
		st.Close()
	})
	return s
}

// requireToken refuses a request without the stack's bearer token (if it
// has one) with 401 in the OpenAI error shape, as httpapi's server does.
func (s *stack) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if s.token == "" || (strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(tok) == s.token) {
			next.ServeHTTP(w, r)
			return
		}
		httpjson.Error(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "missing or wrong bearer token")
	})
}

// shutdown stops serving as httpapi's server does: the waiting requests
// are answered (Abandon), then the open connections are waited for.
func (s *stack) shutdown(ctx context.Context) error {
	s.api.Abandon()
	return s.srv.Shutdown(ctx)
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

// streamChat posts a streaming chat completion and returns the decoded
// data events (without [DONE]) and whether [DONE] came.
func (s *stack) streamChat(user, text string) ([]map[string]any, bool) {
	s.t.Helper()
	return s.streamChatWith(user, text, nil)
}

// streamChatWith is streamChat with extra request fields.
func (s *stack) streamChatWith(user, text string, extra map[string]any) ([]map[string]any, bool) {
	s.t.Helper()
	req := map[string]any{"model": "switchboard", "user": user, "stream": true,
		"stream_options": map[string]any{"include_usage": true},
		"messages":       []map[string]any{{"role": "user", "content": text}}}
	maps.Copy(req, extra)
	body, _ := json.Marshal(req)
	hreq, err := http.NewRequestWithContext(s.t.Context(), "POST", s.url+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if s.token != "" {
		hreq.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		s.t.Fatalf("stream: status %d, type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var events []map[string]any
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			break
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			s.t.Fatalf("stream event %q: %v", line, err)
		}
		events = append(events, ev)
	}
	return events, done
}

// scriptToolTurn queues a turn that calls current_time, then answers.
func (s *stack) scriptToolTurn(answer string) { testkit.ScriptToolTurn(s.fake, answer) }
