package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/gateway"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
)

// Pairing closes the loop, as an operator lives it: a stranger writes and
// gets a code; `switchboard pairing approve CODE`, a separate process
// while serve runs, admits them, and the bot greets them in their chat;
// they are answered; once revoked, their next message is refused (a new
// code, no answer from the model).
func TestPairingClosesTheLoop(t *testing.T) {
	initEnv(t)
	model := testkit.NewFakeLLM(t)
	model.SetDefault(&testkit.Reply{Text: "hello from the model"})
	tg := tgfake.New(t, initTgToken)
	cfgPath := storeConfig(t, filepath.Join(t.TempDir(), "switchboard.db"), func(c *config.Config) {
		c.LLM.BaseURL, c.LLM.Model = model.URL, "fake-model"
		c.HTTP.Listen = ""
		c.Learning.Enabled = false
		tc := config.Section[*telegram.Config](c)
		tc.Enabled, tc.Token, tc.APIEndpoint, tc.Pairing = true, initTgToken, tg.URL, true
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var serveLog testkit.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", cfgPath}, strings.NewReader(""), &bytes.Buffer{}, &serveLog)
	}()
	defer func() {
		cancel()
		<-done
	}()
	wait := func(n int) tgfake.SentMessage {
		t.Helper()
		wctx, wcancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer wcancel()
		sent, err := tg.WaitSent(wctx, n)
		if err != nil {
			t.Fatalf("message %d never came (%v); sent %+v\nserve's log:\n%s", n, err, sent, serveLog.String())
		}
		return sent[n-1]
	}
	admin := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(t.Context(), append([]string{"--config", cfgPath}, args...), strings.NewReader(""), &out, &errb); code != ExitOK {
			t.Fatalf("switchboard %v: exit %d\n%s%s", args, code, out.String(), errb.String())
		}
		return out.String()
	}

	tg.PushText(7007, 7007, "ada", "hi")
	m := wait(1)
	code := regexp.MustCompile(`pairing code is ([A-Z0-9]{8})`).FindStringSubmatch(m.Text)
	if code == nil || m.ChatID != 7007 {
		t.Fatalf("the stranger got %+v; want a pairing code in their chat", m)
	}
	admin("pairing", "approve", code[1])
	if m := wait(2); m.ChatID != 7007 || m.Text != gateway.PairingGreeting {
		t.Fatalf("after the approval the user got %+v; want the greeting %q", m, gateway.PairingGreeting)
	}
	tg.PushText(7007, 7007, "ada", "hello")
	if m := wait(3); m.Text != "hello from the model" {
		t.Fatalf("the approved user got %q; want the model's answer", m.Text)
	}
	if out := admin("pairing", "revoke", "telegram", "7007"); !strings.Contains(out, "revoked telegram user 7007") {
		t.Fatalf("revoke said %q", out)
	}
	calls := model.Calls()
	tg.PushText(7007, 7007, "ada", "still there?")
	if m := wait(4); !strings.Contains(m.Text, "pairing code is") || model.Calls() != calls {
		t.Fatalf("the revoked user got %q (model calls %d → %d); want a refusal with a new code and no model call", m.Text, calls, model.Calls())
	}
}
