package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

const apiKey = "sk-secret-0123456789"

// sleeper records the waits a client asks for and returns at once.
type sleeper struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *sleeper) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits = append(s.waits, d)
	return ctx.Err()
}

func (s *sleeper) Waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.waits)
}

// logBuffer is a goroutine-safe sink for a JSON slog handler.
type logBuffer struct{ testkit.SyncBuffer }

// records decodes the JSON log lines.
func (l *logBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(l.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

type harness struct {
	fake   *testkit.FakeLLM
	client *llm.Client
	sleep  *sleeper
	logs   *logBuffer
}

// Backoff waits with the test jitter of 0.5: half the step plus a quarter.
const (
	backoff1 = 375 * time.Millisecond
	backoff2 = 750 * time.Millisecond
	backoff3 = 1500 * time.Millisecond
)

func newHarness(t testing.TB, edit func(*llm.Config)) *harness {
	t.Helper()
	h := &harness{fake: testkit.NewFakeLLM(t), sleep: &sleeper{}, logs: &logBuffer{}}
	cfg := llm.Config{
		BaseURL: h.fake.URL,
		APIKey:  apiKey,
		Model:   "primary",
		Logger:  slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Sleep:   h.sleep.Sleep,
		Rand:    func() float64 { return 0.5 },
	}
	if edit != nil {
		edit(&cfg)
	}
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.client = c
	return h
}

func userSays(text string) llm.Request {
	return llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: text}}}
}

// complete runs a call and returns the deltas it streamed.
func (h *harness) complete(t *testing.T, req llm.Request) (llm.Response, []string, error) {
	t.Helper()
	var deltas []string
	resp, err := h.client.Complete(t.Context(), req, func(d llm.Delta) { deltas = append(deltas, d.Text) })
	return resp, deltas, err
}

func (h *harness) models() []string {
	var out []string
	for _, r := range h.fake.Requests() {
		out = append(out, r.Model)
	}
	return out
}

func TestCompleteStreamsText(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.Push(testkit.Reply{TextChunks: []string{"Hel", "lo, ", "wörld", "!"}})
	resp, deltas, err := h.complete(t, userSays("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Hel", "lo, ", "wörld", "!"}; !slices.Equal(deltas, want) {
		t.Errorf("deltas = %q, want %q", deltas, want)
	}
	want := llm.Response{
		Message:      llm.Message{Role: llm.RoleAssistant, Content: "Hello, wörld!"},
		FinishReason: llm.FinishStop,
		Usage:        resp.Usage, // checked below
		Model:        "primary",
	}
	if fmt.Sprint(resp) != fmt.Sprint(want) {
		t.Errorf("resp = %+v\nwant %+v", resp, want)
	}
	if resp.Usage.TotalTokens == 0 {
		t.Error("usage not recorded")
	}
	reqs := h.fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("calls = %d, want 1", len(reqs))
	}
	r := reqs[0]
	if !r.Stream || !r.IncludeUsage || r.Model != "primary" || r.Header.Get("Authorization") != "Bearer "+apiKey {
		t.Errorf("request: stream=%v include_usage=%v model=%q auth=%q", r.Stream, r.IncludeUsage, r.Model, r.Header.Get("Authorization"))
	}
	if len(r.Messages) != 1 || r.Messages[0].Content != "hi" || r.Messages[0].Role != llm.RoleUser {
		t.Errorf("messages = %+v", r.Messages)
	}
}

func TestCompleteNilOnDelta(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.Push(testkit.Reply{Text: "fine"})
	resp, err := h.client.Complete(t.Context(), userSays("hi"), nil)
	if err != nil || resp.Message.Content != "fine" {
		t.Errorf("got %q, %v", resp.Message.Content, err)
	}
}

