package llm_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// stream records what a call handed to onDelta: the answer text as a
// chat would show it (a Retract takes back what came before), every text
// fragment ever handed out, and whether Thinking came.
type stream struct {
	shown     string
	fragments []string
	thinking  bool
	retracts  int
}

func (s *stream) onDelta(d llm.Delta) {
	if d.Retract {
		s.shown = ""
		s.retracts++
	}
	if d.Thinking {
		s.thinking = true
	}
	if d.Text != "" {
		s.shown += d.Text
		s.fragments = append(s.fragments, d.Text)
	}
}

func (s *stream) everything() string { return strings.Join(s.fragments, "") }

func run(t *testing.T, h *harness, req llm.Request) (llm.Response, *stream) {
	t.Helper()
	s := &stream{}
	resp, err := h.client.Complete(t.Context(), req, s.onDelta)
	if err != nil {
		t.Fatal(err)
	}
	return resp, s
}

// The reasoning of a reasoning model never reaches the content or the
// stream, in any of the forms servers send it, however the fragments
// split the tags.
func TestReasoningKeptOutOfTheAnswer(t *testing.T) {
	const secret = "SECRET-CHAIN-OF-THOUGHT"
	tests := []struct {
		name  string
		reply testkit.Reply
		want  string // the content
	}{
		{"reasoning_content field", testkit.Reply{Reasoning: "the user greets me, " + secret, Text: "Hello there!"}, "Hello there!"},
		{"reasoning field", testkit.Reply{Reasoning: "the user greets me, " + secret, ReasoningField: "reasoning", Text: "Hello there!"}, "Hello there!"},
		{"think block", testkit.Reply{TextChunks: []string{"<think>\nThe user greets me. ", secret, "\n</think>\n\nHello there!"}}, "Hello there!"},
		{"think tags split across fragments", testkit.Reply{TextChunks: []string{"<th", "ink>", secret, " ok</t", "hink", ">\n\nHello", " there!"}}, "Hello there!"},
		{"unclosed think block", testkit.Reply{TextChunks: []string{"<think>", "I wonder ", secret, " and"}}, ""},
		{"think block after leading space", testkit.Reply{TextChunks: []string{"\n\n<think>", secret, "</think>", "Hello there!"}}, "Hello there!"},
		{"second think block mid-answer", testkit.Reply{TextChunks: []string{"Hello ", "<think>", secret, "</think>", "there!"}}, "Hello there!"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.fake.Push(tt.reply)
			resp, s := run(t, h, userSays("hi"))
			if resp.Message.Content != tt.want {
				t.Errorf("content = %q, want %q", resp.Message.Content, tt.want)
			}
			if strings.Contains(s.everything(), secret) || strings.Contains(s.everything(), "think>") {
				t.Errorf("the stream handed out %q", s.everything())
			}
			if strings.TrimSpace(s.shown) != tt.want {
				t.Errorf("the stream showed %q, want %q", s.shown, tt.want)
			}
			if !strings.Contains(resp.Reasoning, secret) {
				t.Errorf("Reasoning = %q, want the reasoning", resp.Reasoning)
			}
			if !s.thinking {
				t.Error("no Thinking delta")
			}
		})
	}
}

// A model whose template opens <think> in the prompt emits only </think>.
// The first time, the text handed out is taken back; from then on the
// client holds that model's answers until </think>, so nothing of the
// reasoning is handed out at all.
func TestReasoningWithoutOpeningTag(t *testing.T) {
	const secret = "SECRET-CHAIN-OF-THOUGHT"
	h := newHarness(t, nil)
	reply := testkit.Reply{TextChunks: []string{"Okay, the user ", secret, " so I answer.", "\n</think>\n\n", "Hello", " there!"}}
	h.fake.Push(reply, reply)

	resp, s := run(t, h, userSays("hi"))
	if resp.Message.Content != "Hello there!" || !strings.Contains(resp.Reasoning, secret) {
		t.Errorf("first: content = %q, reasoning = %q", resp.Message.Content, resp.Reasoning)
	}
	if s.retracts != 1 || s.shown != "Hello there!" {
		t.Errorf("first: %d retracts, shown %q; want the reasoning taken back once", s.retracts, s.shown)
	}

	resp, s = run(t, h, userSays("hi again"))
	if resp.Message.Content != "Hello there!" {
		t.Errorf("second: content = %q", resp.Message.Content)
	}
	if strings.Contains(s.everything(), secret) || s.retracts != 0 {
		t.Errorf("second: handed out %q with %d retracts, want nothing of the reasoning", s.everything(), s.retracts)
	}

	// An answer of that model without any </think> is the answer, whole.
	h.fake.Push(testkit.Reply{TextChunks: []string{"Just ", "the answer."}})
	resp, s = run(t, h, userSays("and?"))
	if resp.Message.Content != "Just the answer." || s.shown != "Just the answer." {
		t.Errorf("third: content = %q, shown %q", resp.Message.Content, s.shown)
	}
}

