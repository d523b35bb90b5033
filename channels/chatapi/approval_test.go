package chatapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// deleteTool is a tool that needs approval and counts its runs.
func deleteTool(ran *atomic.Int32) *agent.Tool {
	return &agent.Tool{Name: "delete_file", Description: "Delete a file.", RequiresApproval: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`),
		Fn:         func(context.Context, json.RawMessage) (string, error) { ran.Add(1); return "deleted", nil }}
}

func scriptDelete(fake *testkit.FakeLLM, block <-chan struct{}) {
	fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c1", "delete_file", `{"path":"old.txt"}`)}, Block: block})
}

// approvalOf returns the switchboard_approval object of a response (or a
// streamed chunk), failing the test when it is not there as documented.
func approvalOf(t *testing.T, what string, resp map[string]any) map[string]any {
	t.Helper()
	q, ok := resp[ApprovalField].(map[string]any)
	if !ok {
		t.Fatalf("%s has no %s object: %v", what, ApprovalField, resp)
	}
	calls, _ := q["calls"].([]any)
	if id, _ := q["id"].(float64); id <= 0 || len(calls) != 1 {
		t.Fatalf("%s: %s = %v: want an id and one call", what, ApprovalField, q)
	}
	call := calls[0].(map[string]any)
	if call["tool"] != "delete_file" || !strings.Contains(call["arguments"].(string), "old.txt") ||
		!strings.Contains(q["question"].(string), "delete_file") {
		t.Fatalf("%s: %s = %v: want delete_file with its arguments and the question", what, ApprovalField, q)
	}
	return q
}

// A turn that pauses for approval answers its request with the question
// (content and structured field); the next request saying yes gets the
// resumed turn's reply, and the tool runs once.
func TestChatAPIApproval(t *testing.T) {
	var ran atomic.Int32
	s := newStack(t, testToken, stackExtras{tools: []*agent.Tool{deleteTool(&ran)}, approvals: true})

	scriptDelete(s.fake, nil)
	content, resp := s.chat("ada", "delete old.txt")
	q := approvalOf(t, "the paused request's response", resp)
	if !strings.Contains(content, "delete_file") || !strings.Contains(content, "old.txt") || content != q["question"] {
		t.Errorf("the paused request's content %q: want the question with the call and its arguments", content)
	}
	if ran.Load() != 0 {
		t.Fatal("the tool ran before approval")
	}

	// Another user's "yes" is an ordinary message in their own chat.
	s.fake.Push(testkit.Reply{Text: "Yes to what, bob?"})
	if got, resp := s.chat("bob", "yes"); got != "Yes to what, bob?" || resp[ApprovalField] != nil {
		t.Errorf("bob's yes: %q", got)
	}

	s.fake.Push(testkit.Reply{Text: "Deleted old.txt."})
	got, resp := s.chat("ada", "yes")
	if got != "Deleted old.txt." || resp[ApprovalField] != nil {
		t.Errorf("the answering request got %q (%v), want the resumed turn's reply", got, resp[ApprovalField])
	}
	if ran.Load() != 1 {
		t.Errorf("the tool ran %d times, want 1", ran.Load())
	}

	// The question is answered: another yes is an ordinary message.
	s.fake.Push(testkit.Reply{Text: "Anything else?"})
	if got, _ := s.chat("ada", "yes"); got != "Anything else?" || ran.Load() != 1 {
		t.Errorf("a second yes: %q, tool ran %d times", got, ran.Load())
	}
}

// The same, streamed: the question streams as the content, the final
// chunk carries the structured field, and the streamed yes gets the
// resumed turn's reply; "no" denies.
func TestChatAPIApprovalStreamed(t *testing.T) {
	var ran atomic.Int32
	s := newStack(t, testToken, stackExtras{tools: []*agent.Tool{deleteTool(&ran)}, approvals: true})

	for _, tt := range []struct {
		answer, reply string
		runs          int32
	}{{"yes", "Deleted old.txt.", 1}, {"No.", "All right, I left it.", 1}} {
		scriptDelete(s.fake, nil)
		events, done := s.streamChat("ada", "delete old.txt")
		if !done || len(events) < 2 {
			t.Fatalf("stream of the paused request: done %v, %d events", done, len(events))
		}
		var text strings.Builder
		var final map[string]any
		for _, ev := range events {
			if _, ok := ev[ApprovalField]; ok {
				final = ev
			}
			for _, ch := range ev["choices"].([]any) {
				if c, ok := ch.(map[string]any)["delta"].(map[string]any)["content"].(string); ok {
					text.WriteString(c)
				}
			}
		}
		if final == nil {
			t.Fatalf("no chunk carries %s: %v", ApprovalField, events)
		}
		q := approvalOf(t, "the final chunk", final)
		if text.String() != q["question"] {
			t.Errorf("streamed content %q, want the question %q", text.String(), q["question"])
		}
		if fr := final["choices"].([]any)[0].(map[string]any)["finish_reason"]; fr != "stop" {
			t.Errorf("the approval chunk's finish_reason %v, want stop", fr)
		}

		s.fake.Push(testkit.Reply{Text: tt.reply})
		events, done = s.streamChat("ada", tt.answer)
		var answer strings.Builder
		for _, ev := range events {
			for _, ch := range ev["choices"].([]any) {
				if c, ok := ch.(map[string]any)["delta"].(map[string]any)["content"].(string); ok {
					answer.WriteString(c)
				}
			}
		}
		if !done || answer.String() != tt.reply {
			t.Errorf("streamed %q: done %v, content %q, want %q", tt.answer, done, answer.String(), tt.reply)
		}
		if ran.Load() != tt.runs {
			t.Errorf("after %q the tool ran %d times, want %d", tt.answer, ran.Load(), tt.runs)
		}
	}
}

// signalHandler is a log handler that signals on ch[i] when a record's
// message holds texts[i].
type signalHandler struct {
	texts []string
	ch    []chan struct{}
}

func newSignalHandler(texts ...string) signalHandler {
	h := signalHandler{texts: texts}
	for range texts {
		h.ch = append(h.ch, make(chan struct{}, 1))
	}
	return h
}

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) Handle(_ context.Context, r slog.Record) error {
	for i, text := range h.texts {
		if strings.Contains(r.Message, text) {
			select {
			case h.ch[i] <- struct{}{}:
			default:
			}
		}
	}
	return nil
}
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalHandler) WithGroup(string) slog.Handler      { return h }

// A "yes" from a client that never got the question (its request went away
// before the turn paused) does not approve: it is an ordinary message,
// which supersedes the paused call.
func TestChatAPIApprovalNotDeliveredIsNotApproved(t *testing.T) {
	var ran atomic.Int32
	// The server saw the client go away; then the question found no
	// request waiting.
	sig := newSignalHandler("client went away", "for a request that is no longer waiting")
	wentAway, undelivered := sig.ch[0], sig.ch[1]
	s := newStack(t, testToken, stackExtras{tools: []*agent.Tool{deleteTool(&ran)}, approvals: true, log: slog.New(sig)})

	release := make(chan struct{})
	scriptDelete(s.fake, release)
	ctx, cancel := context.WithCancel(t.Context())
	body := `{"user":"ada","messages":[{"role":"user","content":"delete old.txt"}]}`
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	gone := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		gone <- err
	}()
	if err := s.fake.WaitCalls(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	cancel() // the client hangs up while the model works
	if err := <-gone; err == nil {
		t.Fatal("the cancelled request got an answer")
	}
	// Until the server notices the hang-up (its background read sees the
	// connection close), a question written to it counts as delivered, as
	// no server can tell better: wait for that before the turn pauses.
	<-wentAway
	close(release)
	select {
	case <-undelivered:
	case <-t.Context().Done():
		t.Fatal("the approval question was never asked")
	}

	s.fake.Push(testkit.Reply{Text: "Yes to what?"})
	// Bounded: a yes taken as the answer used to get no answer at all.
	yctx, cancelYes := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancelYes()
	req, _ = http.NewRequestWithContext(yctx, "POST", s.url+"/v1/chat/completions",
		strings.NewReader(`{"user":"ada","messages":[{"role":"user","content":"yes"}]}`))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the yes of a client that never got the question got no answer: %v (the tool ran %d times)", err, ran.Load())
	}
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Approval any `json:"switchboard_approval"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || len(out.Choices) != 1 || out.Choices[0].Message.Content != "Yes to what?" || out.Approval != nil {
		t.Errorf("the yes of a client that never got the question: %+v (%v), want an ordinary turn's reply", out, err)
	}
	if ran.Load() != 0 {
		t.Errorf("the tool ran %d times on a yes to a question nobody received", ran.Load())
	}
}

// A yes to a delivered question that meanwhile stopped waiting (expired
// here) is told so, and nothing runs.
func TestChatAPIApprovalStaleAnswer(t *testing.T) {
	var ran atomic.Int32
	s := newStack(t, testToken, stackExtras{tools: []*agent.Tool{deleteTool(&ran)}, approvals: true})
	scriptDelete(s.fake, nil)
	_, resp := s.chat("ada", "delete old.txt")
	id := int64(approvalOf(t, "the paused request's response", resp)["id"].(float64))
	if won, err := s.store.DecideApproval(t.Context(), id, "expired", "nobody approved it in time (expired)"); err != nil || !won {
		t.Fatalf("expire approval %d: %v %v", id, won, err)
	}
	got, resp := s.chat("ada", "yes")
	if !strings.Contains(got, "no longer waiting") || resp[ApprovalField] != nil {
		t.Errorf("a yes to an expired question: %q", got)
	}
	if ran.Load() != 0 {
		t.Errorf("the tool ran %d times on a yes to an expired question", ran.Load())
	}
}

// The official openai npm client sees the question and its field, and its
// streamed yes gets the resumed turn's reply.
func TestOpenAINodeClientApproval(t *testing.T) {
	var ran atomic.Int32
	s := newStack(t, testToken, stackExtras{tools: []*agent.Tool{deleteTool(&ran)}, approvals: true})
	scriptDelete(s.fake, nil)
	s.fake.Push(testkit.Reply{Text: "Deleted old.txt."})
	out := testkit.NodeScript(t, openaiClientDir, "approve.mjs", s.url+"/v1", testToken)
	var got struct {
		Question string
		Approval map[string]any
		Answer   string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	q := approvalOf(t, "the node client's response", map[string]any{ApprovalField: got.Approval})
	if got.Question != q["question"] || got.Answer != "Deleted old.txt." || ran.Load() != 1 {
		t.Errorf("node client: question %q, answer %q, tool ran %d times", got.Question, got.Answer, ran.Load())
	}
}
