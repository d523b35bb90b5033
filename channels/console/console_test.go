package console

import (
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// The terminal shows a reply as the model writes it and ends that line when
// the reply is sent, without printing it again; what was shown but not sent
// is marked so; tool lines start on a line of their own.
func TestRepliesStreamAsWritten(t *testing.T) {
	type step struct {
		ev   *agent.Event
		send string // or a send of this text
		want string // the whole output after the step
	}
	delta := func(id, text string) *agent.Event {
		return &agent.Event{Kind: agent.EventReplyDelta, CallID: id, Tool: "send_message", Text: text}
	}
	text := func(s string) *agent.Event { return &agent.Event{Kind: agent.EventTextDelta, Text: s} }
	tests := []struct {
		name  string
		color bool
		whole bool // stream_preview: false
		steps []step
	}{
		{"a send_message call, shown as it streams", false, false, []step{
			{ev: delta("c1", "Hel"), want: "\rbot> Hel"},
			{ev: delta("c1", "lo\nthere"), want: "\rbot> Hello\nthere"},
			{send: "Hello\nthere", want: "\rbot> Hello\nthere\n"},
			{ev: &agent.Event{Kind: agent.EventToolEnd, Tool: "send_message", CallID: "c1", Args: "{}"},
				want: "\rbot> Hello\nthere\n\r  · send_message({}) → ok (0s)\n"},
			{ev: &agent.Event{Kind: agent.EventDone}, want: "\rbot> Hello\nthere\n\r  · send_message({}) → ok (0s)\n"},
		}},
		{"a refused call, then another text", false, false, []step{
			{ev: delta("c1", " Oops"), want: "\rbot> Oops"},
			{ev: &agent.Event{Kind: agent.EventToolEnd, Tool: "send_message", CallID: "c1", IsError: true, Result: "error: bad", Args: "{}"},
				want: "\rbot> Oops (not sent)\n\r  · send_message({}) → error: error: bad (0s)\n"},
			{ev: delta("c1", " late"), want: "\rbot> Oops (not sent)\n\r  · send_message({}) → error: error: bad (0s)\n"},
			{send: "Fixed.", want: "\rbot> Oops (not sent)\n\r  · send_message({}) → error: error: bad (0s)\n\rbot> Fixed.\n"},
		}},
		{"two calls streamed alongside: the second printed when sent", false, false, []step{
			{ev: delta("a", "One"), want: "\rbot> One"},
			{ev: delta("b", "Two"), want: "\rbot> One"},
			{send: "One", want: "\rbot> One\n"},
			{send: "Two", want: "\rbot> One\n\rbot> Two\n"},
		}},
		{"plain text is not streamed to a pipe", false, false, []step{
			{ev: text("Just text."), want: ""},
			{send: "Just text.", want: "\rbot> Just text.\n"},
		}},
		{"plain text on a terminal, then sent", true, false, []step{
			{ev: text("Just "), want: "\r\x1b[1;36mbot>\x1b[0m Just "},
			{ev: text("text."), want: "\r\x1b[1;36mbot>\x1b[0m Just text."},
			{send: "Just text.", want: "\r\x1b[1;36mbot>\x1b[0m Just text.\n\x1b[1myou>\x1b[0m "},
		}},
		{"interim text on a terminal, then a call", true, false, []step{
			{ev: text("Let me look."), want: "\r\x1b[1;36mbot>\x1b[0m Let me look."},
			{ev: delta("c", "Found"), want: "\r\x1b[1;36mbot>\x1b[0m Let me look.\x1b[2m (not sent)\x1b[0m\n\r\x1b[1;36mbot>\x1b[0m Found"},
			{send: "Found", want: "\r\x1b[1;36mbot>\x1b[0m Let me look.\x1b[2m (not sent)\x1b[0m\n\r\x1b[1;36mbot>\x1b[0m Found\n\x1b[1myou>\x1b[0m "},
		}},
		{"streaming off: the reply printed whole when sent", true, true, []step{
			{ev: delta("c1", "Hel"), want: ""},
			{ev: text("Hel"), want: ""},
			{send: "Hello", want: "\r\x1b[1;36mbot>\x1b[0m Hello\n\x1b[1myou>\x1b[0m "},
		}},
		{"text after the reply is marked at the end", true, false, []step{
			{ev: text("Done."), want: "\r\x1b[1;36mbot>\x1b[0m Done."},
			{ev: &agent.Event{Kind: agent.EventDone, StopReason: agent.StopEndTurn}, want: "\r\x1b[1;36mbot>\x1b[0m Done.\x1b[2m (not sent)\x1b[0m\n"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out testkit.SyncBuffer
			a := New(Options{Out: &out, Color: tt.color, Whole: tt.whole})
			for i, s := range tt.steps {
				if s.ev != nil {
					a.TurnEvent(channels.Inbound{Channel: "console", ChatID: ChatID}, *s.ev)
				} else if _, err := a.Send(t.Context(), channels.Outbound{ChatID: ChatID, Text: s.send}); err != nil {
					t.Fatal(err)
				}
				if got := out.String(); got != s.want {
					t.Fatalf("after step %d:\n got %q\nwant %q", i, got, s.want)
				}
			}
			if n := strings.Count(out.String(), "bot>"); n > len(tt.steps) {
				t.Errorf("%d bot lines", n)
			}
		})
	}
}

// A turn that failed because the model server did not answer says so in
// one line, with the cause, and the prompt comes back after it (the
// reply's prompt was printed before the line).
func TestModelDownSaysWhyAndPromptsAgain(t *testing.T) {
	var out testkit.SyncBuffer
	a := New(Options{Out: &out, Color: true})
	in := channels.Inbound{Channel: "console", ChatID: ChatID}
	if _, err := a.Send(t.Context(), channels.Outbound{ChatID: ChatID, Text: "Sorry, I couldn't reach the language model just now."}); err != nil {
		t.Fatal(err)
	}
	a.TurnEvent(in, agent.Event{Kind: agent.EventDone, StopReason: agent.StopLLMError,
		Err: `llm: model m: Post "http://127.0.0.1:9/v1/chat/completions": dial tcp 127.0.0.1:9: connect: connection refused`})
	got := out.String()
	if !strings.Contains(got, "error: the model server did not answer (connection refused); `switchboard doctor` checks it") {
		t.Errorf("the terminal does not say what is wrong:\n%q", got)
	}
	if !strings.HasSuffix(got, "\x1b[0m\n\x1b[1myou>\x1b[0m ") {
		t.Errorf("no prompt after the error line:\n%q", got)
	}
}
