package llm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// The encoder's body must mean what go-openai's encoding of the same
// request meant: the old mapping to go-openai's types (below, as it was
// before encode.go) is the oracle; both bodies are decoded and compared.
func TestEncodeMatchesGoOpenAI(t *testing.T) {
	one := 1
	_ = one
	tools := []ToolSpec{
		{Name: "send_message", Description: "Send a message <b>now</b> & \"quote\"", Parameters: json.RawMessage("{\n  \"type\": \"object\",\n  \"properties\": {\"text\": {\"type\": \"string\"}}\n}")},
		{Name: "current_time"},
	}
	reqs := map[string]Request{
		"plain": {Messages: []Message{{Role: RoleSystem, Content: "You are Switchboard.\n\tTabs, \"quotes\", \\ and \u2028 and \x01 and bad \xff utf8 é ✓"}, {Role: RoleUser, Content: "hi"}}},
		"tools": {Messages: []Message{
			{Role: RoleSystem, Content: "sys"},
			{Role: RoleUser, Content: "what time is it?", Name: "alice"},
			{Role: RoleAssistant, Content: "let me see", ToolCalls: []ToolCall{{ID: "c1", Name: "current_time", Arguments: ""}, {ID: "c2", Name: "send_message", Arguments: `{"text":"hi"}`}}},
			{Role: RoleTool, ToolCallID: "c1", Name: "current_time", Content: "12:00"},
			{Role: RoleTool, ToolCallID: "c2", Name: "send_message", Content: ""},
		}, Tools: tools, MaxTokens: 512},
		"forced": {Messages: []Message{{Role: RoleUser, Content: "extract"}}, Tools: tools, ForceTool: "send_message"},
		"images": {Messages: []Message{{Role: RoleUser, Content: "look", Images: []Image{{Data: []byte("\x89PNG\r\n\x1a\n0000")}, {URL: "https://example.com/a.jpg"}, {MIME: "image/jpeg", Data: []byte{1, 2}}}},
			{Role: RoleUser, Images: []Image{{URL: "https://example.com/b.jpg"}}}}},
		"no call id": {Messages: []Message{{Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "x", Arguments: "{}"}}}}},
	}
	enc := newEncoder()
	for name, req := range reqs {
		for _, opts := range []bool{true, false} {
			old, err := toChatRequest(req)
			if err != nil {
				t.Fatalf("%s: old mapping: %v", name, err)
			}
			old.Model, old.Stream = "m-1", true
			if opts {
				old.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
			}
			want, err := json.Marshal(old)
			if err != nil {
				t.Fatal(err)
			}
			for pass := range 2 { // the second from the caches
				b, err := enc.encode(req)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				got := b.bytes("m-1", wireOptions{streamOptions: opts})
				if !json.Valid(got) {
					t.Fatalf("%s: invalid JSON %s", name, got)
				}
				var g, w any
				_ = json.Unmarshal(got, &g)
				_ = json.Unmarshal(want, &w)
				if !reflect.DeepEqual(g, w) {
					t.Errorf("%s (pass %d, stream_options %v):\n got %s\nwant %s", name, pass, opts, got, want)
				}
			}
		}
	}
}

func TestEncodeErrors(t *testing.T) {
	tests := map[string]struct {
		req  Request
		want string
	}{
		"empty tool name":  {Request{Tools: []ToolSpec{{}}}, "tool with an empty name"},
		"bad schema":       {Request{Tools: []ToolSpec{{Name: "t", Parameters: json.RawMessage(`{"a":`)}}}, "tool t: parameters are not valid JSON"},
		"forced not there": {Request{Tools: []ToolSpec{{Name: "t"}}, ForceTool: "u"}, "forced tool u is not among the offered tools"},
		"image on system":  {Request{Messages: []Message{{Role: RoleSystem, Images: []Image{{URL: "x"}}}}}, "message 0 (system): images are only supported on user messages"},
		"empty image":      {Request{Messages: []Message{{Role: RoleUser, Images: []Image{{}}}}}, "message 0 (user): image 0 has neither data nor a URL"},
	}
	for name, tt := range tests {
		_, err := newEncoder().encode(tt.req)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: err %v, want %q", name, err, tt.want)
		}
	}
}