// completion_tokens_details.reasoning_tokens lands in Usage.ReasoningTokens.
func TestReasoningTokensCounted(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.Push(testkit.Reply{Reasoning: "hmm", Text: "42",
		Usage: &llm.Usage{PromptTokens: 100, CompletionTokens: 70, TotalTokens: 170, ReasoningTokens: 64}})
	resp, _ := run(t, h, userSays("the answer?"))
	want := llm.Usage{PromptTokens: 100, CompletionTokens: 70, TotalTokens: 170, ReasoningTokens: 64}
	if resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
}

// reasoning_content comes back on the message that called tools, in the
// same tool loop, and never on an answer; reasoning from other forms is
// never handed back.
func TestReasoningHandedBackOnlyWithToolCalls(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.Push(testkit.Reply{Reasoning: "need the weather", ToolCalls: []llm.ToolCall{testkit.Call("c1", "get_weather", `{"city":"Paris"}`)}})
	resp, _ := run(t, h, userSays("weather?"))
	if resp.Message.Reasoning != "need the weather" {
		t.Fatalf("Message.Reasoning = %q", resp.Message.Reasoning)
	}
	h.fake.Push(testkit.Reply{Reasoning: "inline", ReasoningField: "reasoning", Text: "Sunny."})
	req := userSays("weather?")
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Content: "earlier answer", Reasoning: "old thoughts"},
		resp.Message,
		llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Name: "get_weather", Content: "sunny"})
	resp2, _ := run(t, h, req)
	if resp2.Message.Reasoning != "" || resp2.Reasoning != "inline" {
		t.Errorf("reasoning field: Message.Reasoning = %q (want none: never handed back), Reasoning = %q", resp2.Message.Reasoning, resp2.Reasoning)
	}
	sent := h.fake.Requests()[1].Messages
	if sent[1].Reasoning != "" {
		t.Errorf("an answer's reasoning was handed back: %q", sent[1].Reasoning)
	}
	if sent[2].Reasoning != "need the weather" {
		t.Errorf("the tool-calling message carried reasoning %q, want it handed back", sent[2].Reasoning)
	}
}

