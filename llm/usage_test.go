package llm_test

import (
	"encoding/json"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// Every kind of token is read from the field its server sends it in.
func TestCompleteUsageKinds(t *testing.T) {
	tests := []struct {
		name  string
		usage string
		want  llm.Usage
	}{
		{"openai details", `{"prompt_tokens":2048,"completion_tokens":300,"total_tokens":2348,
			"prompt_tokens_details":{"cached_tokens":1536,"audio_tokens":0},
			"completion_tokens_details":{"reasoning_tokens":256,"audio_tokens":0}}`,
			llm.Usage{PromptTokens: 2048, CompletionTokens: 300, TotalTokens: 2348, CachedTokens: 1536, ReasoningTokens: 256}},
		{"deepseek cache fields", `{"prompt_tokens":1200,"completion_tokens":80,"total_tokens":1280,
			"prompt_cache_hit_tokens":1024,"prompt_cache_miss_tokens":176,
			"completion_tokens_details":{"reasoning_tokens":50}}`,
			llm.Usage{PromptTokens: 1200, CompletionTokens: 80, TotalTokens: 1280, CachedTokens: 1024, ReasoningTokens: 50}},
		{"moonshot top-level cached_tokens", `{"prompt_tokens":900,"completion_tokens":10,"total_tokens":910,"cached_tokens":512}`,
			llm.Usage{PromptTokens: 900, CompletionTokens: 10, TotalTokens: 910, CachedTokens: 512}},
		{"details null, no total", `{"prompt_tokens":50,"completion_tokens":5,"prompt_tokens_details":null}`,
			llm.Usage{PromptTokens: 50, CompletionTokens: 5, TotalTokens: 55}},
		{"cached beyond the prompt is capped", `{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11,
			"prompt_tokens_details":{"cached_tokens":64}}`,
			llm.Usage{PromptTokens: 10, CompletionTokens: 1, TotalTokens: 11, CachedTokens: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.fake.Push(testkit.Reply{Text: "ok", UsageJSON: json.RawMessage(tt.usage)})
			resp, _, err := h.complete(t, userSays("hi"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Usage != tt.want {
				t.Errorf("usage = %+v, want %+v", resp.Usage, tt.want)
			}
		})
	}
}

// The fake sends OpenAI's details for a scripted usage with cached and
// reasoning tokens, and the client reads them back.
func TestCompleteUsageDetailsFromFake(t *testing.T) {
	h := newHarness(t, nil)
	want := llm.Usage{PromptTokens: 3000, CompletionTokens: 40, TotalTokens: 3040, CachedTokens: 2048, ReasoningTokens: 12}
	h.fake.Push(testkit.Reply{Text: "ok", Usage: &want})
	resp, _, err := h.complete(t, userSays("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
}
