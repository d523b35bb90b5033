package gateway

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
	"github.com/switchboard-gateway/switchboard/store"
)

// With Options.EarlyChannels (serve sets it), Telegram's getMe and first
// long poll go out while the store still opens, and a message that waited
// at Telegram through the start is answered once, after the router has
// started. Without it (a terminal chat), nothing reaches Telegram before
// Serve.
func TestChannelsConnectWhileTheStoreOpens(t *testing.T) {
	for _, early := range []bool{true, false} {
		t.Run(map[bool]string{true: "serve", false: "without"}[early], func(t *testing.T) {
			const token = "7300000002:AAF-early-Secret_0123456789abcdef"
			tg := tgfake.New(t, token)
			tg.SetLimits(tgfake.NoLimits)
			model := testkit.NewFakeLLM(t)
			dir := t.TempDir()
			cfg := config.Default()
			cfg.LLM.BaseURL, cfg.LLM.APIKey, cfg.LLM.Model = model.URL, "sk-test-0123456789", "fake-model"
			cfg.Store.Path, cfg.Skills.Dir, cfg.Learning.Enabled = filepath.Join(dir, "switchboard.db"), filepath.Join(dir, "skills"), false
			sec := config.Section[*telegram.Config](cfg)
			sec.Enabled, sec.Token, sec.APIEndpoint, sec.PollTimeout, sec.AllowUsers = true, token, tg.URL, time.Second, []string{"42"}
			tg.PushText(42, 42, "ada", "hello while you start")

			// The store's Open waits here (an Option runs first thing in
			// Open) until Telegram has been asked getMe and polled, or,
			// without early channels, notes what Telegram saw before the
			// store opened.
			seen := map[string]int{}
			hold := store.Option(func(*store.Store) {
				if early { // getMe and the poll go out together, in either order
					ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
					defer cancel()
					for _, m := range []string{"getUpdates", "getMe"} {
						if err := tg.WaitCalls(ctx, m, 1); err != nil {
							t.Errorf("no %s while the store opens: %v", m, err)
						}
					}
				}
				for _, m := range []string{"getMe", "getUpdates"} {
					seen[m] = tg.Calls(m)
				}
			})
			log := &testkit.SyncBuffer{}
			g, err := Build(t.Context(), cfg, Options{EarlyChannels: early, Logger: slog.New(slog.NewTextHandler(log, nil)),
				StoreOptions: []store.Option{hold}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(g.Close)
			if want := map[bool]int{true: 1, false: 0}[early]; seen["getMe"] != want || seen["getUpdates"] != want {
				t.Errorf("before the store opened Telegram saw %v; want %d getMe and %d getUpdates", seen, want, want)
			}
			if early && len(tg.Sent()) != 0 {
				t.Errorf("sent %v before serving", tg.Sent())
			}

			model.Push(testkit.Reply{Text: "hello ada"})
			ctx, cancel := context.WithCancel(t.Context())
			served := make(chan error, 1)
			go func() { served <- g.Serve(ctx, nil) }()
			wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer wcancel()
			sent, err := tg.WaitSent(wctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if sent[0].ChatID != 42 || sent[0].Text != "hello ada" {
				t.Errorf("sent %+v; want the model's answer to chat 42", sent[0])
			}
			cancel()
			if err := <-served; err != nil {
				t.Errorf("Serve: %v", err)
			}
			if n := model.Calls(); n != 1 {
				t.Errorf("model calls = %d; want 1 (the waiting message, once)", n)
			}
			if strings.Contains(log.String(), token) {
				t.Error("the bot token shows in the log")
			}
		})
	}
}
