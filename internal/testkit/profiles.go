package testkit

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strings"
	"testing"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/switchboard-gateway/switchboard/llm"
)

// A Profile makes the fake replay one model server's documented wire format
// and quirks instead of the tidy OpenAI dialect it speaks by default: where
// it serves, how it authenticates, which request parameters it refuses, how
// it streams tool calls and their ids, where it puts reasoning and cache
// counts. NewFakeLLMProfile starts a fake with one; Profiles lists them all
// for table tests.
type Profile struct {
	Name string
	// Model is a model id typical of the server (tests configure it as
	// llm.model; on Azure it is the deployment).
	Model string
	// Prefix is the path the OpenAI-compatible API is served under
	// ("/v1", Groq's "/openai/v1", Gemini's "/v1beta/openai"); FakeLLM.URL
	// ends with it. Azure serves /openai/deployments/{model}/... instead.
	Prefix string
	// Azure: POST /openai/deployments/{deployment}/chat/completions with
	// an api-version query parameter and the key in an api-key header (a
	// bearer token is refused with 401, as Azure does). FakeLLM.URL is the
	// resource's root; Recorded.Model is the deployment named by the path.
	Azure bool
	// Key, when set, is the only API key the server accepts (401 otherwise).
	Key string
	// Reasoning follows OpenAI's reasoning models (o-series, gpt-5):
	// max_tokens is refused in favour of max_completion_tokens, and a
	// temperature other than 1 is refused, each with a 400 naming it.
	Reasoning bool
	// ReasoningField names the field ("reasoning_content": DeepSeek,
	// llama.cpp; "reasoning": OpenRouter, Groq, Ollama, vLLM) in which
	// Thought is streamed (and sent whole) before each answer.
	ReasoningField string
	Thought        string
	// RejectReasoningInput refuses a request that sends reasoning_content
	// back in an assistant message of an earlier turn, before the last user
	// message (DeepSeek's reasoner; within the turn's tool calls its
	// thinking mode takes it back).
	RejectReasoningInput bool
	// Usage is the shape of the usage object: UsageOpenAI (cached and
	// reasoning tokens in prompt_tokens_details and
	// completion_tokens_details), UsageDeepSeek (prompt_cache_hit_tokens
	// and prompt_cache_miss_tokens as well) or UsagePlain (the three counts).
	Usage UsageShape
	// NoStreamUsage: stream_options is accepted and ignored, so a stream
	// carries no usage (LM Studio).
	NoStreamUsage bool
	// IDs is how tool-call ids are made.
	IDs IDStyle
	// UniqueIDs refuses a request whose history has two tool calls with the
	// same id (Anthropic's tool_use ids must be unique).
	UniqueIDs bool
	// WholeCalls streams each tool call whole in one delta, arguments
	// included (Ollama, LM Studio, Gemini, Mistral).
	WholeCalls bool
	// NoIndex leaves the index out of streamed tool-call deltas (Gemini's
	// OpenAI-compatible endpoint).
	NoIndex bool
	// ToolChoice is how a forced call (tool_choice naming a function) is
	// taken.
	ToolChoice ToolChoiceRule
	// NoImages refuses image parts with a 400 (DeepSeek).
	NoImages bool
	// Comments interleaves SSE comment lines (": PROCESSING") with the
	// chunks, as OpenRouter does while it waits for the upstream model.
	Comments bool
}

// UsageShape is the shape of a profile's usage object.
type UsageShape int

const (
	UsageOpenAI UsageShape = iota
	UsageDeepSeek
	UsagePlain
)

// IDStyle is how a profile's server makes tool-call ids.
type IDStyle int

const (
	// IDsScripted sends the ids the replies were scripted with.
	IDsScripted IDStyle = iota
	// IDsMistral makes 9-character alphanumeric ids and refuses any
	// other id in a request's history (Mistral's API, and vLLM serving a
	// Mistral model with its tokenizer).
	IDsMistral
	// IDsReused sends call_0, call_1, ... at every step, so ids repeat
	// across the steps of a turn (LM Studio and other local servers).
	IDsReused
	// IDsMissing sends no id at all.
	IDsMissing
)

// ToolChoiceRule is how a profile's server takes a forced tool call.
type ToolChoiceRule int

const (
	// ToolChoiceObject honours {"type":"function","function":{"name":…}}.
	ToolChoiceObject ToolChoiceRule = iota
	// ToolChoiceNoObject refuses the object form with a 400 and honours
	// "required" (llama.cpp's server).
	ToolChoiceNoObject
	// ToolChoiceIgnored accepts tool_choice and ignores it: the scripted
	// reply is sent as it is (Ollama).
	ToolChoiceIgnored
)

