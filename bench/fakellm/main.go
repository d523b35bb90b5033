// Command fakellm serves a tiny OpenAI-compatible model on loopback for
// demos and benchmarks: it echoes the last user message, and calls the
// current_time tool when asked for the time. A request that must call a
// function (the learning jobs' extraction calls) gets a call with nothing
// in it: nothing is learned. No network, no weights.
//
//	go run ./bench/fakellm -addr 127.0.0.1:9099
//	OPENAI_BASE_URL=http://127.0.0.1:9099/v1 OPENAI_MODEL=fake-model go run . chat
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9099", "listen address (loopback)")
	flag.Parse()
	f := testkit.Start(*addr)
	defer f.Close()
	f.SetDefault(&testkit.Reply{Func: reply})
	f.DiscardRequests() // it may serve for hours
	fmt.Printf("fake model at %s (model name: fake-model); Ctrl-C stops\n", f.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	<-sig
}

// reply answers from the conversation: made to call a function, call it
// with empty arguments; after a tool result, report it; asked for the
// time, call current_time; otherwise echo.
func reply(r testkit.Recorded) testkit.Reply {
	last := r.Messages[len(r.Messages)-1]
	switch {
	case r.ForcedTool != "":
		return testkit.Reply{ToolCalls: []llm.ToolCall{{ID: "call_1", Name: r.ForcedTool, Arguments: emptyArguments(r.Tools, r.ForcedTool)}}}
	case last.Role == llm.RoleTool:
		return testkit.Reply{Text: "The tool said: " + last.Content}
	case strings.Contains(strings.ToLower(last.Content), "time"):
		for _, t := range r.Tools {
			if t.Name == "current_time" {
				return testkit.Reply{ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "current_time", Arguments: "{}"}}}
			}
		}
	}
	return testkit.Reply{Text: "You said: " + last.Content}
}

// emptyArguments are arguments for the named tool with each required
// property empty of its type (an empty list, string or object; zero;
// false), as its JSON schema describes it.
func emptyArguments(tools []llm.ToolSpec, name string) string {
	var schema struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	for _, t := range tools {
		if t.Name == name {
			_ = json.Unmarshal(t.Parameters, &schema) // a schema it cannot read gets {}
		}
	}
	args := map[string]any{}
	for _, p := range schema.Required {
		switch schema.Properties[p].Type {
		case "array":
			args[p] = []any{}
		case "object":
			args[p] = map[string]any{}
		case "integer", "number":
			args[p] = 0
		case "boolean":
			args[p] = false
		default:
			args[p] = ""
		}
	}
	b, _ := json.Marshal(args) // a map of plain values always encodes
	return string(b)
}