func TestCompleteToolCalls(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.Push(testkit.Reply{
		Text: "Let me check. ",
		ToolCalls: []llm.ToolCall{
			testkit.Call("call_a", "get_weather", `{"city":"Paris","note":"naïve ☂"}`),
			testkit.Call("call_b", "get_time", `{"tz":"UTC"}`),
			testkit.Call("call_c", "ping", ""),
		},
		Usage: &llm.Usage{PromptTokens: 40, CompletionTokens: 12, TotalTokens: 52},
	})
	resp, deltas, err := h.complete(t, userSays("weather?"))
	if err != nil {
		t.Fatal(err)
	}
	wantCalls := []llm.ToolCall{
		{ID: "call_a", Name: "get_weather", Arguments: `{"city":"Paris","note":"naïve ☂"}`},
		{ID: "call_b", Name: "get_time", Arguments: `{"tz":"UTC"}`},
		{ID: "call_c", Name: "ping", Arguments: "{}"},
	}
	if !slices.Equal(resp.Message.ToolCalls, wantCalls) {
		t.Errorf("tool calls =\n%+v\nwant\n%+v", resp.Message.ToolCalls, wantCalls)
	}
	if resp.Message.Content != "Let me check. " || strings.Join(deltas, "") != "Let me check. " {
		t.Errorf("content = %q, deltas = %q", resp.Message.Content, deltas)
	}
	if resp.FinishReason != llm.FinishToolCalls {
		t.Errorf("finish = %q", resp.FinishReason)
	}
	if want := (llm.Usage{PromptTokens: 40, CompletionTokens: 12, TotalTokens: 52}); resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
}

// The calls of the tools named in StreamCalls reach onDelta fragment by
// fragment, with their index, id and name on each; other calls do not.
func TestCompleteStreamsNamedCalls(t *testing.T) {
	const args = `{"text":"Hello \"there\" ☂, in pieces"}`
	for _, named := range [][]string{{"send_message"}, nil} {
		h := newHarness(t, nil)
		h.fake.Push(testkit.Reply{
			Text:      "Sure. ",
			ArgPieces: 5,
			ToolCalls: []llm.ToolCall{
				testkit.Call("call_t", "get_time", `{"tz":"UTC"}`),
				testkit.Call("call_s", "send_message", args),
			},
		})
		var text, got strings.Builder
		var frags int
		resp, err := h.client.Complete(t.Context(), llm.Request{Messages: userSays("hi").Messages, StreamCalls: named}, func(d llm.Delta) {
			text.WriteString(d.Text)
			if d.ToolName == "" {
				return
			}
			if d.Text != "" || d.ToolName != "send_message" || d.ToolID != "call_s" || d.ToolIndex != 1 {
				t.Errorf("delta %+v", d)
			}
			frags++
			got.WriteString(d.ToolArgs)
		})
		if err != nil {
			t.Fatal(err)
		}
		if text.String() != "Sure. " || len(resp.Message.ToolCalls) != 2 || resp.Message.ToolCalls[1].Arguments != args {
			t.Errorf("text %q, calls %+v", text.String(), resp.Message.ToolCalls)
		}
		switch {
		case named != nil && (got.String() != args || frags < 4):
			t.Errorf("streamed %d fragments %q, want %q in several", frags, got.String(), args)
		case named == nil && frags != 0:
			t.Errorf("without StreamCalls, %d call fragments were handed out", frags)
		}
	}
}

