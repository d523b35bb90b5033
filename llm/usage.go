package llm

import (
	"bytes"
	"encoding/json"
	"fmt"

	openai "github.com/sashabaranov/go-openai"
)

// wireUsage is a usage object as the servers send it. Where a server puts
// the prompt tokens it served from its cache differs:
//   - OpenAI, Azure, Anthropic's and Gemini's compatible endpoints, Groq,
//     OpenRouter, vLLM: prompt_tokens_details.cached_tokens;
//   - DeepSeek: prompt_cache_hit_tokens (beside prompt_cache_miss_tokens);
//   - Moonshot: a top-level cached_tokens.
//
// Reasoning tokens come in completion_tokens_details.reasoning_tokens.
type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	PromptCacheHitTokens int `json:"prompt_cache_hit_tokens"`
	CachedTokens         int `json:"cached_tokens"`
}

// usage returns the accounting the server sent, each kind from the field
// its server uses. Cached tokens never exceed the prompt's, reasoning
// tokens never the completion's: a server that counts them apart from
// those is still read as a part of them.
func (w wireUsage) usage() Usage {
	u := Usage{PromptTokens: w.PromptTokens, CompletionTokens: w.CompletionTokens, TotalTokens: w.TotalTokens}
	switch {
	case w.PromptTokensDetails != nil && w.PromptTokensDetails.CachedTokens > 0:
		u.CachedTokens = w.PromptTokensDetails.CachedTokens
	case w.PromptCacheHitTokens > 0:
		u.CachedTokens = w.PromptCacheHitTokens
	default:
		u.CachedTokens = w.CachedTokens
	}
	if w.CompletionTokensDetails != nil {
		u.ReasoningTokens = w.CompletionTokensDetails.ReasoningTokens
	}
	u.CachedTokens = min(max(u.CachedTokens, 0), u.PromptTokens)
	u.ReasoningTokens = min(max(u.ReasoningTokens, 0), u.CompletionTokens)
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u
}

// streamChunk is one chunk of a streamed answer: go-openai's type, and
// what it does not decode: the usage as the server wrote it (go-openai reads
// neither DeepSeek's nor Moonshot's cache fields), and the reasoning field
// of each choice's delta (OpenRouter, Ollama).
type streamChunk struct {
	openai.ChatCompletionStreamResponse
	usage     *Usage
	reasoning []string // by choice
}

// usageKey is how a chunk that may carry usage is told apart cheaply; the
// text of an answer that contains it only costs a second decode.
var usageKey = []byte(`"usage"`)

// recvChunk reads the next chunk of the stream.
func recvChunk(stream *openai.ChatCompletionStream) (streamChunk, error) {
	raw, err := stream.RecvRaw()
	if err != nil {
		return streamChunk{}, err
	}
	var c streamChunk
	if err := json.Unmarshal(raw, &c.ChatCompletionStreamResponse); err != nil {
		return streamChunk{}, fmt.Errorf("decode stream chunk: %w", err)
	}
	if c.Usage != nil && bytes.Contains(raw, usageKey) {
		var w struct {
			Usage *wireUsage `json:"usage"`
		}
		if err := json.Unmarshal(raw, &w); err == nil && w.Usage != nil {
			u := w.Usage.usage()
			c.usage = &u
		}
	}
	if bytes.Contains(raw, []byte(`"reasoning"`)) {
		var r struct {
			Choices []struct {
				Delta struct {
					Reasoning string `json:"reasoning"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal(raw, &r) == nil {
			for _, ch := range r.Choices {
				c.reasoning = append(c.reasoning, ch.Delta.Reasoning)
			}
		}
	}
	return c, nil
}
