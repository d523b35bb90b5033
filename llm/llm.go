// Package llm is the vocabulary of a conversation with a chat model
// (messages, tool calls, tool specs, usage) and a client that speaks it to
// any OpenAI-compatible server through github.com/sashabaranov/go-openai.
package llm

import (
	"encoding/json"
	"errors"
)

// Role is who said a message.
type Role string

const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of a conversation as the model sees it.
type Message struct {
	Role       Role       `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"` // on RoleTool: the call it answers
	Name       string     `json:"name,omitempty"`         // on RoleTool: the tool's name
	Images     []Image    `json:"images,omitempty"`       // on RoleUser: image inputs (vision models)
	// Reasoning, on RoleAssistant, is the reasoning_content the server
	// sent with this message. It is never stored, shown or sent to the
	// chat; the request carries it back only on an assistant message with
	// tool calls (see reasoning.go for the rule), and the agent keeps it
	// only within the turn that produced it.
	Reasoning string `json:"-"`
}

// Image is an image input attached to a user message.
type Image struct {
	MIME string `json:"mime"`
	Data []byte `json:"data,omitempty"` // raw bytes; sent as a data: URL
	URL  string `json:"url,omitempty"`  // or a URL the provider can fetch
}

// ToolCall is the model's request to run a tool.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // raw JSON text as the model produced it (may be invalid)
}

// ToolSpec describes a tool offered to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"` // JSON Schema of the arguments object
}

// Usage is the token accounting of one model call.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// CachedTokens are the prompt tokens the provider served from its
	// prompt cache (a part of PromptTokens).
	CachedTokens int `json:"cached_tokens,omitempty"`
	// ReasoningTokens are the completion tokens spent on reasoning (a
	// part of CompletionTokens).
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
}

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		PromptTokens:     u.PromptTokens + o.PromptTokens,
		CompletionTokens: u.CompletionTokens + o.CompletionTokens,
		TotalTokens:      u.TotalTokens + o.TotalTokens,
		CachedTokens:     u.CachedTokens + o.CachedTokens,
		ReasoningTokens:  u.ReasoningTokens + o.ReasoningTokens,
	}
}

// Finish reasons as reported by OpenAI-compatible servers.
const (
	FinishStop      = "stop"
	FinishLength    = "length"
	FinishToolCalls = "tool_calls"
)

// Request is one model call.
type Request struct {
	Messages  []Message
	Tools     []ToolSpec // nil or empty: no tools offered
	MaxTokens int        // 0: server default
	// ForceTool, when set, forces the model to call this tool (structured output).
	ForceTool string
	// StreamCalls names the tools whose calls are handed to onDelta as they
	// stream (Delta.ToolName and the rest). A fragment handed out counts as
	// streamed, like text: no retry or fallback follows it. Calls of other
	// tools are only assembled, so a stream cut in one of them is retried.
	StreamCalls []string
}

// Response is the assembled answer of one model call.
type Response struct {
	Message      Message // RoleAssistant: text and/or tool calls
	FinishReason string
	Usage        Usage
	Model        string // the model that answered (after fallbacks)
	// Reasoning is the model's reasoning, from any of the forms servers
	// send it in (reasoning_content, reasoning, <think> blocks in the
	// content), kept out of Message.Content. For logs and tests only:
	// never shown to a user.
	Reasoning string
	// MalformedCall is set when tools were offered and the content was
	// plainly a tool call written as text that could not be recovered
	// (not JSON, or a tool not offered): it says what is wrong, and
	// Message.Content is empty (the call text is never a reply).
	MalformedCall string
}

// Delta is a piece of a streamed answer, handed to the caller as it arrives:
// a fragment of assistant text (Text), or a fragment of the arguments of a
// tool call named in Request.StreamCalls (ToolName set).
type Delta struct {
	Text string // a fragment of assistant text

	// ToolIndex is the call's position among the answer's tool calls;
	// ToolID and ToolName are the call's id and name as the assembled
	// ToolCall has them (on every fragment, not only the first);
	// ToolArgs is the next fragment of its JSON arguments, raw.
	ToolIndex int
	ToolID    string
	ToolName  string
	ToolArgs  string

	// Thinking: the model is reasoning (a reasoning fragment arrived; its
	// text is never handed out).
	Thinking bool
	// Retract: the answer text handed out so far was reasoning after all
	// (a </think> without an opener came); the caller takes it back.
	Retract bool
}

// ErrContextLength is matched (errors.Is) by errors that mean the request did
// not fit the model's context window; the caller should compact and retry.
var ErrContextLength = errors.New("llm: context length exceeded")