func TestCompleteRequestMapping(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.Push(testkit.Reply{Text: "ok"})
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	schema := json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)
	req := llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "be brief"},
			{Role: llm.RoleUser, Content: "what is on these?", Images: []llm.Image{
				{MIME: "image/jpeg", Data: []byte{0xff, 0xd8, 0xff}},
				{Data: png}, // MIME sniffed
				{URL: "https://example.invalid/cat.jpg"},
			}},
			{Role: llm.RoleAssistant, Content: "checking", ToolCalls: []llm.ToolCall{
				{ID: "c1", Name: "search", Arguments: `{"q":"cats"}`},
				{ID: "c2", Name: "now", Arguments: ""},
			}},
			{Role: llm.RoleTool, ToolCallID: "c1", Name: "search", Content: "many cats"},
			{Role: llm.RoleTool, ToolCallID: "c2", Name: "now", Content: "noon"},
		},
		Tools: []llm.ToolSpec{
			{Name: "search", Description: "web search", Parameters: schema},
			{Name: "now", Description: "the time"},
		},
		MaxTokens: 256,
		ForceTool: "search",
	}
	if _, _, err := h.complete(t, req); err != nil {
		t.Fatal(err)
	}
	r := h.fake.Requests()[0]
	if r.MaxTokens != 256 || r.ForcedTool != "search" {
		t.Errorf("max_tokens = %d, forced tool = %q", r.MaxTokens, r.ForcedTool)
	}
	wantTools := []llm.ToolSpec{
		{Name: "search", Description: "web search", Parameters: schema},
		{Name: "now", Description: "the time", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
	}
	if fmt.Sprintf("%s", r.Tools) != fmt.Sprintf("%s", wantTools) {
		t.Errorf("tools = %s\nwant %s", r.Tools, wantTools)
	}
	wantMsgs := []llm.Message{
		{Role: llm.RoleSystem, Content: "be brief"},
		{Role: llm.RoleUser, Content: "what is on these?", Images: []llm.Image{
			{MIME: "image/jpeg", Data: []byte{0xff, 0xd8, 0xff}},
			{MIME: "image/png", Data: png},
			{URL: "https://example.invalid/cat.jpg"},
		}},
		{Role: llm.RoleAssistant, Content: "checking", ToolCalls: []llm.ToolCall{
			{ID: "c1", Name: "search", Arguments: `{"q":"cats"}`},
			{ID: "c2", Name: "now", Arguments: "{}"},
		}},
		{Role: llm.RoleTool, ToolCallID: "c1", Content: "many cats"},
		{Role: llm.RoleTool, ToolCallID: "c2", Content: "noon"},
	}
	if got, want := jsonOf(t, r.Messages), jsonOf(t, wantMsgs); got != want {
		t.Errorf("messages =\n%s\nwant\n%s", got, want)
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCompleteRejectsBadRequests(t *testing.T) {
	tests := []struct {
		name string
		req  llm.Request
		want string
	}{
		{"forced tool not offered", llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}, ForceTool: "nope"}, "forced tool nope"},
		{"invalid schema", llm.Request{Tools: []llm.ToolSpec{{Name: "t", Parameters: json.RawMessage(`{`)}}}, "tool t: parameters are not valid JSON"},
		{"unnamed tool", llm.Request{Tools: []llm.ToolSpec{{Description: "d"}}}, "empty name"},
		{"image on assistant", llm.Request{Messages: []llm.Message{{Role: llm.RoleAssistant, Images: []llm.Image{{URL: "u"}}}}}, "only supported on user messages"},
		{"empty image", llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Images: []llm.Image{{MIME: "image/png"}}}}}, "neither data nor a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			_, _, err := h.complete(t, tt.req)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to mention %q", err, tt.want)
			}
			if h.fake.Calls() != 0 {
				t.Errorf("calls = %d, want none for a request that cannot be built", h.fake.Calls())
			}
		})
	}
}

