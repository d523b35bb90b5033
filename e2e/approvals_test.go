package e2e

// End-to-end tests of approvals through the real wiring: a skill defines a
// tool that requires approval; the model calls it; the chat shows buttons;
// a button press (Telegram inline keyboard callback, Discord message
// component) approves it, the tool runs and the turn completes.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/discord"
	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/discordfake"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
	"github.com/switchboard-gateway/switchboard/llm"
)

// approvalSkill defines cleanup: a prompt tool that needs the user's yes.
const approvalSkill = `name: housekeeping
description: Cleans up.
activation: always
instructions: Use cleanup when asked to clean up.
define_tools:
  - name: cleanup
    kind: prompt
    description: Clean something up.
    prompt: "Report cleaning {what}."
    requires_approval: true
    parameters: {type: object, properties: {what: {type: string}}, required: [what]}
`

// approvalConfig writes a config with the housekeeping skill; channel sets
// the channels.
func approvalConfig(t *testing.T, model *testkit.FakeLLM, channel func(*config.Channels)) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "skills"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "skills", "housekeeping.yaml"), []byte(approvalSkill), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := modelConfig(model.URL)
	cfg.Store.Path = filepath.Join(dir, "sb.db")
	cfg.Skills.Dir = filepath.Join(dir, "skills")
	cfg.Learning.Enabled = false
	cfg.HTTP.Listen = ""
	channel(&cfg.Channels)
	return cfgfile.Write(t, cfg)
}

// scriptCleanup: the model calls cleanup, the tool's sub-call reports, and
// the model then answers.
func scriptCleanup(s *modelScript, ask string) {
	s.answer(ask,
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c1", "cleanup", `{"what":"the tmp folder"}`)}},
		testkit.Reply{Text: "All clean now."})
	s.answer("Report cleaning the tmp folder.", testkit.Reply{Text: "Cleaned the tmp folder."})
}

func TestTelegramApprovalButton(t *testing.T) {
	tg := tgfake.New(t, tgToken)
	model := testkit.NewFakeLLM(t)
	script := newModelScript(model)
	cfg := approvalConfig(t, model, func(c *config.Channels) {
		tes := channels.SectionOf[*telegram.Config](c.Sections)
		tes.Enabled, tes.Token, tes.APIEndpoint = true, tgToken, tg.URL
		tes.PollTimeout, tes.AllowUsers = time.Second, []string{"501"}
	})
	serve := startServe(t, cfg, func(ctx context.Context) error { return tg.WaitCalls(ctx, "getUpdates", 1) })
	scriptCleanup(script, "clean up tmp please")
	tg.PushText(501, 501, "ada", "clean up tmp please")
	sent, err := tg.WaitSent(waitCtx(t), 1)
	if err != nil {
		t.Fatalf("no question: %v\n%s", err, serve.stderr.String())
	}
	q := sent[0]
	buttons := q.Buttons()
	if !strings.Contains(q.Text, "cleanup") || len(buttons) != 1 || len(buttons[0]) != 2 || buttons[0][0].Text != "Approve" {
		t.Fatalf("question %q with buttons %+v", q.Text, buttons)
	}
	if n := script.requestsMentioning("Report cleaning"); n != 0 {
		t.Fatalf("the tool ran before approval (%d sub-calls)", n)
	}
	tg.PushCallback(501, 501, "ada", q.MessageID, buttons[0][0].CallbackData)
	sent, err = tg.WaitSent(waitCtx(t), 2)
	if err != nil {
		t.Fatalf("no answer after approval: %v\n%s", err, serve.stderr.String())
	}
	if sent[1].Text != "All clean now." {
		t.Fatalf("answer = %q", sent[1].Text)
	}
	// The press is answered once Deliver returned, which races with the
	// resumed turn's reply: wait for it.
	if err := tg.WaitCalls(waitCtx(t), "answerCallbackQuery", 1); err != nil || len(tg.CallbackAnswers()) != 1 {
		t.Fatalf("callback answers = %+v (%v)", tg.CallbackAnswers(), err)
	}
	// A second press of the same button is a no-op.
	tg.PushCallback(501, 501, "ada", q.MessageID, buttons[0][0].CallbackData)
	tg.PushText(501, 501, "ada", "thanks")
	script.answer("thanks", testkit.Reply{Text: "You're welcome."})
	sent, err = tg.WaitSent(waitCtx(t), 3)
	if err != nil || sent[2].Text != "You're welcome." {
		t.Fatalf("after a second press: %q %v", sentTexts(sent), err)
	}
	if code := serve.stop(t); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	if n := len(tg.Sent()); n != 3 {
		t.Fatalf("%d messages sent; want 3 (question, answer, thanks reply)", n)
	}
	script.checkAllAsked(t)
}

func TestDiscordApprovalButton(t *testing.T) {
	dc := discordfake.New(t)
	model := testkit.NewFakeLLM(t)
	script := newModelScript(model)
	cfg := approvalConfig(t, model, func(c *config.Channels) {
		dis := channels.SectionOf[*discord.Config](c.Sections)
		dis.Enabled, dis.Token, dis.APIBase, dis.GatewayURL = true, dc.Token, dc.APIBase(), dc.GatewayURL()
		dis.AllowUsers = []string{aliceID}
	})
	serve := startServe(t, cfg, func(ctx context.Context) error {
		return dc.WaitFor(ctx, func() bool { return dc.Identifies() >= 1 })
	})
	dm := dc.NewID()
	dc.AddChannel(dm, discordfake.ChannelTypeDM, "", "")
	scriptCleanup(script, "clean up tmp please")
	dc.Dispatch("MESSAGE_CREATE", dc.MessageCreate(dm, "", aliceID, "alice", "clean up tmp please"))
	if err := dc.WaitFor(waitCtx(t), func() bool { return len(dc.SentTo(dm)) >= 1 }); err != nil {
		t.Fatalf("no question: %v\n%s", err, serve.stderr.String())
	}
	q := dc.SentTo(dm)[0]
	rows := q.Buttons()
	if !strings.Contains(q.Content, "cleanup") || len(rows) != 1 || len(rows[0]) != 2 || rows[0][0].Label != "Approve" {
		t.Fatalf("question %q with buttons %+v", q.Content, rows)
	}
	dc.ClickButton(dm, "", aliceID, "alice", q.ID, rows[0][0].CustomID)
	if err := dc.WaitFor(waitCtx(t), func() bool { return len(dc.SentTo(dm)) >= 2 }); err != nil {
		t.Fatalf("no answer after approval: %v\n%s", err, serve.stderr.String())
	}
	if got := dc.SentTo(dm)[1].Content; got != "All clean now." {
		t.Fatalf("answer = %q", got)
	}
	// The press is answered once Deliver returned, which races with the
	// resumed turn's reply: wait for it.
	err := dc.WaitFor(waitCtx(t), func() bool { return len(dc.InteractionResponses()) >= 1 })
	if err != nil || len(dc.InteractionResponses()) != 1 {
		t.Fatalf("interaction responses = %+v (%v)", dc.InteractionResponses(), err)
	}
	if code := serve.stop(t); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	if n := len(dc.SentTo(dm)); n != 2 {
		t.Fatalf("%d messages; want 2", n)
	}
	script.checkAllAsked(t)
}
