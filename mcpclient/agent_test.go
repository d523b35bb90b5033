package mcpclient

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// TestThroughTheAgentLoop runs a real turn: the real loop, store and llm
// client against the scripted model server, with the stdio server's tools as
// a source. The model calls echo twice in one step, once with arguments
// the compiled schema rejects, and fail, whose error text is the server's.
func TestThroughTheAgentLoop(t *testing.T) {
	m := mustConnect(t, nil, options{}, stdioServer(t, "echo-srv"))

	fake := testkit.NewFakeLLM(t)
	fake.Push(
		testkit.Reply{ToolCalls: []llm.ToolCall{
			testkit.Call("c1", "echo-srv__echo", `{"text":"hi"}`),
			testkit.Call("c2", "echo-srv__echo", `{"text":5}`),
			testkit.Call("c3", "echo-srv__fail", `{}`),
		}},
		testkit.Reply{Text: "done"},
	)
	model, err := llm.New(llm.Config{BaseURL: fake.URL, APIKey: "sk-test", Model: "fake-model"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "sb.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a, err := agent.New(agent.Config{Model: model, Store: st, Sources: []agent.Source{m.Source()}})
	if err != nil {
		t.Fatal(err)
	}
	chat, err := st.EnsureChat(t.Context(), "test", "chat-1", "dm", "")
	if err != nil {
		t.Fatal(err)
	}
	sess, err := st.CurrentSession(t.Context(), chat.ID)
	if err != nil {
		t.Fatal(err)
	}

	res := a.Run(t.Context(), agent.Turn{ChatID: chat.ID, SessionID: sess.ID, Channel: "test", ChatType: "dm",
		UserID: "u1", Input: llm.Message{Role: llm.RoleUser, Content: "say hi"}})
	if res.Err != nil || res.StopReason != agent.StopEndTurn {
		t.Fatalf("turn: stop %s, err %v", res.StopReason, res.Err)
	}

	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests = %d, want 2", len(reqs))
	}
	var names []string
	for _, spec := range reqs[0].Tools {
		names = append(names, spec.Name)
		if spec.Name == "echo-srv__echo" && !strings.HasPrefix(spec.Description, "[echo-srv] ") {
			t.Errorf("echo description = %q", spec.Description)
		}
	}
	if !slices.Contains(names, "echo-srv__echo") {
		t.Errorf("tools sent to the model = %v, want echo-srv__echo", names)
	}

	results := map[string]string{}
	for _, msg := range reqs[1].Messages {
		if msg.Role == llm.RoleTool {
			results[msg.ToolCallID] = msg.Content
		}
	}
	// An MCP server's output is outside text: labelled as data.
	if want := agent.UntrustedLabel("echo-srv__echo") + "\nhi"; results["c1"] != want {
		t.Errorf("second request carries echo result %q, want %q (all tool messages: %v)", results["c1"], want, results)
	}
	if !strings.Contains(results["c2"], "do not match its schema") {
		t.Errorf("bad arguments result = %q, want the loop's schema error", results["c2"])
	}
	// So is its error text.
	if want := "error: " + agent.UntrustedLabel("echo-srv__fail") + "\nit broke on purpose"; results["c3"] != want {
		t.Errorf("fail result = %q, want %q", results["c3"], want)
	}
}