func TestRetries(t *testing.T) {
	ok := testkit.Reply{Text: "ok"}
	httpDate := time.Now().Add(10 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name      string
		edit      func(*llm.Config)
		replies   []testkit.Reply
		wantCalls int
		wantWaits []time.Duration // nil: checkWaits decides
		checkWait func(t *testing.T, waits []time.Duration)
		wantErr   func(t *testing.T, err error) // nil: success expected
	}{
		{
			name:      "429 honours Retry-After seconds",
			replies:   []testkit.Reply{{Status: 429, ErrorCode: "rate_limit_exceeded", RetryAfter: "2"}, ok},
			wantCalls: 2,
			wantWaits: []time.Duration{2 * time.Second},
		},
		{
			name:      "429 honours Retry-After date",
			replies:   []testkit.Reply{{Status: 429, RetryAfter: httpDate}, ok},
			wantCalls: 2,
			checkWait: func(t *testing.T, waits []time.Duration) {
				if len(waits) != 1 || waits[0] <= 8*time.Second || waits[0] > 10*time.Second {
					t.Errorf("waits = %v, want one of about 10s", waits)
				}
			},
		},
		{
			name:      "429 without Retry-After backs off",
			replies:   []testkit.Reply{{Status: 429}, {Status: 429}, ok},
			wantCalls: 3,
			wantWaits: []time.Duration{backoff1, backoff2},
		},
		{
			name:      "500 retried then success",
			replies:   []testkit.Reply{{Status: 500}, ok},
			wantCalls: 2,
			wantWaits: []time.Duration{backoff1},
		},
		{
			name:      "502 html page retried",
			replies:   []testkit.Reply{{HTMLBody: true}, {Status: 503}, ok},
			wantCalls: 3,
			wantWaits: []time.Duration{backoff1, backoff2},
		},
		{
			name:      "error event before any text retried",
			replies:   []testkit.Reply{{MidStreamError: true}, ok},
			wantCalls: 2,
			wantWaits: []time.Duration{backoff1},
		},
		{
			name:      "retries exhausted",
			replies:   []testkit.Reply{{Status: 503}, {Status: 500}, {Status: 502}, {Status: 503, ErrorMessage: "still down"}, ok},
			wantCalls: 4,
			wantWaits: []time.Duration{backoff1, backoff2, backoff3},
			wantErr: func(t *testing.T, err error) {
				e := asError(t, err)
				if e.Status != 503 || !e.Retryable || e.Model != "primary" || e.Message != "still down" {
					t.Errorf("err = %+v", e)
				}
				if !strings.Contains(err.Error(), "status 503") {
					t.Errorf("err text %q does not name the status", err)
				}
			},
		},
		{
			name:      "MaxRetries caps attempts",
			edit:      func(c *llm.Config) { c.MaxRetries = 1 },
			replies:   []testkit.Reply{{Status: 500}, {Status: 500}, ok},
			wantCalls: 2,
			wantWaits: []time.Duration{backoff1},
			wantErr:   statusErr(500),
		},
		{
			name:      "negative MaxRetries means none",
			edit:      func(c *llm.Config) { c.MaxRetries = -1 },
			replies:   []testkit.Reply{{Status: 500}, ok},
			wantCalls: 1,
			wantWaits: []time.Duration{},
			wantErr:   statusErr(500),
		},
		{
			name:      "Retry-After beyond the wait budget gives up at once",
			replies:   []testkit.Reply{{Status: 429, RetryAfter: "120"}, ok},
			wantCalls: 1,
			wantWaits: []time.Duration{},
			wantErr: func(t *testing.T, err error) {
				if e := asError(t, err); e.Status != 429 || e.RetryAfter != 120*time.Second {
					t.Errorf("err = %+v, want 429 with RetryAfter 2m", e)
				}
			},
		},
		{
			name:      "total wait is bounded",
			edit:      func(c *llm.Config) { c.MaxRetryWait = time.Second },
			replies:   []testkit.Reply{{Status: 500}, {Status: 500}, ok},
			wantCalls: 2,
			wantWaits: []time.Duration{backoff1}, // 375ms + 750ms would pass 1s
			wantErr:   statusErr(500),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.edit)
			h.fake.Push(tt.replies...)
			resp, _, err := h.complete(t, userSays("hi"))
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if resp.Message.Content != "ok" {
					t.Errorf("content = %q", resp.Message.Content)
				}
			} else {
				if err == nil {
					t.Fatalf("succeeded with %q, want an error", resp.Message.Content)
				}
				tt.wantErr(t, err)
			}
			if got := h.fake.Calls(); got != tt.wantCalls {
				t.Errorf("calls = %d, want %d", got, tt.wantCalls)
			}
			waits := h.sleep.Waits()
			if tt.checkWait != nil {
				tt.checkWait(t, waits)
			} else if !slices.Equal(waits, tt.wantWaits) && !(len(waits) == 0 && len(tt.wantWaits) == 0) {
				t.Errorf("waits = %v, want %v", waits, tt.wantWaits)
			}
		})
	}
}

func statusErr(status int) func(t *testing.T, err error) {
	return func(t *testing.T, err error) {
		t.Helper()
		if e := asError(t, err); e.Status != status {
			t.Errorf("status = %d, want %d", e.Status, status)
		}
	}
}

func asError(t *testing.T, err error) *llm.Error {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want *llm.Error", err, err)
	}
	return e
}

