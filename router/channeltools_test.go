package router

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/reply"
	"github.com/switchboard-gateway/switchboard/store"
)

// richChannel takes files and reactions.
type richChannel struct {
	*fakeChannel
	mu        sync.Mutex
	files     []channels.OutboundFile
	reactions []string
}

func (c *richChannel) SendFile(_ context.Context, _ string, f channels.OutboundFile) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.files = append(c.files, f)
	return "f1", nil
}

func (c *richChannel) React(_ context.Context, _, messageID, emoji string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reactions = append(c.reactions, messageID+" "+emoji)
	return nil
}

// Channel-context tools are offered where the chat allows them; files are
// confined to the workspace.
func TestChannelContextTools(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "report.txt"), []byte("r"), 0o644)
	outside := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(outside, []byte("s"), 0o644)
	os.Symlink(outside, filepath.Join(ws, "link.txt"))

	fake := testkit.NewFakeLLM(t)
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	model, _ := llm.New(llm.Config{BaseURL: fake.URL, Model: "fake-model", MaxRetries: -1})
	ag, _ := agent.New(agent.Config{Model: model, Store: st, Sources: []agent.Source{agent.ChannelContext()}})
	ch := &richChannel{fakeChannel: newFakeChannel()}
	// The per-turn sources (Prepare's: the delegate tool) come last.
	delegate := &agent.Tool{Name: "delegate", Parameters: json.RawMessage(`{"type":"object"}`),
		Fn: func(context.Context, json.RawMessage) (string, error) { return "", nil }}
	prepare := func(context.Context, channels.Inbound, int64) Prepared {
		return Prepared{Sources: []agent.Source{agent.StaticSource{SourceName: "delegate", List: []*agent.Tool{delegate}}}}
	}
	r, _ := New(Config{Store: st, Agent: ag, Replies: reply.Options{FilesRoot: ws}, NewTicker: func(time.Duration) Ticker { return stoppedTicker{} },
		Hooks: Hooks{Prepare: prepare}})
	r.AddChannel(ch, everyone)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(context.Background())

	fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{
		testkit.Call("1", "react", `{"emoji":"👍"}`),
		testkit.Call("2", "send_file", `{"file":"report.txt","caption":"here"}`),
		testkit.Call("3", "send_file", `{"file":"../secret.txt"}`),
		testkit.Call("4", "send_photo", `{"file":"link.txt"}`),
		testkit.Call("5", "send_photo", `{"file":"https://example.com/cat.png"}`),
	}}, testkit.Reply{Text: "done"})
	m := msg("c1", "u", "send me the report")
	if err := r.Deliver(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	if err := r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range fake.Requests()[0].Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "react,send_file,send_message,send_photo,delegate" {
		t.Fatalf("tools = %v", names)
	}
	if len(ch.reactions) != 1 || ch.reactions[0] != m.MessageID+" 👍" {
		t.Fatalf("reactions = %q", ch.reactions)
	}
	if len(ch.files) != 2 || filepath.Base(ch.files[0].Path) != "report.txt" || ch.files[0].Caption != "here" ||
		ch.files[1].URL != "https://example.com/cat.png" || !ch.files[1].Photo {
		t.Fatalf("files = %+v", ch.files)
	}
	results := fake.Requests()[1].Messages
	for _, want := range []string{"outside the workspace", "outside the workspace"} {
		found := false
		for _, m := range results {
			if m.Role == llm.RoleTool && (m.ToolCallID == "3" || m.ToolCallID == "4") && strings.Contains(m.Content, want) {
				found = true
			}
		}
		if !found {
			t.Fatalf("no refusal %q in %+v", want, results)
		}
	}
	// A file was delivered, so the fallback stays quiet: never both.
	if got := ch.Texts(); len(got) != 0 {
		t.Fatalf("text sent besides the files: %q", got)
	}

	// A channel without those capabilities offers only send_message.
	fake.Push(testkit.Reply{Text: "hi"})
	plain := newFakeChannel()
	r2, _ := New(Config{Store: st, Agent: ag, Replies: reply.Options{FilesRoot: ws}, NewTicker: func(time.Duration) Ticker { return stoppedTicker{} },
		Hooks: Hooks{Prepare: prepare}})
	r2.AddChannel(plain, everyone)
	r2.Start(t.Context())
	defer r2.Shutdown(context.Background())
	r2.Deliver(t.Context(), msg("c2", "u", "hello"))
	r2.Drain(t.Context())
	last := fake.Requests()[len(fake.Requests())-1]
	if len(last.Tools) != 2 || last.Tools[0].Name != "send_message" || last.Tools[1].Name != "delegate" {
		t.Fatalf("plain channel tools = %+v", last.Tools)
	}
}

// Voice messages are transcribed before the turn; a failure is a notice.
func TestVoiceTranscription(t *testing.T) {
	in := channels.Inbound{Channel: "fake", Text: "", Attachments: []channels.Attachment{
		{Kind: channels.Audio, Name: "v.ogg", Data: []byte("ogg")}}}
	r := &Router{log: slog.New(slog.DiscardHandler), cfg: Config{Transcribe: func(_ context.Context, name string, audio []byte) (string, error) {
		if name != "v.ogg" || string(audio) != "ogg" {
			t.Errorf("transcribe(%q, %q)", name, audio)
		}
		return "call mum at five", nil
	}}}
	got := toMessage(r.transcribe(t.Context(), in), false)
	if !strings.Contains(got.Content, "[voice message, transcribed]: call mum at five") {
		t.Fatalf("content = %q", got.Content)
	}
	if in.Attachments[0].Text != "" {
		t.Fatal("transcribe changed the caller's attachments")
	}
	r.cfg.Transcribe = func(context.Context, string, []byte) (string, error) { return "", context.DeadlineExceeded }
	got = toMessage(r.transcribe(t.Context(), in), false)
	if !strings.Contains(got.Content, "transcription failed") {
		t.Fatalf("content = %q", got.Content)
	}
}