// Profiles of the servers people point the gateway at, each as its
// documentation describes it.
var (
	ProfileOpenAI = Profile{Name: "openai", Model: "gpt-4.1-mini", Prefix: "/v1", Key: "sk-openai"}
	// ProfileOpenAIReasoning is an OpenAI reasoning model.
	ProfileOpenAIReasoning = Profile{Name: "openai-reasoning", Model: "o4-mini", Prefix: "/v1", Key: "sk-openai", Reasoning: true}
	// ProfileAzure is Azure OpenAI with a reasoning model behind a
	// deployment whose name says nothing of it.
	ProfileAzure     = Profile{Name: "azure", Model: "prod-reasoner", Azure: true, Key: "azure-key-0123", Reasoning: true}
	ProfileAnthropic = Profile{Name: "anthropic", Model: "claude-sonnet-4-5", Prefix: "/v1", Key: "sk-ant-test", UniqueIDs: true}
	ProfileGemini    = Profile{Name: "gemini", Model: "gemini-2.5-flash", Prefix: "/v1beta/openai", Key: "gemini-key",
		WholeCalls: true, NoIndex: true}
	ProfileDeepSeek = Profile{Name: "deepseek", Model: "deepseek-reasoner", Prefix: "/v1", Key: "sk-deepseek",
		ReasoningField: "reasoning_content", Thought: "The user wants something; let me think it through.",
		RejectReasoningInput: true, Usage: UsageDeepSeek, NoImages: true}
	ProfileMistral = Profile{Name: "mistral", Model: "mistral-large-latest", Prefix: "/v1", Key: "mistral-key",
		IDs: IDsMistral, WholeCalls: true, Usage: UsagePlain}
	ProfileGroq = Profile{Name: "groq", Model: "qwen/qwen3-32b", Prefix: "/openai/v1", Key: "gsk-test",
		ReasoningField: "reasoning", Thought: "Thinking about the request.", Usage: UsagePlain, WholeCalls: true}
	ProfileOpenRouter = Profile{Name: "openrouter", Model: "deepseek/deepseek-r1", Prefix: "/api/v1", Key: "sk-or-test",
		ReasoningField: "reasoning", Thought: "Working out the answer.", Comments: true}
	ProfileOllama = Profile{Name: "ollama", Model: "qwen3:8b", Prefix: "/v1",
		ReasoningField: "reasoning", Thought: "Okay, the user asks.", WholeCalls: true, ToolChoice: ToolChoiceIgnored, Usage: UsagePlain}
	// ProfileVLLM serves a Mistral model with its tokenizer, which takes
	// only Mistral's tool-call ids.
	ProfileVLLM = Profile{Name: "vllm", Model: "mistralai/Mistral-Small-3.1-24B-Instruct-2503", Prefix: "/v1",
		IDs: IDsMistral, Usage: UsagePlain}
	ProfileLlamaCpp = Profile{Name: "llamacpp", Model: "qwen2.5-7b-instruct-q4_k_m.gguf", Prefix: "/v1",
		ReasoningField: "reasoning_content", Thought: "Let me consider.", ToolChoice: ToolChoiceNoObject, Usage: UsagePlain}
	ProfileLMStudio = Profile{Name: "lmstudio", Model: "qwen2.5-7b-instruct", Prefix: "/v1",
		IDs: IDsReused, WholeCalls: true, NoStreamUsage: true, Usage: UsagePlain}
)

// Profiles returns every profile, in a stable order.
func Profiles() []Profile {
	return []Profile{ProfileOpenAI, ProfileOpenAIReasoning, ProfileAzure, ProfileAnthropic, ProfileGemini,
		ProfileDeepSeek, ProfileMistral, ProfileGroq, ProfileOpenRouter, ProfileOllama, ProfileVLLM,
		ProfileLlamaCpp, ProfileLMStudio}
}

// AzureAPIVersion is the api-version the Azure profile requires.
const AzureAPIVersion = "2024-10-21"

// NewFakeLLMProfile starts a fake that replays p on 127.0.0.1; it is
// closed on t.Cleanup.
func NewFakeLLMProfile(t testing.TB, p Profile) *FakeLLM {
	t.Helper()
	f := start("127.0.0.1:0", &p)
	t.Cleanup(f.Close)
	return f
}

// Profile returns the profile the fake replays (the zero Profile: none).
func (f *FakeLLM) Profile() Profile {
	if f.profile == nil {
		return Profile{}
	}
	return *f.profile
}

// routes registers the profile's chat and models routes.
func (p *Profile) routes(mux *http.ServeMux, f *FakeLLM) {
	if p.Azure {
		mux.HandleFunc("POST /openai/deployments/{deployment}/chat/completions", f.handleChat)
		mux.HandleFunc("GET /openai/models", f.handleModels)
		return
	}
	mux.HandleFunc("POST "+p.prefix()+"/chat/completions", f.handleChat)
	mux.HandleFunc("GET "+p.prefix()+"/models", f.handleModels)
}