// A tool is encoded once per version: the same spec again comes from the
// cache; a changed description or schema (a skill reload, an MCP server's
// new version) is encoded anew, never served stale; the cache is bounded.
func TestEncodeToolCache(t *testing.T) {
	e := newEncoder()
	v1 := ToolSpec{Name: "t", Description: "one", Parameters: json.RawMessage(`{"type":"object"}`)}
	first, err := e.tool(v1)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := e.tool(ToolSpec{Name: "t", Description: "one", Parameters: json.RawMessage(`{"type":"object"}`)})
	if &again[0] != &first[0] {
		t.Error("the same spec was encoded again, not taken from the cache")
	}
	for _, changed := range []ToolSpec{
		{Name: "t", Description: "two", Parameters: v1.Parameters},
		{Name: "t", Description: "one", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
		{Name: "u", Description: "one", Parameters: v1.Parameters},
	} {
		got, err := e.tool(changed)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(got, first) || !bytes.Contains(got, []byte(`"name":"`+changed.Name+`"`)) ||
			!bytes.Contains(got, []byte(changed.Description)) || !bytes.Contains(got, changed.Parameters) {
			t.Errorf("changed spec %+v encoded as %s", changed, got)
		}
	}
	for i := range 3 * maxCachedTools {
		if _, err := e.tool(ToolSpec{Name: fmt.Sprint("tool_", i)}); err != nil {
			t.Fatal(err)
		}
		if n := len(e.tools); n > maxCachedTools {
			t.Fatalf("%d tools cached, want at most %d", n, maxCachedTools)
		}
	}
}

// The static prefix of the system prompt is learnt from two turns whose
// prompts share it and reused while it stays; a changed prefix (new skill
// catalogue) is encoded from scratch, and the cache is bounded.
func TestEncodeSystemPrefix(t *testing.T) {
	e := newEncoder()
	prefix := strings.Repeat("You are Switchboard. \"Rules\"\n", 20)
	sys := func(p, tail string) string {
		return string(e.appendSystem(nil, p+"\n\n"+tail))
	}
	check := func(p, tail string) {
		t.Helper()
		want, _ := json.Marshal(p + "\n\n" + tail)
		if got := `"` + sys(p, tail) + `"`; got != string(want) {
			t.Errorf("encoded %s, want %s", got, want)
		}
	}
	check(prefix, "time: 10:00 é")
	if len(e.prefixes) != 0 {
		t.Fatal("a prefix learnt from one prompt")
	}
	check(prefix, "time: 10:01 ✓")
	if len(e.prefixes) != 1 || !strings.HasPrefix(e.prefixes[0].raw, prefix) {
		t.Fatalf("prefixes %d, want the shared start learnt", len(e.prefixes))
	}
	check(prefix, "time: 11:00")
	if len(e.prefixes) != 1 {
		t.Errorf("%d prefixes after a third turn on the same prefix, want 1", len(e.prefixes))
	}
	other := strings.Replace(prefix, "Switchboard", "Otherbot", 1)
	check(other, "time: 11:00") // shares only a few bytes: no prefix
	check(other, "time: 11:01")
	if len(e.prefixes) != 2 {
		t.Errorf("%d prefixes, want 2 (one per static prompt)", len(e.prefixes))
	}
	for i := range 3 * maxCachedPrefixes {
		p := fmt.Sprintf("%03d", i) + prefix
		check(p, "a")
		check(p, "b")
	}
	if n := len(e.prefixes); n > maxCachedPrefixes {
		t.Errorf("%d prefixes cached, want at most %d", n, maxCachedPrefixes)
	}
}

// StepRequest (exported for the package's external benchmarks) is a step of a turn as the gateway makes it: a 4 KB system
// prompt, 20 tools with schemas of a few hundred bytes, and a history of
// turns of ~240-byte questions and ~800-byte answers.
func StepRequest(turns int) Request {
	var tools []ToolSpec
	for i := range 20 {
		params := fmt.Sprintf(`{"type":"object","properties":{"query_%d":{"type":"string","description":"What to look for, in the user's words; a few words are enough."},`+
			`"limit":{"type":"integer","minimum":1,"maximum":50,"description":"How many results at most (default 10)."},`+
			`"since":{"type":"string","format":"date-time","description":"Only what is newer than this instant."},`+
			`"tags":{"type":"array","items":{"type":"string"},"description":"Tags the results must carry."}},"required":["query_%d"],"additionalProperties":false}`, i, i)
		tools = append(tools, ToolSpec{Name: fmt.Sprint("tool_", i),
			Description: "Does one well-defined thing for the user and returns a short JSON result; call it when the user asks for that thing " + strings.Repeat("x", i),
			Parameters:  json.RawMessage(params)})
	}
	msgs := []Message{{Role: RoleSystem, Content: strings.Repeat("You are Switchboard, a helpful assistant in a chat. \"Quote\" <b>tags</b>\n", 56)}}
	for t := range turns {
		msgs = append(msgs, Message{Role: RoleUser, Content: fmt.Sprintf("(turn %d) %s?", t, strings.Repeat("word ", 46))},
			Message{Role: RoleAssistant, Content: fmt.Sprintf("Answer %d: %s.", t, strings.Repeat("answer ", 114))})
	}
	msgs = append(msgs, Message{Role: RoleUser, Content: "and now?"})
	return Request{Messages: msgs, Tools: tools, MaxTokens: 1024}
}

// BenchmarkEncodeRequest: the request body of a step (StepRequest: 20
// tools, a 4 KB system prompt, 20 turns of history), as go-openai encoded
// it from its types (the old mapping, then encoding/json) and as the
// encoder does from its caches.
func BenchmarkEncodeRequest(b *testing.B) {
	req := StepRequest(20)
	b.Run("go-openai", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r, err := toChatRequest(req)
			if err != nil {
				b.Fatal(err)
			}
			r.Model, r.Stream, r.StreamOptions = "m", true, &openai.StreamOptions{IncludeUsage: true}
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoder", func(b *testing.B) {
		e := newEncoder()
		b.ReportAllocs()
		for b.Loop() {
			body, err := e.encode(req)
			if err != nil {
				b.Fatal(err)
			}
			_ = body.bytes("m", wireOptions{streamOptions: true})
		}
	})
}

