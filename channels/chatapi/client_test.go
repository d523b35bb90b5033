package chatapi

// The chat API driven by the official openai npm package under Node.js.
// .ci/run installs it (npm ci in testdata/openai-client); elsewhere the test
// runs npm ci itself when node_modules is missing. Under CI=true a missing
// tool fails the test, elsewhere it skips it with a message saying what to
// install (testkit.Missing).

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// openaiClientDir is where the npm client is installed (node_modules is
// ignored by git).
const openaiClientDir = "testdata/openai-client"

func TestOpenAINodeClient(t *testing.T) {
	s := newStack(t, testToken)
	s.scriptToolTurn("It is tea time.")
	s.fake.Push(testkit.Reply{Text: "Streamed, at last.", Usage: &llm.Usage{PromptTokens: 40, CompletionTokens: 4, TotalTokens: 44}})

	out := testkit.NodeClient(t, openaiClientDir, s.url+"/v1", testToken)
	var got struct {
		Models []string
		Plain  struct {
			ID, Content, Role, Finish string
			Total                     int
		}
		Stream struct {
			Content, Finish string
			Total, Chunks   int
		}
		WrongKey any
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	if len(got.Models) != 1 || got.Models[0] != "switchboard" {
		t.Errorf("models = %v", got.Models)
	}
	if got.Plain.Content != "It is tea time." || got.Plain.Role != "assistant" || got.Plain.Finish != "stop" ||
		got.Plain.Total != 290 || !strings.HasPrefix(got.Plain.ID, "chatcmpl-") {
		t.Errorf("non-streaming = %+v", got.Plain)
	}
	if got.Stream.Content != "Streamed, at last." || got.Stream.Finish != "stop" || got.Stream.Total != 44 || got.Stream.Chunks < 3 {
		t.Errorf("streaming = %+v", got.Stream)
	}
	if got.WrongKey != float64(401) {
		t.Errorf("a wrong key gave %v, want status 401", got.WrongKey)
	}
	// Both requests were one session: the streamed turn saw the first.
	reqs := s.fake.Requests()
	last := reqs[len(reqs)-1].Messages
	if !historyHas(last, "What time is it?") || !historyHas(last, "And now, streamed?") {
		t.Errorf("the streamed turn's request lacks the session history: %+v", last)
	}
}
