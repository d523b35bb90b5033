package chatapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/waitfor"
	"github.com/switchboard-gateway/switchboard/llm"
)

func TestChatCompletions(t *testing.T) {
	s := newStack(t, "")

	code, body := s.do("GET", "/v1/models", "", nil)
	if code != http.StatusOK || !strings.Contains(body, `"id": "switchboard"`) {
		t.Fatalf("models: %d %s", code, body)
	}

	// Not streaming: the reply is what the turn sent; usage is the turn's.
	s.scriptToolTurn("It is tea time.")
	got, resp := s.chat("ada", "What time is it?")
	if got != "It is tea time." {
		t.Fatalf("reply = %q", got)
	}
	if resp["object"] != "chat.completion" || !strings.HasPrefix(resp["id"].(string), "chatcmpl-") ||
		resp["usage"].(map[string]any)["total_tokens"].(float64) != 290 {
		t.Fatalf("response = %v", resp)
	}

	// The same user continues the session: the model sees the history.
	s.fake.Push(testkit.Reply{Text: "You asked the time."})
	if got, _ := s.chat("ada", "What did I ask?"); got != "You asked the time." {
		t.Fatalf("reply = %q", got)
	}
	reqs := s.fake.Requests()
	if !historyHas(reqs[len(reqs)-1].Messages, "What time is it?") {
		t.Fatal("the second request of the same user lacks the first message")
	}

	// Another user, named by the header, is another session.
	s.fake.Push(testkit.Reply{Text: "Hello Bob."})
	body2, _ := json.Marshal(map[string]any{"messages": []map[string]any{{"role": "user", "content": "I'm Bob"}}})
	code, out := s.do("POST", "/v1/chat/completions", string(body2), map[string]string{UserHeader: "bob"})
	if code != http.StatusOK || !strings.Contains(out, "Hello Bob.") {
		t.Fatalf("bob: %d %s", code, out)
	}
	reqs = s.fake.Requests()
	if historyHas(reqs[len(reqs)-1].Messages, "What time is it?") {
		t.Fatal("bob's session holds ada's messages")
	}

	// Streaming: a role chunk, the content, the finish, the usage, [DONE].
	s.fake.Push(testkit.Reply{Text: "Streamed answer.", Usage: &llm.Usage{PromptTokens: 5, CompletionTokens: 2, TotalTokens: 7}})
	events, done := s.streamChat("ada", "stream please")
	if !done {
		t.Fatal("no [DONE]")
	}
	var text strings.Builder
	var finish string
	var usage map[string]any
	for _, ev := range events {
		if ev["object"] != "chat.completion.chunk" {
			t.Fatalf("event %v", ev)
		}
		if u, ok := ev["usage"].(map[string]any); ok {
			usage = u
		}
		for _, c := range ev["choices"].([]any) {
			ch := c.(map[string]any)
			if d, ok := ch["delta"].(map[string]any); ok {
				if s, ok := d["content"].(string); ok {
					text.WriteString(s)
				}
			}
			if f, ok := ch["finish_reason"].(string); ok {
				finish = f
			}
		}
	}
	if text.String() != "Streamed answer." || finish != "stop" || usage == nil || usage["total_tokens"].(float64) != 7 {
		t.Fatalf("stream: text %q, finish %q, usage %v", text.String(), finish, usage)
	}

	// A command is answered without a turn.
	if got, _ := s.chat("ada", "/new"); !strings.Contains(got, "new conversation") {
		t.Fatalf("/new = %q", got)
	}
	if got, _ := s.chat("ada", "/help"); !strings.Contains(got, "/status") {
		t.Fatalf("/help = %q", got)
	}

	// Requests the API cannot take.
	for _, tt := range []struct{ body, want string }{
		{`{`, "invalid_json"},
		{`{"messages":[{"role":"system","content":"x"}]}`, "invalid_messages"},
		{`{"messages":[{"role":"user","content":"  "}]}`, "empty_message"},
		{`{"messages":[{"role":"user","content":{"a":1}}]}`, "invalid_messages"},
	} {
		code, out := s.do("POST", "/v1/chat/completions", tt.body, nil)
		if code != http.StatusBadRequest || !strings.Contains(out, tt.want) {
			t.Errorf("body %s: %d %s, want 400 %s", tt.body, code, out, tt.want)
		}
	}
}

func historyHas(msgs []llm.Message, text string) bool {
	for _, m := range msgs {
		if m.Role == llm.RoleUser && m.Content == text {
			return true
		}
	}
	return false
}

// A request waiting at shutdown gets a clear 503 once its turn is
// checkpointed, and the API takes no new requests.
func TestChatAtShutdown(t *testing.T) {
	s := newStack(t, "")
	release := make(chan struct{})
	s.fake.Push(testkit.Reply{Text: "too late", Block: release})
	defer close(release)
	type result struct {
		code int
		body string
	}
	res := make(chan result, 1)
	go func() {
		code, body := s.do("POST", "/v1/chat/completions", `{"user":"ada","messages":[{"role":"user","content":"slow"}]}`, nil)
		res <- result{code, body}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.fake.WaitCalls(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s.stopAPI() // SIGTERM: the API takes no new requests
	code, body := s.do("POST", "/v1/chat/completions", `{"user":"bob","messages":[{"role":"user","content":"hi"}]}`, nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "not_running") {
		t.Fatalf("new request while shutting down: %d %s", code, body)
	}
	sctx, scancel := context.WithCancel(t.Context())
	scancel() // no grace: the running turn is checkpointed at once
	_ = s.router.Shutdown(sctx)
	hctx, hcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer hcancel()
	go func() { _ = s.shutdown(hctx) }()
	r := <-res
	if r.code != http.StatusServiceUnavailable || !strings.Contains(r.body, "shutting_down") {
		t.Fatalf("waiting request at shutdown: %d %s", r.code, r.body)
	}
}

// A request that comes while the gateway starts (the HTTP server listens a
// moment before the channels run) waits for the chat API to run and is
// answered, not refused with 503.
func TestChatWhileStarting(t *testing.T) {
	runLater := make(chan struct{})
	s := newStack(t, "", stackExtras{runLater: runLater})
	s.fake.Push(testkit.Reply{Text: "Here now."})
	waiting := startWaiters.Load()
	type result struct {
		code int
		body string
	}
	res := make(chan result, 1)
	go func() {
		code, body := s.do("POST", "/v1/chat/completions", `{"user":"ada","messages":[{"role":"user","content":"early"}]}`, nil)
		res <- result{code, body}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := waitfor.Poll(ctx, time.Millisecond, func() bool { return startWaiters.Load() > waiting }); err != nil {
		t.Fatal("the early request never waited for the chat API to start")
	}
	close(runLater)
	r := <-res
	if r.code != http.StatusOK || !strings.Contains(r.body, "Here now.") {
		t.Fatalf("early request: %d %s, want 200 with the answer", r.code, r.body)
	}
}