var offered = []llm.ToolSpec{
	{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
	{Name: "get_time", Parameters: json.RawMessage(`{"type":"object","properties":{"tz":{"type":"string"}}}`)},
}

func withTools(text string) llm.Request {
	r := userSays(text)
	r.Tools = offered
	return r
}

// A tool call written as text in one of the common forms becomes a
// structured call to the offered tool, and the call text is never handed
// out as answer text.
func TestToolCallsWrittenAsText(t *testing.T) {
	paris := llm.ToolCall{ID: "call_0", Name: "get_weather", Arguments: `{"city":"Paris"}`}
	utc := llm.ToolCall{ID: "call_1", Name: "get_time", Arguments: `{"tz":"UTC"}`}
	tests := []struct {
		name     string
		chunks   []string
		want     []llm.ToolCall
		wantRest string
	}{
		{"bare json", []string{`{"name": "get_`, `weather", "arguments": {"city": "Paris"}}`}, []llm.ToolCall{paris}, ""},
		{"bare json with parameters", []string{`{"name":"get_weather","parameters":{"city":"Paris"}}`}, []llm.ToolCall{paris}, ""},
		{"arguments as a string", []string{`{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}`}, []llm.ToolCall{paris}, ""},
		{"function wrapper", []string{`{"type":"function","function":{"name":"get_weather","arguments":{"city":"Paris"}}}`}, []llm.ToolCall{paris}, ""},
		{"a list of two", []string{"[", `{"name":"get_weather","arguments":{"city":"Paris"}}, {"name":"get_time","arguments":{"tz":"UTC"}}]`}, []llm.ToolCall{paris, utc}, ""},
		{"tool_call tags", []string{"<tool", "_call>\n", `{"name": "get_weather", "arguments": {"city": "Paris"}}`, "\n</tool_call>"}, []llm.ToolCall{paris}, ""},
		{"two tool_call blocks after text", []string{"Let me check.\n<tool_call>", `{"name":"get_weather","arguments":{"city":"Paris"}}</tool_call>`, `<tool_call>{"name":"get_time","arguments":{"tz":"UTC"}}</tool_call>`}, []llm.ToolCall{paris, utc}, "Let me check."},
		{"unclosed tool_call", []string{`<tool_call>{"name":"get_weather","arguments":{"city":"Paris"}}`}, []llm.ToolCall{paris}, ""},
		{"fenced json", []string{"``", "`json\n", `{"name": "get_weather", "arguments": {"city": "Paris"}}`, "\n```"}, []llm.ToolCall{paris}, ""},
		{"mistral list", []string{"[TOOL_", `CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]`}, []llm.ToolCall{paris}, ""},
		{"mistral args", []string{`[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}`}, []llm.ToolCall{paris}, ""},
		{"llama python_tag", []string{"<|python", `_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}<|eom_id|>`}, []llm.ToolCall{paris}, ""},
		{"gemma tool_code", []string{"I'll look that up.\n", "```tool_code\nget_weather(city=\"Paris\")\n```"}, []llm.ToolCall{paris}, "I'll look that up."},
		{"gemma trailing json", []string{"I'll look that up.\n", `{"name": "get_weather", "parameters": {"city": "Paris"}}`}, []llm.ToolCall{paris}, "I'll look that up."},
		{"after a think block", []string{"<think>which tool?</think>\n", `{"name":"get_weather","arguments":{"city":"Paris"}}`}, []llm.ToolCall{paris}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.fake.Push(testkit.Reply{TextChunks: tt.chunks})
			resp, s := run(t, h, withTools("weather in Paris?"))
			// Recovered calls get fresh ids, unique in the history
			// (provider.go): compared apart from the rest.
			got := slices.Clone(resp.Message.ToolCalls)
			ids := map[string]bool{}
			for i := range got {
				if got[i].ID == "" || ids[got[i].ID] {
					t.Errorf("call %d has id %q: want a unique one", i, got[i].ID)
				}
				ids[got[i].ID] = true
				got[i].ID = ""
			}
			want := slices.Clone(tt.want)
			for i := range want {
				want[i].ID = ""
			}
			if !slices.Equal(got, want) {
				t.Errorf("calls = %+v, want %+v", resp.Message.ToolCalls, tt.want)
			}
			if resp.Message.Content != tt.wantRest {
				t.Errorf("content = %q, want %q", resp.Message.Content, tt.wantRest)
			}
			if resp.MalformedCall != "" {
				t.Errorf("MalformedCall = %q", resp.MalformedCall)
			}
			if got := s.everything(); strings.Contains(got, "get_weather") || strings.Contains(got, "{") {
				t.Errorf("the call text was handed out: %q", got)
			}
		})
	}
}

