package llm

import (
	"encoding/json"
	"strings"
	"testing"
)

// feedAll runs s through a think filter and a call hold in pieces of n
// bytes and returns the answer (content), the reasoning, and what was
// handed out (taken back on a retract).
func feedAll(s string, n int, hold bool) (content, reasoning, handed string) {
	f := newThinkFilter(hold)
	h := &callHold{on: true}
	var out strings.Builder
	for len(s) > 0 {
		k := min(n, len(s))
		text, retract := f.feed(s[:k])
		if retract {
			out.Reset()
			h = &callHold{on: true}
		}
		out.WriteString(h.feed(text))
		s = s[k:]
	}
	out.WriteString(h.feed(f.end()))
	out.WriteString(h.end())
	return f.visible.String(), f.reasoning.String(), out.String()
}

// However a stream splits its text, the answer and the reasoning are the
// same, and what is handed out adds up to the answer.
func FuzzThinkFilterSplits(f *testing.F) {
	for _, s := range []string{
		"<think>a</think>b", "a</think>b", "<think>unclosed", "  <think>x</think>\n\ny <think>z</think>w",
		"<thi", "</thin", `{"name":"x"}`, "text\n{\"a\":1}", "[TOOL_CALLS]", "<|python_tag|>", "```json\n{}\n```",
	} {
		f.Add(s, 1, false)
		f.Add(s, 3, true)
	}
	f.Fuzz(func(t *testing.T, s string, n int, hold bool) {
		if n <= 0 || n > 64 {
			n = 1 + (n%64+64)%64
		}
		c1, r1, h1 := feedAll(s, len(s)+1, hold)
		c2, r2, h2 := feedAll(s, n, hold)
		if c1 != c2 || r1 != r2 {
			t.Fatalf("split %d: content %q / %q, reasoning %q / %q", n, c1, c2, r1, r2)
		}
		if h1 != c1 || h2 != c2 {
			t.Fatalf("handed out %q and %q, content %q", h1, h2, c1)
		}
	})
}

// Recovered calls are to offered tools only, with JSON object arguments,
// and nothing panics on any text.
func FuzzRecoverCalls(f *testing.F) {
	for _, s := range []string{
		`{"name":"get_weather","arguments":{"city":"Paris"}}`, `<tool_call>{"name":"x","arguments":{}}</tool_call>`,
		`[TOOL_CALLS]get_weather[ARGS]{"a":1}`, "```tool_code\nget_weather(city='P', n=2, ok=True)\n```",
		`<|python_tag|>{"name":"get_weather","parameters":{}};{"name":"get_time","parameters":{}}`, "plain", "[1] a",
		`[{"name":"get_weather","arguments":"{\"a\":1}"}]`, "```\n(\n```", "print(get_weather(city=\"x\"))",
	} {
		f.Add(s)
	}
	tools := []ToolSpec{{Name: "get_weather"}, {Name: "get_time"}}
	f.Fuzz(func(t *testing.T, s string) {
		calls, _, malformed := recoverCalls(s, tools)
		if calls != nil && malformed != "" {
			t.Fatalf("both calls and malformed %q", malformed)
		}
		for _, c := range calls {
			if c.Name != "get_weather" && c.Name != "get_time" {
				t.Fatalf("call to %q, not offered", c.Name)
			}
			var obj map[string]json.RawMessage
			if err := json.Unmarshal([]byte(c.Arguments), &obj); err != nil || !strings.HasPrefix(c.Arguments, "{") {
				t.Fatalf("arguments %q are not an object: %v", c.Arguments, err)
			}
		}
	})
}

// The filters' cost on a streamed answer of about 4 KB in 4-byte
// fragments (a token each), with tools offered, against the bytes alone.
func BenchmarkStreamFilters(b *testing.B) {
	answer := strings.Repeat("The library opens at nine on weekdays and at ten on Saturdays.\n", 64)
	b.SetBytes(int64(len(answer)))
	b.ReportAllocs()
	for b.Loop() {
		c, _, _ := feedAll(answer, 4, false)
		if len(c) != len(answer) {
			b.Fatal(len(c))
		}
	}
}
