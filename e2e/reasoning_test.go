package e2e

// Reasoning models and small models through `serve` (issue #32): a model
// that reasons in a <think> block, or in reasoning_content, has its answer
// previewed in a Telegram group and sent, while the chat sees of the
// reasoning only that it thinks ("thinking…"), never what; and a tool call
// it writes as bare JSON runs the tool instead of reaching the chat.
// Nothing of the reasoning is in the database or serve's log either.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
)

const (
	reasoningSecret = "PRIVATE-REASONING"
	reasonedAnswer  = "Sunlight scatters off air molecules, and blue light scatters the most, so the sky looks blue."
)

func TestTelegramReasoningNeverShown(t *testing.T) {
	parallelBusy(t)
	tg := tgfake.New(t, tgToken)
	var dbPath string
	s := startTelegramServe(t, tg, allowUsers(tgAlice), func(c *config.Config) { dbPath = c.Store.Path })
	const group int64 = -100323232

	// 1: a <think> block, reasoned for 3 s (20 words, 150 ms apart: the
	// thinking line shows after 2 s), then the answer written slowly.
	const q1 = "why is the sky blue?"
	thought := strings.Fields(strings.Repeat("Rayleigh scattering "+reasoningSecret+" ", 7))[:20]
	chunks := []string{"<think>\n"}
	for _, w := range thought {
		chunks = append(chunks, w+" ")
	}
	chunks = append(chunks, "\n</think>\n\n")
	for w := range strings.SplitAfterSeq(reasonedAnswer, " ") {
		chunks = append(chunks, w)
	}
	s.answer(q1, testkit.Reply{TextChunks: chunks, ChunkDelay: 150 * time.Millisecond})
	s.say(group, tgAlice, "alice", s.mention(q1), tgfake.InGroup("Sky"))
	first := waitFinalEdit(t, s, group, reasonedAnswer)

	// 2: reasoning_content, then a tool call written as bare JSON, which
	// runs; the answer after the tool result is sent.
	const q2 = "what time is it?"
	s.answer(q2,
		testkit.Reply{Reasoning: "The user wants the time. " + reasoningSecret, Text: `{"name": "current_time", "arguments": {}}`},
		testkit.Reply{Reasoning: "Got it. " + reasoningSecret, Text: "It is time for tea."})
	s.say(group, tgAlice, "alice", s.mention(q2), tgfake.InGroup("Sky"))
	sent := s.waitSent(t, group, 2)
	s.expect(group, 2)
	s.finish(t)

	if sent[0].MessageID != first || sent[1].Text != "It is time for tea." {
		t.Errorf("the group got %q; want the two answers", sentTexts(sent))
	}
	var shown []string
	for _, m := range tg.Sent() {
		shown = append(shown, m.Text)
	}
	for _, e := range tg.Edits() {
		shown = append(shown, e.Text)
	}
	for _, d := range tg.Drafts() {
		shown = append(shown, d.Text)
	}
	for _, text := range shown {
		if strings.Contains(text, reasoningSecret) || strings.Contains(text, "think>") || strings.Contains(text, "current_time") {
			t.Errorf("the chat showed %q", text)
		}
	}
	if !containsText(shown, "thinking…") {
		t.Errorf("the chat showed %q; want the thinking line while the model reasoned for 3 s", shown)
	}
	if strings.Contains(s.stderr.String(), reasoningSecret) {
		t.Errorf("serve's log holds the reasoning")
	}
	// The database (with its WAL) holds the answers and the tool's run,
	// never the reasoning.
	var db []byte
	files, _ := filepath.Glob(dbPath + "*")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		db = append(db, b...)
	}
	if !strings.Contains(string(db), reasonedAnswer) || !strings.Contains(string(db), "It is time for tea.") {
		t.Errorf("the database (%v) lacks the answers", files)
	}
	if strings.Contains(string(db), reasoningSecret) {
		t.Errorf("the database (%v) holds the reasoning", files)
	}
}

// waitFinalEdit waits until the group's preview message was edited into
// (or sent as) answer, and returns that message's id.
func waitFinalEdit(t *testing.T, s *telegramServe, group int64, answer string) int {
	t.Helper()
	ctx := s.ctx(t)
	for edits := s.tg.Edits(); ; {
		for _, m := range sentTo(s.tg.Sent(), group) {
			if m.Text == answer {
				return m.MessageID
			}
		}
		if n := len(edits); n > 0 && edits[n-1].ChatID == group && edits[n-1].Text == answer {
			return edits[n-1].MessageID
		}
		var err error
		if edits, err = s.tg.WaitEdits(ctx, len(edits)+1); err != nil {
			t.Fatalf("the answer never came: %v; sent %q, edits %q\nstderr:\n%s",
				err, sentTexts(sentTo(s.tg.Sent(), group)), sentTexts(s.tg.Edits()), s.stderr.String())
		}
	}
}

func containsText(texts []string, want string) bool {
	for _, s := range texts {
		if s == want {
			return true
		}
	}
	return false
}