// Text that is plainly a call but cannot be one is neither content nor
// handed out: MalformedCall says what is wrong.
func TestMalformedToolCallText(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   string // in MalformedCall
	}{
		{"cut json in tags", []string{`<tool_call>{"name": "get_weather", "arguments": {"city": "Par</tool_call>`}, "not valid JSON"},
		{"cut bare json", []string{`{"name": "get_weather", "arguments": {"city": `}, "not valid JSON"},
		{"a tool not offered", []string{`{"name": "delete_everything", "arguments": {}}`}, `"delete_everything", which is not an offered tool`},
		{"arguments not an object", []string{`<tool_call>{"name": "get_weather", "arguments": "Paris"}</tool_call>`}, "not a JSON object"},
		{"tags without a call", []string{`<tool_call>{"city": "Paris"}</tool_call>`}, "no name and arguments"},
		{"python_tag code", []string{`<|python_tag|>brave_search.call(query="weather")`}, "not valid JSON"},
		{"mistral without args", []string{`[TOOL_CALLS]get_weather{"city": "Paris"}`}, "neither a JSON list"},
		{"gemma code not a call", []string{"```tool_code\nimport os; os.system('x')\n```"}, "has no plain name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.fake.Push(testkit.Reply{TextChunks: tt.chunks})
			resp, s := run(t, h, withTools("weather?"))
			if !strings.Contains(resp.MalformedCall, tt.want) {
				t.Errorf("MalformedCall = %q, want it to say %q", resp.MalformedCall, tt.want)
			}
			if resp.Message.Content != "" || len(resp.Message.ToolCalls) != 0 {
				t.Errorf("message = %+v, want empty", resp.Message)
			}
			if s.everything() != "" {
				t.Errorf("handed out %q", s.everything())
			}
		})
	}
}

// Answers that only look a little like calls stay answers, handed out
// whole (held text comes at the end); without tools nothing is held.
func TestAnswersThatAreNotCalls(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		tools  bool
	}{
		{"braces mid-line", []string{"Use {name} as ", "a placeholder."}, true},
		{"json data", []string{`{"temperature": 21, `, `"unit": "C"}`}, true},
		{"footnote list", []string{"[1] First.\n", "[2] Second."}, true},
		{"code fence", []string{"Here:\n```go\nfmt.Println(\"name\")\n```"}, true},
		{"json fence that is data", []string{"Example:\n```json\n{\"name\": \"Ada\", \"age\": 36}\n```"}, true},
		{"call text without tools offered", []string{`{"name": "get_weather", "arguments": {"city": "Paris"}}`}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.fake.Push(testkit.Reply{TextChunks: tt.chunks})
			req := userSays("hi")
			if tt.tools {
				req.Tools = offered
			}
			resp, s := run(t, h, req)
			want := strings.Join(tt.chunks, "")
			if resp.Message.Content != want || len(resp.Message.ToolCalls) != 0 || resp.MalformedCall != "" {
				t.Errorf("resp = %+v, want the answer %q", resp, want)
			}
			if s.shown != want {
				t.Errorf("handed out %q, want %q", s.shown, want)
			}
		})
	}
}

// A model known to open <think> in its prompt (DeepSeek-R1's distills,
// QwQ) is held from its first answer: nothing is handed out to take back.
func TestReasoningHeldForKnownModels(t *testing.T) {
	const secret = "SECRET-CHAIN-OF-THOUGHT"
	h := newHarness(t, func(c *llm.Config) { c.Model = "DeepSeek-R1-Distill-Qwen-7B" })
	h.fake.Push(testkit.Reply{TextChunks: []string{"Okay, ", secret, "\n</think>\n\n", "Hello", " there!"}})
	resp, s := run(t, h, userSays("hi"))
	if resp.Message.Content != "Hello there!" || s.retracts != 0 || strings.Contains(s.everything(), secret) {
		t.Errorf("content = %q, handed out %q with %d retracts", resp.Message.Content, s.everything(), s.retracts)
	}
	if !s.thinking {
		t.Error("no Thinking delta while the reasoning was held")
	}
}

// The same model behind a server that separates its reasoning (Ollama,
// vLLM with a reasoning parser) never sends </think>: its answer streams.
func TestReasoningFieldReleasesTheHold(t *testing.T) {
	h := newHarness(t, func(c *llm.Config) { c.Model = "deepseek-r1:7b" })
	h.fake.Push(testkit.Reply{Reasoning: "hmm", ReasoningField: "reasoning", TextChunks: []string{"Hello", " there", "!"}})
	resp, s := run(t, h, userSays("hi"))
	if resp.Message.Content != "Hello there!" || !slices.Equal(s.fragments, []string{"Hello", " there", "!"}) {
		t.Errorf("content = %q, fragments %q; want the answer streamed as it came", resp.Message.Content, s.fragments)
	}
}