// --- the mapping to go-openai's types before encode.go: the oracle ---------

func toChatRequest(req Request) (openai.ChatCompletionRequest, error) {
	out := openai.ChatCompletionRequest{MaxTokens: req.MaxTokens}
	out.Messages = make([]openai.ChatCompletionMessage, 0, len(req.Messages))
	for i, m := range req.Messages {
		om, err := toChatMessage(m)
		if err != nil {
			return out, fmt.Errorf("message %d (%s): %w", i, m.Role, err)
		}
		out.Messages = append(out.Messages, om)
	}
	forced := false
	for _, t := range req.Tools {
		if t.Name == "" {
			return out, errors.New("tool with an empty name")
		}
		params := t.Parameters
		if len(params) == 0 {
			params = emptySchema
		} else if !json.Valid(params) {
			return out, fmt.Errorf("tool %s: parameters are not valid JSON", t.Name)
		}
		out.Tools = append(out.Tools, openai.Tool{
			Type: openai.ToolTypeFunction,
			Function: &openai.FunctionDefinition{
				Name: t.Name, Description: t.Description, Parameters: params,
			},
		})
		forced = forced || t.Name == req.ForceTool
	}
	if req.ForceTool != "" {
		if !forced {
			return out, fmt.Errorf("forced tool %s is not among the offered tools", req.ForceTool)
		}
		out.ToolChoice = openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: req.ForceTool}}
	}
	return out, nil
}

func toChatMessage(m Message) (openai.ChatCompletionMessage, error) {
	om := openai.ChatCompletionMessage{Role: string(m.Role), Content: m.Content}
	switch m.Role {
	case RoleTool:
		om.ToolCallID = m.ToolCallID // Name stays ours: the API identifies the call by id
	default:
		om.Name = m.Name
	}
	for _, tc := range m.ToolCalls {
		args := tc.Arguments
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		om.ToolCalls = append(om.ToolCalls, openai.ToolCall{
			ID: tc.ID, Type: openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: tc.Name, Arguments: args},
		})
	}
	if len(m.Images) == 0 {
		return om, nil
	}
	if m.Role != RoleUser {
		return om, errors.New("images are only supported on user messages")
	}
	om.Content = ""
	if m.Content != "" {
		om.MultiContent = append(om.MultiContent, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: m.Content})
	}
	for i, img := range m.Images {
		u := img.URL
		if len(img.Data) > 0 {
			mime := img.MIME
			if mime == "" {
				mime = http.DetectContentType(img.Data)
			}
			u = "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
		}
		if u == "" {
			return om, fmt.Errorf("image %d has neither data nor a URL", i)
		}
		om.MultiContent = append(om.MultiContent, openai.ChatMessagePart{
			Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: u},
		})
	}
	return om, nil
}