func TestNotRetried(t *testing.T) {
	tests := []struct {
		name       string
		reply      testkit.Reply
		contextLen bool
	}{
		{"context_length_exceeded code", testkit.Reply{Status: 400, ErrorCode: "context_length_exceeded"}, true},
		{"maximum context length message", testkit.Reply{Status: 400, ErrorMessage: "This model's maximum context length is 4096 tokens"}, true},
		{"prompt is too long message", testkit.Reply{Status: 400, ErrorMessage: "prompt is too long: 210000 tokens > 200000 maximum"}, true},
		{"too many tokens message", testkit.Reply{Status: 413, ErrorMessage: "Too many tokens in request"}, true},
		{"context length in a 500", testkit.Reply{Status: 500, ErrorMessage: "the request exceeds the available context length"}, true},
		{"plain 400", testkit.Reply{Status: 400, ErrorMessage: "invalid schema for function"}, false},
		{"401", testkit.Reply{Status: 401, ErrorCode: "invalid_api_key"}, false},
		{"403", testkit.Reply{Status: 403}, false},
		{"404", testkit.Reply{Status: 404, ErrorCode: "model_not_found"}, false},
		{"quota exhausted 429", testkit.Reply{Status: 429, ErrorCode: "insufficient_quota", ErrorMessage: "You exceeded your current quota"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.fake.Push(tt.reply, testkit.Reply{Text: "must not be reached"})
			_, _, err := h.complete(t, userSays("hi"))
			if err == nil {
				t.Fatal("succeeded, want an error")
			}
			e := asError(t, err)
			if e.Retryable || e.Status != tt.reply.Status {
				t.Errorf("err = %+v, want status %d, not retryable", e, tt.reply.Status)
			}
			if got := errors.Is(err, llm.ErrContextLength); got != tt.contextLen {
				t.Errorf("errors.Is(err, ErrContextLength) = %v, want %v (err %v)", got, tt.contextLen, err)
			}
			if h.fake.Calls() != 1 || len(h.sleep.Waits()) != 0 {
				t.Errorf("calls = %d, waits = %v; want 1 call, no waits", h.fake.Calls(), h.sleep.Waits())
			}
		})
	}
}

func TestMidStreamErrorAfterTextNotRetried(t *testing.T) {
	h := newHarness(t, func(c *llm.Config) { c.FallbackModels = []string{"backup"} })
	h.fake.Push(testkit.Reply{TextChunks: []string{"par", "tial"}, MidStreamError: true})
	h.fake.SetDefault(&testkit.Reply{Text: "must not be reached"})
	_, deltas, err := h.complete(t, userSays("hi"))
	if err == nil {
		t.Fatal("succeeded, want the mid-stream error")
	}
	if e := asError(t, err); e.Status != 0 || e.Message != "upstream overloaded" || e.Model != "primary" {
		t.Errorf("err = %+v", e)
	}
	if !slices.Equal(deltas, []string{"par", "tial"}) {
		t.Errorf("deltas = %q", deltas)
	}
	if got := h.models(); !slices.Equal(got, []string{"primary"}) {
		t.Errorf("requests = %v, want one to primary (no retry, no fallback)", got)
	}
	if len(h.sleep.Waits()) != 0 {
		t.Errorf("waits = %v", h.sleep.Waits())
	}
}

func TestFallback(t *testing.T) {
	fail := testkit.Reply{Status: 500, Model: "primary"}
	tests := []struct {
		name       string
		fallbacks  []string
		replies    []testkit.Reply
		wantModels []string
		wantModel  string // "" means an error is expected
		wantWaits  int
	}{
		{
			name:       "after retries are exhausted",
			fallbacks:  []string{"backup"},
			replies:    []testkit.Reply{fail, fail, fail, fail, {Text: "from backup", Model: "backup"}},
			wantModels: []string{"primary", "primary", "primary", "primary", "backup"},
			wantModel:  "backup",
			wantWaits:  3,
		},
		{
			name:       "at once on model_not_found",
			fallbacks:  []string{"backup"},
			replies:    []testkit.Reply{{Text: "from backup", Model: "backup"}},
			wantModels: []string{"primary", "backup"},
			wantModel:  "backup",
		},
		{
			name:       "through several models",
			fallbacks:  []string{"second", "third"},
			replies:    []testkit.Reply{{Text: "from third", Model: "third"}},
			wantModels: []string{"primary", "second", "third"},
			wantModel:  "third",
		},
		{
			name:       "not on context length",
			fallbacks:  []string{"backup"},
			replies:    []testkit.Reply{{Status: 400, ErrorCode: "context_length_exceeded"}, {Text: "no", Model: "backup"}},
			wantModels: []string{"primary"},
		},
		{
			name:       "not on a bad key",
			fallbacks:  []string{"backup"},
			replies:    []testkit.Reply{{Status: 401}, {Text: "no", Model: "backup"}},
			wantModels: []string{"primary"},
		},
		{
			name:       "last model's error is returned",
			fallbacks:  []string{"backup"},
			replies:    []testkit.Reply{{Status: 404, ErrorCode: "model_not_found"}, {Status: 400, ErrorMessage: "backup says no"}},
			wantModels: []string{"primary", "backup"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *llm.Config) { c.FallbackModels = tt.fallbacks })
			h.fake.Push(tt.replies...)
			resp, deltas, err := h.complete(t, userSays("hi"))
			if tt.wantModel == "" {
				if err == nil {
					t.Fatalf("succeeded with %+v, want an error", resp)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if resp.Model != tt.wantModel || resp.Message.Content != "from "+tt.wantModel || strings.Join(deltas, "") != resp.Message.Content {
					t.Errorf("resp = %+v, deltas %q", resp, deltas)
				}
			}
			if got := h.models(); !slices.Equal(got, tt.wantModels) {
				t.Errorf("requested models = %v, want %v", got, tt.wantModels)
			}
			if got := len(h.sleep.Waits()); got != tt.wantWaits {
				t.Errorf("waits = %d, want %d", got, tt.wantWaits)
			}
		})
	}
	t.Run("error names the last model", func(t *testing.T) {
		h := newHarness(t, func(c *llm.Config) { c.FallbackModels = []string{"backup"} })
		h.fake.Push(testkit.Reply{Status: 400, ErrorMessage: "primary says no"}, testkit.Reply{Status: 400, ErrorMessage: "backup says no"})
		_, _, err := h.complete(t, userSays("hi"))
		if e := asError(t, err); e.Model != "backup" || e.Message != "backup says no" {
			t.Errorf("err = %+v", e)
		}
	})
}