func (p *Profile) prefix() string {
	if p.Prefix == "" {
		return "/v1"
	}
	return p.Prefix
}

// base is the base URL a client is configured with.
func (p *Profile) base(root string) string {
	if p.Azure {
		return root
	}
	return root + p.prefix()
}

// auth checks the request's key as the server does; "" means it passes.
func (p *Profile) auth(r *http.Request) string {
	if p.Azure {
		if r.URL.Query().Get("api-version") == "" {
			return "missing api-version"
		}
		if p.Key != "" && r.Header.Get("api-key") != p.Key {
			return "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."
		}
		return ""
	}
	if p.Key != "" && r.Header.Get("Authorization") != "Bearer "+p.Key {
		return "Incorrect API key provided."
	}
	return ""
}

// mistralID is the form of Mistral's tool-call ids.
var mistralID = regexp.MustCompile(`^[a-zA-Z0-9]{9}$`)

// check applies the profile's request rules to a decoded request: a
// non-nil reply refuses it. It also adjusts rec as the server reads it.
func (p *Profile) check(r *http.Request, rec *Recorded) *Reply {
	if msg := p.auth(r); msg != "" {
		status := http.StatusUnauthorized
		if msg == "missing api-version" {
			status, msg = http.StatusNotFound, "Resource not found"
		}
		return &Reply{Status: status, ErrorMessage: msg}
	}
	if p.Azure {
		rec.Model = r.PathValue("deployment")
	}
	if p.NoStreamUsage {
		rec.IncludeUsage = false
	}
	var params struct {
		MaxTokens   *int             `json:"max_tokens"`
		Temperature *float64         `json:"temperature"`
		Messages    []map[string]any `json:"messages"`
	}
	_ = jsonv1.Unmarshal(rec.Raw, &params)
	bad := func(code, msg string) *Reply {
		return &Reply{Status: http.StatusBadRequest, ErrorCode: code, ErrorMessage: msg}
	}
	if p.Reasoning {
		if params.MaxTokens != nil {
			return bad("unsupported_parameter",
				"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.")
		}
		if params.Temperature != nil && *params.Temperature != 1 {
			return bad("unsupported_value", fmt.Sprintf(
				"Unsupported value: 'temperature' does not support %g with this model. Only the default (1) value is supported.", *params.Temperature))
		}
	}
	if p.RejectReasoningInput {
		lastUser := -1
		for i, m := range params.Messages {
			if m["role"] == "user" {
				lastUser = i
			}
		}
		for _, m := range params.Messages[:max(lastUser, 0)] {
			if _, ok := m["reasoning_content"]; ok {
				return bad("invalid_request_error",
					"The reasoning_content is an intermediate result for display purposes only and will not be included in the context for inference. Please remove the reasoning_content from your message to reduce network traffic.")
			}
		}
	}
	seen := map[string]bool{}
	for _, m := range rec.Messages {
		ids := []string{}
		for _, c := range m.ToolCalls {
			ids = append(ids, c.ID)
		}
		for _, id := range ids {
			if p.IDs == IDsMistral && !mistralID.MatchString(id) {
				return bad("invalid_request_message_order",
					fmt.Sprintf("Tool call id was %s but must be a-z, A-Z, 0-9, with a length of 9.", id))
			}
			if p.UniqueIDs && seen[id] {
				return bad("invalid_request_error",
					fmt.Sprintf("messages: `tool_use` ids must be unique; %s appears more than once", id))
			}
			seen[id] = true
		}
		if m.Role == llm.RoleTool && p.IDs == IDsMistral && !mistralID.MatchString(m.ToolCallID) {
			return bad("invalid_request_message_order",
				fmt.Sprintf("Tool call id was %s but must be a-z, A-Z, 0-9, with a length of 9.", m.ToolCallID))
		}
		if p.NoImages && len(m.Images) > 0 {
			return bad("invalid_request_error",
				"Failed to deserialize the JSON body into the target type: messages[1]: unknown variant `image_url`, expected `text`")
		}
	}
	if p.ToolChoice == ToolChoiceIgnored {
		rec.ForcedTool = "" // not read: the model calls what it likes
	}
	if rec.ForcedTool != "" && p.ToolChoice == ToolChoiceNoObject {
		return bad("invalid_request_error",
			`Invalid tool_choice: {"type":"function"}: only "auto", "none" and "required" are supported`)
	}
	if string(rec.ToolChoice) == `"required"` && p.ToolChoice == ToolChoiceNoObject && len(rec.Tools) == 1 {
		rec.ForcedTool = rec.Tools[0].Name // required with one tool: that tool
	}
	return nil
}

