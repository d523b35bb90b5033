// Command fakellm serves a tiny OpenAI-compatible model on loopback for
// demos and benchmarks: it echoes the last user message, and calls the
// current_time tool when asked for the time. No network, no weights.
//
//	go run ./bench/fakellm -addr 127.0.0.1:9099
//	OPENAI_BASE_URL=http://127.0.0.1:9099/v1 OPENAI_MODEL=fake-model go run . chat
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"switchboard/internal/testkit"
	"switchboard/llm"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9099", "listen address (loopback)")
	flag.Parse()
	f := testkit.Start(*addr)
	defer f.Close()
	f.SetDefault(&testkit.Reply{Func: reply})
	fmt.Printf("fake model at %s (model name: fake-model); Ctrl-C stops\n", f.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	<-sig
}

// reply answers from the conversation: after a tool result, report it;
// asked for the time, call current_time; otherwise echo.
func reply(r testkit.Recorded) testkit.Reply {
	last := r.Messages[len(r.Messages)-1]
	switch {
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