func TestCancellation(t *testing.T) {
	t.Run("while waiting for the server", func(t *testing.T) {
		h := newHarness(t, func(c *llm.Config) { c.FallbackModels = []string{"backup"} })
		h.fake.Push(testkit.Reply{Block: make(chan struct{})}) // never answers
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := h.client.Complete(ctx, userSays("hi"), nil)
			errc <- err
		}()
		if err := h.fake.WaitCalls(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		cancel()
		checkCanceled(t, errc)
		if h.fake.Calls() != 1 || len(h.sleep.Waits()) != 0 {
			t.Errorf("calls = %d, waits = %v after cancel; want 1, none", h.fake.Calls(), h.sleep.Waits())
		}
	})
	t.Run("while backing off with the default sleep", func(t *testing.T) {
		h := newHarness(t, func(c *llm.Config) { c.Sleep = nil })
		h.fake.Push(testkit.Reply{Status: 429, RetryAfter: "30"}, testkit.Reply{Text: "too late"})
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := h.client.Complete(ctx, userSays("hi"), nil)
			errc <- err
		}()
		if err := h.fake.WaitCalls(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		cancel()
		checkCanceled(t, errc)
		if h.fake.Calls() != 1 {
			t.Errorf("calls = %d, want 1", h.fake.Calls())
		}
	})
}

func checkCanceled(t *testing.T, errc <-chan error) {
	t.Helper()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Complete did not return after cancellation")
	}
}

func TestAttemptTimeoutRetried(t *testing.T) {
	h := newHarness(t, func(c *llm.Config) { c.RequestTimeout = 50 * time.Millisecond })
	h.fake.Push(testkit.Reply{Block: make(chan struct{})}, testkit.Reply{Text: "ok"})
	resp, _, err := h.complete(t, userSays("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "ok" || h.fake.Calls() != 2 {
		t.Errorf("content = %q after %d calls", resp.Message.Content, h.fake.Calls())
	}
	if waits := h.sleep.Waits(); !slices.Equal(waits, []time.Duration{backoff1}) {
		t.Errorf("waits = %v", waits)
	}

	h.fake.SetDefault(&testkit.Reply{Block: make(chan struct{})})
	_, _, err = h.complete(t, userSays("again"))
	if e := asError(t, err); e.Code != "timeout" || !e.Retryable || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %+v (%v)", e, err)
	}
}