// shape rewrites a scripted reply as the profile's server would send it.
func (p *Profile) shape(reply Reply) Reply {
	if len(reply.ToolCalls) > 0 {
		calls := make([]llm.ToolCall, len(reply.ToolCalls))
		for i, c := range reply.ToolCalls {
			switch p.IDs {
			case IDsMistral:
				c.ID = randomID(9)
			case IDsReused:
				c.ID = fmt.Sprintf("call_%d", i)
			}
			calls[i] = c
		}
		reply.ToolCalls = calls
	}
	if p.WholeCalls {
		reply.ArgPieces = 1
	}
	return reply
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

func randomID(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = idAlphabet[rand.IntN(len(idAlphabet))]
	}
	return string(b)
}

// wireCalls adjusts streamed tool-call deltas: ids left out, indexes left
// out, each call whole in one delta.
func (p *Profile) wireCalls(chunks []wireToolCall) []wireToolCall {
	if p == nil {
		return chunks
	}
	if p.WholeCalls {
		var whole []wireToolCall // one per call, in the order the calls began
		at := map[int]int{}      // call index → position in whole
		for _, c := range chunks {
			args := ""
			if c.Function.Arguments != nil {
				args = *c.Function.Arguments
			}
			k, ok := at[*c.Index]
			if !ok {
				c.Function.Arguments = &args
				at[*c.Index] = len(whole)
				whole = append(whole, c)
				continue
			}
			joined := *whole[k].Function.Arguments + args
			whole[k].Function.Arguments = &joined
		}
		chunks = whole
	}
	out := make([]wireToolCall, len(chunks))
	for i, c := range chunks {
		if p.IDs == IDsMissing {
			c.ID = ""
		}
		if p.NoIndex {
			c.Index = nil
		}
		out[i] = c
	}
	return out
}

// wireUsage writes u in the profile's shape.
func (p *Profile) wireUsage(u wireUsage, cached, reasoning int) any {
	shape := UsageOpenAI
	if p != nil {
		shape = p.Usage
	}
	switch shape {
	case UsagePlain:
		return u
	case UsageDeepSeek:
		return map[string]any{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens,
			"total_tokens": u.TotalTokens, "prompt_cache_hit_tokens": cached,
			"prompt_cache_miss_tokens":  u.PromptTokens - cached,
			"completion_tokens_details": map[string]int{"reasoning_tokens": reasoning}}
	default:
		if p == nil && cached == 0 && reasoning == 0 {
			return u // the fake's own dialect, as before profiles
		}
		return map[string]any{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens,
			"total_tokens":              u.TotalTokens,
			"prompt_tokens_details":     map[string]int{"cached_tokens": cached},
			"completion_tokens_details": map[string]int{"reasoning_tokens": reasoning}}
	}
}

// thought returns the delta carrying the profile's reasoning text, if any.
func (p *Profile) thought() (wireDelta, bool) {
	switch {
	case p == nil || p.Thought == "":
		return wireDelta{}, false
	case p.ReasoningField == "reasoning_content":
		return wireDelta{ReasoningContent: p.Thought}, true
	case p.ReasoningField == "reasoning":
		return wireDelta{Reasoning: p.Thought}, true
	}
	return wireDelta{}, false
}

// sseComment is what a profile with Comments writes between chunks.
func (p *Profile) sseComment() string {
	if p != nil && p.Comments {
		return ": OPENROUTER PROCESSING\n\n"
	}
	return ""
}

// String names the profile (for test names).
func (p Profile) String() string { return strings.ReplaceAll(p.Name, " ", "_") }

// Capable is a default reply (SetDefault) of a model that can do what
// doctor probes: it calls the forced tool, else the first tool offered,
// else answers in text.
func Capable() *Reply {
	return &Reply{Func: func(rec Recorded) Reply {
		name := rec.ForcedTool
		if name == "" && len(rec.Tools) > 0 {
			name = rec.Tools[0].Name
		}
		if name == "" {
			return Reply{Text: "White."}
		}
		return Reply{ToolCalls: []llm.ToolCall{{Name: name, Arguments: `{"status":"ok"}`}}}
	}}
}

// ClientConfig is the model client's configuration for the fake f
// replaying p: its base URL (Azure: a deployment's URL as the portal shows
// it), key and model.
func (p Profile) ClientConfig(f *FakeLLM) llm.Config {
	c := llm.Config{BaseURL: f.URL, APIKey: p.Key, Model: p.Model, MaxRetries: -1}
	if p.Azure {
		c.BaseURL = f.URL + "/openai/deployments/" + p.Model + "/chat/completions?api-version=" + AzureAPIVersion
	}
	return c
}
