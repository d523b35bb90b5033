package testkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

func newClient(f *testkit.FakeLLM) *openai.Client {
	cfg := openai.DefaultConfig("sk-test")
	cfg.BaseURL = f.URL
	return openai.NewClientWithConfig(cfg)
}

func streamReq(model string) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model:         model,
		Messages:      []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	}
}

// streamed is what a go-openai stream delivered, assembled the way
// LIBRARIES.md describes.
type streamed struct {
	text      string
	fragments []string
	calls     []openai.ToolCall
	callOrder []int // tool-call index of every tool-call delta, in arrival order
	finish    openai.FinishReason
	usage     *openai.Usage
	chunks    int
}

func collect(t *testing.T, stream *openai.ChatCompletionStream) (streamed, error) {
	t.Helper()
	defer stream.Close()
	var s streamed
	calls := map[int]*openai.ToolCall{}
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return s, err
		}
		s.chunks++
		if chunk.Usage != nil {
			s.usage = chunk.Usage
		}
		for _, ch := range chunk.Choices {
			if ch.Delta.Content != "" {
				s.text += ch.Delta.Content
				s.fragments = append(s.fragments, ch.Delta.Content)
			}
			if ch.FinishReason != "" {
				s.finish = ch.FinishReason
			}
			for _, d := range ch.Delta.ToolCalls {
				i := 0
				if d.Index != nil {
					i = *d.Index
				}
				s.callOrder = append(s.callOrder, i)
				tc := calls[i]
				if tc == nil {
					tc = &openai.ToolCall{Type: openai.ToolTypeFunction}
					calls[i] = tc
				}
				if d.ID != "" {
					tc.ID = d.ID
				}
				if d.Function.Name != "" {
					tc.Function.Name = d.Function.Name
				}
				tc.Function.Arguments += d.Function.Arguments
			}
		}
	}
	for i := range len(calls) {
		s.calls = append(s.calls, *calls[i])
	}
	return s, nil
}