func TestStreamOptionsRejected(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.SetRejectStreamOptions(true)
	h.fake.Push(testkit.Reply{Text: "one"}, testkit.Reply{Text: "two"})
	for _, want := range []string{"one", "two"} {
		resp, _, err := h.complete(t, userSays("hi"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Message.Content != want || resp.Usage != (llm.Usage{}) {
			t.Errorf("resp = %+v, want %q without usage", resp, want)
		}
	}
	var withOptions []bool
	for _, r := range h.fake.Requests() {
		withOptions = append(withOptions, r.HasStreamOptions)
	}
	// Rejected once, then remembered for the next call.
	if want := []bool{true, false, false}; !slices.Equal(withOptions, want) {
		t.Errorf("stream_options sent = %v, want %v", withOptions, want)
	}
	if len(h.sleep.Waits()) != 0 {
		t.Errorf("waits = %v, the stream_options retry must not back off", h.sleep.Waits())
	}
}

func TestAPIKeyNeverLeaks(t *testing.T) {
	check := func(t *testing.T, what, text string) {
		t.Helper()
		if strings.Contains(text, apiKey) {
			t.Errorf("%s leaks the API key: %s", what, text)
		}
	}
	t.Run("echoed by the server", func(t *testing.T) {
		h := newHarness(t, nil)
		h.fake.Push(testkit.Reply{Status: 500, ErrorMessage: "bad key " + apiKey}, testkit.Reply{Status: 401, ErrorMessage: "Incorrect API key provided: " + apiKey})
		_, _, err := h.complete(t, userSays("hi"))
		if err == nil {
			t.Fatal("succeeded")
		}
		check(t, "error", err.Error())
		check(t, "error %+v", fmt.Sprintf("%+v", err))
		check(t, "logs", h.logs.String())
		if !strings.Contains(err.Error(), "[REDACTED]") {
			t.Errorf("error %q does not show the redaction", err)
		}
		if !strings.Contains(h.logs.String(), "[REDACTED]") {
			t.Errorf("the retry log line did not carry the (redacted) message: %s", h.logs.String())
		}
	})
	t.Run("in a transport error", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now: connection refused
		s := &sleeper{}
		logs := &logBuffer{}
		c, err := llm.New(llm.Config{
			BaseURL: "http://" + addr + "/" + apiKey + "/v1", // some gateways take the key in the path
			APIKey:  apiKey,
			Model:   "primary",
			Logger:  slog.New(slog.NewJSONHandler(logs, nil)),
			Sleep:   s.Sleep,
			Rand:    func() float64 { return 0.5 },
		})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Complete(t.Context(), userSays("hi"), nil)
		if err == nil {
			t.Fatal("succeeded against a closed port")
		}
		e := asError(t, err)
		if e.Status != 0 || !e.Retryable || len(s.Waits()) != 3 {
			t.Errorf("err = %+v after %d waits; want a retried transport error", e, len(s.Waits()))
		}
		check(t, "error", err.Error())
		check(t, "unwrapped error", errors.Unwrap(err).Error())
		check(t, "logs", logs.String())
		if !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "[REDACTED]") {
			t.Errorf("error %q should say what happened, with the key redacted", err)
		}
	})
	t.Run("in a config error", func(t *testing.T) {
		_, err := llm.New(llm.Config{BaseURL: "ftp://host/" + apiKey, APIKey: apiKey, Model: "m"})
		if err == nil {
			t.Fatal("accepted an ftp URL")
		}
		check(t, "config error", err.Error())
	})
}

func TestRetryLogging(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.Push(testkit.Reply{Status: 429, RetryAfter: "2"}, testkit.Reply{Status: 502, HTMLBody: true}, testkit.Reply{Text: "ok"})
	if _, _, err := h.complete(t, userSays("hi")); err != nil {
		t.Fatal(err)
	}
	var retries []map[string]any
	for _, r := range h.logs.records(t) {
		if r["msg"] == "llm: retrying" {
			retries = append(retries, r)
		}
	}
	if len(retries) != 2 {
		t.Fatalf("retry log lines = %v, want 2", retries)
	}
	want := []struct {
		level   string
		attempt float64
		status  float64
		wait    float64
	}{
		{"INFO", 1, 429, float64(2 * time.Second)},
		{"WARN", 2, 502, float64(backoff2)},
	}
	for i, w := range want {
		r := retries[i]
		if r["level"] != w.level || r["attempt"] != w.attempt || r["status"] != w.status || r["wait"] != w.wait || r["model"] != "primary" {
			t.Errorf("retry %d logged %v, want %+v", i, r, w)
		}
	}
	if msg, _ := retries[1]["err"].(string); !strings.Contains(msg, "502 Bad Gateway") {
		t.Errorf("502 retry logged err %q, want the page title", msg)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name string
		cfg  llm.Config
		want string // "" means valid
	}{
		{"valid", llm.Config{BaseURL: "https://api.example.invalid/v1", Model: "m"}, ""},
		{"valid with fallbacks", llm.Config{BaseURL: "http://127.0.0.1:1/v1/", Model: "m", FallbackModels: []string{"n"}}, ""},
		{"empty base url", llm.Config{Model: "m"}, "BaseURL is empty"},
		{"unparsable base url", llm.Config{BaseURL: "http://[::1", Model: "m"}, "BaseURL"},
		{"base url without scheme", llm.Config{BaseURL: "api.example.invalid/v1", Model: "m"}, "BaseURL"},
		{"base url without host", llm.Config{BaseURL: "http:///v1", Model: "m"}, "BaseURL"},
		{"empty model", llm.Config{BaseURL: "http://x/v1"}, "Model is empty"},
		{"empty fallback", llm.Config{BaseURL: "http://x/v1", Model: "m", FallbackModels: []string{"a", " "}}, "FallbackModels[1]"},
		{"negative wait", llm.Config{BaseURL: "http://x/v1", Model: "m", MaxRetryWait: -1}, "MaxRetryWait"},
		{"negative timeout", llm.Config{BaseURL: "http://x/v1", Model: "m", RequestTimeout: -1}, "RequestTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := llm.New(tt.cfg)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.Model() != tt.cfg.Model {
					t.Errorf("Model() = %q", c.Model())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to name %q", err, tt.want)
			}
		})
	}
	_, err := llm.New(llm.Config{})
	if err == nil || !strings.Contains(err.Error(), "BaseURL") || !strings.Contains(err.Error(), "Model") {
		t.Errorf("empty config: err = %v, want every problem named", err)
	}
}

func TestConcurrentCompletes(t *testing.T) {
	h := newHarness(t, nil)
	var mu sync.Mutex
	failed := map[string]bool{}
	h.fake.SetDefault(&testkit.Reply{Func: func(r testkit.Recorded) testkit.Reply {
		q := r.Messages[0].Content
		mu.Lock()
		defer mu.Unlock()
		if !failed[q] { // every call fails once first, so retries overlap too
			failed[q] = true
			return testkit.Reply{Status: 503}
		}
		return testkit.Reply{Text: "re: " + q}
	}})
	const n = 8
	var wg sync.WaitGroup
	got := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			var b strings.Builder
			resp, err := h.client.Complete(t.Context(), userSays(fmt.Sprint("q", i)), func(d llm.Delta) { b.WriteString(d.Text) })
			errs[i] = err
			if resp.Message.Content != b.String() {
				errs[i] = fmt.Errorf("content %q != deltas %q", resp.Message.Content, b.String())
			}
			got[i] = resp.Message.Content
		})
	}
	wg.Wait()
	for i := range n {
		if want := fmt.Sprint("re: q", i); errs[i] != nil || got[i] != want {
			t.Errorf("call %d: %q, %v; want %q", i, got[i], errs[i], want)
		}
	}
	if h.fake.Calls() != 2*n {
		t.Errorf("calls = %d, want %d", h.fake.Calls(), 2*n)
	}
}

func BenchmarkComplete(b *testing.B) {
	h := newHarness(b, nil)
	h.fake.SetDefault(&testkit.Reply{Text: "Sure — here is a short answer of a dozen words or so, streamed."})
	req := llm.Request{Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: "You are a helpful assistant."},
		{Role: llm.RoleUser, Content: "Say something short."},
	}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := h.client.Complete(ctx, req, func(llm.Delta) {})
		if err != nil || resp.Message.Content == "" {
			b.Fatalf("resp %+v, err %v", resp, err)
		}
	}
}

// The client drains a finished stream so keep-alive works: one connection
// serves consecutive calls.
func TestConnectionReused(t *testing.T) {
	var mu sync.Mutex
	dials := 0
	transport := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dials++
		mu.Unlock()
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(transport.CloseIdleConnections)
	h := newHarness(t, func(c *llm.Config) { c.HTTPClient = &http.Client{Transport: transport} })
	h.fake.SetDefault(&testkit.Reply{Text: "hello there", ToolCalls: []llm.ToolCall{testkit.Call("c", "f", `{"a":1}`)}})
	for range 5 {
		if _, _, err := h.complete(t, userSays("hi")); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if dials != 1 || h.fake.Calls() != 5 {
		t.Errorf("%d dials for %d calls, want 1", dials, h.fake.Calls())
	}
}