func TestStreamToolCallsInterleaved(t *testing.T) {
	f := testkit.NewFakeLLM(t)
	f.Push(testkit.Reply{
		Text: "Let me check. ",
		ToolCalls: []llm.ToolCall{
			testkit.Call("call_a", "get_weather", `{"city":"Paris"}`),
			testkit.Call("call_b", "get_time", `{"tz":"UTC"}`),
			testkit.Call("", "ping", ""),
		},
		Usage: &llm.Usage{PromptTokens: 11, CompletionTokens: 7, TotalTokens: 18},
	})
	stream, err := newClient(f).CreateChatCompletionStream(t.Context(), streamReq("fake-model"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := collect(t, stream)
	if err != nil {
		t.Fatal(err)
	}
	if got.text != "Let me check. " {
		t.Errorf("text = %q", got.text)
	}
	want := []openai.ToolCall{
		{Type: "function", ID: "call_a", Function: openai.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
		{Type: "function", ID: "call_b", Function: openai.FunctionCall{Name: "get_time", Arguments: `{"tz":"UTC"}`}},
		{Type: "function", ID: "call_2", Function: openai.FunctionCall{Name: "ping"}},
	}
	if fmt.Sprint(got.calls) != fmt.Sprint(want) {
		t.Errorf("calls =\n%v\nwant\n%v", got.calls, want)
	}
	if got.finish != "tool_calls" {
		t.Errorf("finish = %q, want tool_calls", got.finish)
	}
	if got.usage == nil || got.usage.PromptTokens != 11 || got.usage.CompletionTokens != 7 || got.usage.TotalTokens != 18 {
		t.Errorf("usage = %+v", got.usage)
	}
	// Call 0's arguments come in several deltas and call 1's header arrives
	// between them: assembly must key on Index.
	first1 := slices.Index(got.callOrder, 1)
	last0 := -1
	for i, idx := range got.callOrder {
		if idx == 0 {
			last0 = i
		}
	}
	if n := count(got.callOrder, 0); n < 3 {
		t.Errorf("call 0 came in %d deltas, want several (order %v)", n, got.callOrder)
	}
	if first1 < 0 || first1 > last0 {
		t.Errorf("calls not interleaved: order %v", got.callOrder)
	}
}

func count(s []int, v int) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

func TestStreamTextFragments(t *testing.T) {
	tests := []struct {
		name      string
		reply     testkit.Reply
		wantText  string
		wantFrags []string // nil: only check there are several
	}{
		{"verbatim chunks", testkit.Reply{TextChunks: []string{"Hel", "lo, ", "wörld"}}, "Hello, wörld", []string{"Hel", "lo, ", "wörld"}},
		{"split at words", testkit.Reply{Text: "one two  three"}, "one two  three", []string{"one ", "two  ", "three"}},
		{"long word cut on runes", testkit.Reply{Text: strings.Repeat("é", 20)}, strings.Repeat("é", 20), []string{strings.Repeat("é", 16), strings.Repeat("é", 4)}},
		{"empty", testkit.Reply{}, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := testkit.NewFakeLLM(t)
			f.Push(tt.reply)
			stream, err := newClient(f).CreateChatCompletionStream(t.Context(), streamReq("fake-model"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := collect(t, stream)
			if err != nil {
				t.Fatal(err)
			}
			if got.text != tt.wantText {
				t.Errorf("text = %q, want %q", got.text, tt.wantText)
			}
			if !slices.Equal(got.fragments, tt.wantFrags) {
				t.Errorf("fragments = %q, want %q", got.fragments, tt.wantFrags)
			}
			if got.finish != "stop" {
				t.Errorf("finish = %q, want stop", got.finish)
			}
		})
	}
}

// A paced stream: ArgPieces fragments per call, ChunkDelay between chunks,
// and OnChunk told of each chunk of the answer with what it carried.
func TestStreamPaced(t *testing.T) {
	f := testkit.NewFakeLLM(t)
	var mu sync.Mutex
	var frags []string
	var times []time.Time
	const delay = 20 * time.Millisecond
	f.Push(testkit.Reply{TextChunks: []string{"a", "b"}, ArgPieces: 4, ChunkDelay: delay,
		ToolCalls: []llm.ToolCall{testkit.Call("c", "send_message", `{"text":"12345678"}`)},
		OnChunk: func(frag string, at time.Time) {
			mu.Lock()
			defer mu.Unlock()
			frags, times = append(frags, frag), append(times, at)
		}})
	stream, err := newClient(f).CreateChatCompletionStream(t.Context(), streamReq("fake-model"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := collect(t, stream)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"a", "b", "", `{"te`, `xt":"`, `12345`, `678"}`}
	if !slices.Equal(frags, want) || got.text != "ab" || len(got.calls) != 1 || got.calls[0].Function.Arguments != `{"text":"12345678"}` {
		t.Fatalf("fragments %q (want %q), text %q, calls %+v", frags, want, got.text, got.calls)
	}
	for i := 1; i < len(times); i++ {
		if gap := times[i].Sub(times[i-1]); gap < delay {
			t.Errorf("chunk %d came %v after the one before, want at least %v", i, gap, delay)
		}
	}
}

func TestStreamUsage(t *testing.T) {
	f := testkit.NewFakeLLM(t)
	f.SetDefault(&testkit.Reply{Text: "a reply of some length"})
	c := newClient(f)

	stream, err := c.CreateChatCompletionStream(t.Context(), streamReq("fake-model"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := collect(t, stream)
	if err != nil {
		t.Fatal(err)
	}
	if u := got.usage; u == nil || u.PromptTokens <= 0 || u.CompletionTokens <= 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("computed usage = %+v, want positive numbers that add up", u)
	}

	req := streamReq("fake-model")
	req.StreamOptions = nil
	stream, err = c.CreateChatCompletionStream(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	got, err = collect(t, stream)
	if err != nil {
		t.Fatal(err)
	}
	if got.usage != nil {
		t.Errorf("usage without include_usage = %+v, want none", got.usage)
	}
	if got.text != "a reply of some length" {
		t.Errorf("text = %q", got.text)
	}
}

func TestNonStreaming(t *testing.T) {
	f := testkit.NewFakeLLM(t)
	f.Push(testkit.Reply{
		Text:      "sure",
		ToolCalls: []llm.ToolCall{testkit.Call("c1", "lookup", `{"q":"x"}`)},
		Usage:     &llm.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5},
	})
	resp, err := newClient(f).CreateChatCompletion(t.Context(), openai.ChatCompletionRequest{
		Model:    "fake-model",
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 {
		t.Fatalf("choices = %d, want 1", len(resp.Choices))
	}
	m := resp.Choices[0].Message
	if m.Role != "assistant" || m.Content != "sure" || len(m.ToolCalls) != 1 ||
		m.ToolCalls[0].ID != "c1" || m.ToolCalls[0].Function.Name != "lookup" || m.ToolCalls[0].Function.Arguments != `{"q":"x"}` {
		t.Errorf("message = %+v", m)
	}
	if resp.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("finish = %q", resp.Choices[0].FinishReason)
	}
	if resp.Usage.TotalTokens != 5 {
		t.Errorf("usage = %+v", resp.Usage)
	}
	if got := f.Requests()[0]; got.Stream {
		t.Error("recorded stream = true for a non-streaming request")
	}
}

func TestErrorModes(t *testing.T) {
	tests := []struct {
		name   string
		reply  *testkit.Reply // nil: nothing scripted
		check  func(t *testing.T, err error)
		header string // expected Retry-After, non-streaming only
	}{
		{
			name:  "context length",
			reply: &testkit.Reply{Status: 400, ErrorCode: "context_length_exceeded"},
			check: func(t *testing.T, err error) {
				ae := apiError(t, err)
				if ae.HTTPStatusCode != 400 || ae.Code != "context_length_exceeded" || ae.Type != "invalid_request_error" ||
					!strings.Contains(ae.Message, "maximum context length") {
					t.Errorf("got %+v", ae)
				}
			},
		},
		{
			name:   "rate limit with retry-after",
			reply:  &testkit.Reply{Status: 429, ErrorCode: "rate_limit_exceeded", RetryAfter: "2"},
			header: "2",
			check: func(t *testing.T, err error) {
				ae := apiError(t, err)
				if ae.HTTPStatusCode != 429 || ae.Code != "rate_limit_exceeded" {
					t.Errorf("got %+v", ae)
				}
			},
		},
		{
			name:  "500 with null code",
			reply: &testkit.Reply{Status: 500},
			check: func(t *testing.T, err error) {
				ae := apiError(t, err)
				if ae.HTTPStatusCode != 500 || ae.Code != 0 || ae.Type != "server_error" {
					t.Errorf("got %+v", ae)
				}
			},
		},
		{
			name:  "custom message",
			reply: &testkit.Reply{Status: 401, ErrorCode: "invalid_api_key", ErrorMessage: "nope"},
			check: func(t *testing.T, err error) {
				ae := apiError(t, err)
				if ae.HTTPStatusCode != 401 || ae.Message != "nope" || ae.Type != "authentication_error" {
					t.Errorf("got %+v", ae)
				}
			},
		},
		{
			name:  "proxy html page",
			reply: &testkit.Reply{HTMLBody: true},
			check: func(t *testing.T, err error) {
				var re *openai.RequestError
				if !errors.As(err, &re) {
					t.Fatalf("err = %v (%T), want *openai.RequestError", err, err)
				}
				if re.HTTPStatusCode != 502 || !strings.Contains(string(re.Body), "<html>") {
					t.Errorf("got status %d body %q", re.HTTPStatusCode, re.Body)
				}
			},
		},
		{
			name:  "no scripted reply",
			reply: nil,
			check: func(t *testing.T, err error) {
				ae := apiError(t, err)
				if ae.HTTPStatusCode != 500 || ae.Message != "fake: no scripted reply" {
					t.Errorf("got %+v", ae)
				}
			},
		},
	}
	for _, tt := range tests {
		for _, streaming := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stream=%v", tt.name, streaming), func(t *testing.T) {
				f := testkit.NewFakeLLM(t)
				if tt.reply != nil {
					f.Push(*tt.reply)
				}
				c := newClient(f)
				var err error
				if streaming {
					var s *openai.ChatCompletionStream
					s, err = c.CreateChatCompletionStream(t.Context(), streamReq("fake-model"))
					if err == nil {
						s.Close()
						t.Fatal("stream opened, want an HTTP error")
					}
				} else {
					var resp openai.ChatCompletionResponse
					resp, err = c.CreateChatCompletion(t.Context(), openai.ChatCompletionRequest{
						Model: "fake-model", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
					})
					if got := resp.Header().Get("Retry-After"); got != tt.header {
						t.Errorf("Retry-After = %q, want %q", got, tt.header)
					}
				}
				tt.check(t, err)
				if f.Calls() != 1 {
					t.Errorf("calls = %d, want 1", f.Calls())
				}
			})
		}
	}
}

func apiError(t *testing.T, err error) *openai.APIError {
	t.Helper()
	var ae *openai.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v (%T), want *openai.APIError", err, err)
	}
	return ae
}

func TestMidStreamError(t *testing.T) {
	f := testkit.NewFakeLLM(t)
	f.Push(testkit.Reply{TextChunks: []string{"par", "tial"}, MidStreamError: true})
	stream, err := newClient(f).CreateChatCompletionStream(t.Context(), streamReq("fake-model"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := collect(t, stream)
	if got.text != "partial" {
		t.Errorf("text before the error = %q, want partial", got.text)
	}
	ae := apiError(t, err)
	if ae.Message != "upstream overloaded" || ae.HTTPStatusCode != 0 {
		t.Errorf("got %+v", ae)
	}
}

func TestModelGate(t *testing.T) {
	f := testkit.NewFakeLLM(t)
	f.Push(testkit.Reply{Text: "from backup", Model: "backup"})
	c := newClient(f)

	_, err := c.CreateChatCompletionStream(t.Context(), streamReq("primary"))
	ae := apiError(t, err)
	if ae.HTTPStatusCode != 404 || ae.Code != "model_not_found" || !strings.Contains(ae.Message, "primary") {
		t.Errorf("primary got %+v", ae)
	}
	if f.Pending() != 1 {
		t.Fatalf("pending = %d after a mismatch, want the reply kept", f.Pending())
	}

	stream, err := c.CreateChatCompletionStream(t.Context(), streamReq("backup"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := collect(t, stream)
	if err != nil || got.text != "from backup" {
		t.Errorf("backup got %q, %v", got.text, err)
	}
	if f.Pending() != 0 {
		t.Errorf("pending = %d, want 0", f.Pending())
	}
	models := []string{}
	for _, r := range f.Requests() {
		models = append(models, r.Model)
	}
	if !slices.Equal(models, []string{"primary", "backup"}) {
		t.Errorf("requested models = %v", models)
	}

	// The same gate on the default reply.
	f.SetDefault(&testkit.Reply{Text: "x", Model: "backup"})
	_, err = c.CreateChatCompletionStream(t.Context(), streamReq("primary"))
	if ae := apiError(t, err); ae.HTTPStatusCode != 404 {
		t.Errorf("default for another model: got %+v", ae)
	}
}

func TestFuncAndDefault(t *testing.T) {
	f := testkit.NewFakeLLM(t)
	f.SetDefault(&testkit.Reply{Func: func(r testkit.Recorded) testkit.Reply {
		return testkit.Reply{Text: "echo: " + r.Messages[len(r.Messages)-1].Content}
	}})
	f.Push(testkit.Reply{Text: "queued first"})
	c := newClient(f)
	for _, want := range []string{"queued first", "echo: hi", "echo: hi"} {
		stream, err := c.CreateChatCompletionStream(t.Context(), streamReq("fake-model"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := collect(t, stream)
		if err != nil || got.text != want {
			t.Errorf("got %q, %v; want %q", got.text, err, want)
		}
	}
	f.SetDefault(nil)
	_, err := c.CreateChatCompletionStream(t.Context(), streamReq("fake-model"))
	if ae := apiError(t, err); ae.HTTPStatusCode != 500 {
		t.Errorf("after SetDefault(nil): %+v", ae)
	}
}

// After DiscardRequests the fake still answers and counts requests, but
// keeps none of them.
func TestDiscardRequests(t *testing.T) {
	f := testkit.NewFakeLLM(t)
	f.SetDefault(&testkit.Reply{Func: func(r testkit.Recorded) testkit.Reply {
		return testkit.Reply{Text: "echo: " + r.Messages[len(r.Messages)-1].Content}
	}})
	c := newClient(f)
	ask := func() {
		t.Helper()
		stream, err := c.CreateChatCompletionStream(t.Context(), streamReq("fake-model"))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := collect(t, stream); err != nil || got.text != "echo: hi" {
			t.Fatalf("got %q, %v; want the echo", got.text, err)
		}
	}
	ask()
	f.DiscardRequests()
	ask()
	ask()
	if err := f.WaitCalls(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	if n := f.Calls(); n != 3 {
		t.Errorf("Calls = %d, want 3", n)
	}
	if r := f.Requests(); len(r) != 1 || r[0].Messages[len(r[0].Messages)-1].Content != "hi" {
		t.Errorf("Requests = %+v, want only the one before DiscardRequests", r)
	}
}

func TestRecordedRequest(t *testing.T) {
	f := testkit.NewFakeLLM(t)
	f.Push(testkit.Reply{Text: "ok"})
	schema := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)
	req := openai.ChatCompletionRequest{
		Model:     "fake-model",
		MaxTokens: 123,
		Messages: []openai.ChatCompletionMessage{
			{Role: "system", Content: "be brief"},
			{Role: "user", MultiContent: []openai.ChatMessagePart{
				{Type: "text", Text: "what is this?"},
				{Type: "image_url", ImageURL: &openai.ChatMessageImageURL{URL: "data:image/png;base64,iVBORw=="}},
				{Type: "image_url", ImageURL: &openai.ChatMessageImageURL{URL: "https://example.invalid/cat.jpg"}},
			}},
			{Role: "assistant", ToolCalls: []openai.ToolCall{{ID: "c1", Type: "function", Function: openai.FunctionCall{Name: "weather", Arguments: `{"city":"Oslo"}`}}}},
			{Role: "tool", ToolCallID: "c1", Content: "rainy"},
		},
		Tools: []openai.Tool{{Type: "function", Function: &openai.FunctionDefinition{
			Name: "weather", Description: "gets weather", Parameters: schema,
		}}},
		ToolChoice: openai.ToolChoice{Type: "function", Function: openai.ToolFunction{Name: "weather"}},
	}
	resp, err := newClient(f).CreateChatCompletion(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "ok" {
		t.Errorf("reply = %q", resp.Choices[0].Message.Content)
	}
	reqs := f.Requests()
	if len(reqs) != 1 {
		t.Fatalf("recorded %d requests", len(reqs))
	}
	r := reqs[0]
	if r.Model != "fake-model" || r.MaxTokens != 123 || r.Stream || r.HasStreamOptions || r.Path != "/v1/chat/completions" {
		t.Errorf("recorded %+v", r)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("authorization = %q", got)
	}
	if r.ForcedTool != "weather" || !strings.Contains(string(r.ToolChoice), `"function"`) {
		t.Errorf("tool choice = %s, forced %q", r.ToolChoice, r.ForcedTool)
	}
	if len(r.Tools) != 1 || r.Tools[0].Name != "weather" || r.Tools[0].Description != "gets weather" || string(r.Tools[0].Parameters) != string(schema) {
		t.Errorf("tools = %+v", r.Tools)
	}
	if len(r.Messages) != 4 {
		t.Fatalf("messages = %+v", r.Messages)
	}
	if m := r.Messages[0]; m.Role != llm.RoleSystem || m.Content != "be brief" {
		t.Errorf("system = %+v", m)
	}
	if m := r.Messages[1]; m.Role != llm.RoleUser || m.Content != "what is this?" || len(m.Images) != 2 ||
		m.Images[0].MIME != "image/png" || string(m.Images[0].Data) != "\x89PNG" || m.Images[1].URL != "https://example.invalid/cat.jpg" {
		t.Errorf("user = %+v", m)
	}
	if m := r.Messages[2]; m.Role != llm.RoleAssistant || len(m.ToolCalls) != 1 || m.ToolCalls[0] != testkit.Call("c1", "weather", `{"city":"Oslo"}`) {
		t.Errorf("assistant = %+v", m)
	}
	if m := r.Messages[3]; m.Role != llm.RoleTool || m.ToolCallID != "c1" || m.Content != "rainy" {
		t.Errorf("tool = %+v", m)
	}
	if !strings.Contains(string(r.Raw), `"max_tokens":123`) {
		t.Errorf("raw body = %s", r.Raw)
	}
}

func TestInvalidBody(t *testing.T) {
	f := testkit.NewFakeLLM(t)
	f.Push(testkit.Reply{Text: "kept"})
	resp, err := http.Post(f.URL+"/chat/completions", "application/json", strings.NewReader("{not json"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("status = %d, want 400", resp.StatusCode)
	}
	if r := f.Requests(); len(r) != 1 || r[0].DecodeError == "" || string(r[0].Raw) != "{not json" {
		t.Errorf("recorded %+v", r)
	}
	if f.Pending() != 1 {
		t.Errorf("pending = %d, an invalid body must not consume a reply", f.Pending())
	}
}

func TestRejectStreamOptions(t *testing.T) {
	f := testkit.NewFakeLLM(t)
	f.SetRejectStreamOptions(true)
	f.Push(testkit.Reply{Text: "fine"})
	c := newClient(f)
	_, err := c.CreateChatCompletionStream(t.Context(), streamReq("fake-model"))
	if ae := apiError(t, err); ae.HTTPStatusCode != 400 || !strings.Contains(ae.Message, "stream_options") {
		t.Errorf("with stream_options: %+v", ae)
	}
	req := streamReq("fake-model")
	req.StreamOptions = nil
	stream, err := c.CreateChatCompletionStream(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := collect(t, stream); err != nil || got.text != "fine" {
		t.Errorf("without stream_options: %q, %v", got.text, err)
	}
	if r := f.Requests(); len(r) != 2 || !r[0].HasStreamOptions || !r[0].IncludeUsage || r[1].HasStreamOptions {
		t.Errorf("recorded %+v", r)
	}
}

func TestDelayHonoursCancellation(t *testing.T) {
	f := testkit.NewFakeLLM(t)
	f.Push(testkit.Reply{Text: "too late", Delay: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := newClient(f).CreateChatCompletionStream(ctx, streamReq("fake-model"))
		errc <- err
	}()
	if err := f.WaitCalls(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("request did not end after cancellation")
	}
}

func TestBlock(t *testing.T) {
	f := testkit.NewFakeLLM(t)
	release := make(chan struct{})
	f.Push(testkit.Reply{Text: "released", Block: release})
	type result struct {
		text string
		err  error
	}
	resc := make(chan result, 1)
	go func() {
		stream, err := newClient(f).CreateChatCompletionStream(t.Context(), streamReq("fake-model"))
		if err != nil {
			resc <- result{err: err}
			return
		}
		got, err := collect(t, stream)
		resc <- result{got.text, err}
	}()
	if err := f.WaitCalls(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-resc:
		t.Fatalf("answered before release: %+v", r)
	default:
	}
	close(release)
	r := <-resc
	if r.err != nil || r.text != "released" {
		t.Errorf("got %q, %v", r.text, r.err)
	}
}

func TestCleanupEndsBlockedRequests(t *testing.T) {
	errc := make(chan error, 1)
	t.Run("inner", func(t *testing.T) {
		f := testkit.NewFakeLLM(t)
		f.Push(testkit.Reply{Block: make(chan struct{})}) // never released
		c := newClient(f)
		go func() {
			_, err := c.CreateChatCompletionStream(context.Background(), streamReq("fake-model"))
			errc <- err
		}()
		if err := f.WaitCalls(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
	})
	// The inner cleanup returned (it did not hang), and the client saw the
	// connection end.
	if err := <-errc; err == nil {
		t.Error("blocked request succeeded after the fake closed, want an error")
	}
}

func TestWaitCallsHonoursContext(t *testing.T) {
	f := testkit.NewFakeLLM(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := f.WaitCalls(ctx, 1)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "have 0") {
		t.Errorf("err = %v", err)
	}
}

func TestConcurrentRequests(t *testing.T) {
	f := testkit.NewFakeLLM(t)
	f.SetDefault(&testkit.Reply{Func: func(r testkit.Recorded) testkit.Reply {
		return testkit.Reply{Text: "re: " + r.Messages[0].Content}
	}})
	c := newClient(f)
	const n = 8
	var wg sync.WaitGroup
	got := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			req := streamReq("fake-model")
			req.Messages[0].Content = fmt.Sprintf("msg %d", i)
			stream, err := c.CreateChatCompletionStream(t.Context(), req)
			if err != nil {
				errs[i] = err
				return
			}
			s, err := collect(t, stream)
			got[i], errs[i] = s.text, err
		})
	}
	wg.Wait()
	for i := range n {
		if want := fmt.Sprintf("re: msg %d", i); errs[i] != nil || got[i] != want {
			t.Errorf("request %d: %q, %v; want %q", i, got[i], errs[i], want)
		}
	}
	if f.Calls() != n {
		t.Errorf("calls = %d, want %d", f.Calls(), n)
	}
}

func TestListModels(t *testing.T) {
	f := testkit.NewFakeLLM(t)
	f.SetModels("alpha", "beta")
	list, err := newClient(f).ListModels(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range list.Models {
		ids = append(ids, m.ID)
	}
	if !slices.Equal(ids, []string{"alpha", "beta"}) {
		t.Errorf("models = %v", ids)
	}
	if f.Calls() != 0 {
		t.Errorf("listing models counted as %d chat calls", f.Calls())
	}
}

// During an outage every completion gets the outage's reply and the queue
// waits; /models still answers; lifting it answers from the queue again.
func TestOutage(t *testing.T) {
	f := testkit.NewFakeLLM(t)
	f.Push(testkit.Reply{Text: "after the outage"})
	f.SetOutage(&testkit.Reply{Status: 503})
	c := newClient(f)
	for range 2 {
		_, err := c.CreateChatCompletionStream(t.Context(), streamReq("fake-model"))
		if ae := apiError(t, err); ae.HTTPStatusCode != 503 {
			t.Fatalf("during the outage: %+v", ae)
		}
	}
	if _, err := c.ListModels(t.Context()); err != nil {
		t.Errorf("/models during the outage: %v", err)
	}
	if f.Pending() != 1 || f.Calls() != 2 {
		t.Errorf("pending %d, calls %d; want the reply still queued after 2 calls", f.Pending(), f.Calls())
	}
	f.SetOutage(nil)
	stream, err := c.CreateChatCompletionStream(t.Context(), streamReq("fake-model"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := collect(t, stream); err != nil || got.text != "after the outage" {
		t.Errorf("after the outage: %q, %v", got.text, err)
	}
}
