package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/discord"
	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/discordfake"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
)

// roleRecorder is a replica that grants the roles it is asked for: the
// index grant of the list, recording each list.
type roleRecorder struct {
	mu    sync.Mutex
	asked [][]string
	grant int
}

func (r *roleRecorder) HoldAny(_ context.Context, roles []string) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, slices.Clone(roles))
	return r.grant, nil
}

// Among replicas, Telegram long polling waits for the poller role (a
// webhook does not), and a Discord gateway split into shards without a
// shard_id identifies with the shard the replica claimed.
func TestChannelSpecsAmongReplicas(t *testing.T) {
	f := discordfake.New(t)
	cfg := config.Default()
	tg := config.Section[*telegram.Config](cfg)
	tg.Enabled = true
	tg.Token = "123:wire"
	*config.Section[*discord.Config](cfg) = discord.Config{Common: channels.Common{Enabled: true}, Token: f.Token, APIBase: f.APIBase(), GatewayURL: f.GatewayURL(), ShardCount: 2}
	roles := &roleRecorder{grant: 1}
	log := slog.New(slog.DiscardHandler)

	specs := channelSpecs(cfg, log, noInbox{}, roles, nil, nil)
	byName := map[string]channelSpec{}
	for _, s := range specs {
		byName[s.name] = s
	}
	if byName["telegram"].gate == nil {
		t.Fatal("long polling among replicas is not gated by the poller role")
	}
	if err := byName["telegram"].gate(t.Context()); err != nil {
		t.Fatal(err)
	}
	ch, err := byName["discord"].build(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- ch.Run(ctx, channels.SinkFunc(func(context.Context, channels.Inbound) error { return nil }))
	}()
	wctx, wcancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer wcancel()
	id, err := f.WaitIdentify(wctx, 1)
	cancel()
	if runErr := <-done; runErr != nil {
		t.Errorf("Run: %v", runErr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if id.Shard == nil || *id.Shard != [2]int{1, 2} {
		t.Errorf("IDENTIFY shard = %v; want the claimed [1 2]", id.Shard)
	}
	roles.mu.Lock()
	want := [][]string{{"telegram-poller"}, {"discord-shard-0", "discord-shard-1"}}
	if !slices.EqualFunc(roles.asked, want, slices.Equal) {
		t.Errorf("roles asked %v; want %v", roles.asked, want)
	}
	roles.mu.Unlock()

	// A webhook is served by every replica; one process alone has no roles.
	tg.Webhook.URL = "https://bot.example.com/hook"
	for _, s := range channelSpecs(cfg, log, noInbox{}, roles, nil, nil) {
		if s.name == "telegram" && s.gate != nil {
			t.Error("a webhook is gated by the poller role")
		}
	}
	tg.Webhook.URL = ""
	for _, s := range channelSpecs(cfg, log, noInbox{}, nil, nil, nil) {
		if s.gate != nil {
			t.Errorf("%s is gated without replicas", s.name)
		}
	}
}

type noInbox struct{}

func (noInbox) LatestInbound(context.Context, string) (map[string]string, error) { return nil, nil }
func (noInbox) SetDeliveryStatus(context.Context, string, string, string, string, time.Time) (bool, error) {
	return false, nil
}
func (noInbox) LatestInboundAt(context.Context, string, string) (time.Time, error) {
	return time.Time{}, nil
}

// channels.telegram.pacing: on (the default), quick replies to one chat
// wait for Telegram's limit of one a second; off (a Bot API server
// without limits), they go at once.
func TestTelegramPacingSetting(t *testing.T) {
	for _, pacing := range []bool{true, false} {
		f := tgfake.New(t, "123:pace")
		f.SetLimits(tgfake.NoLimits)
		cfg := config.Default()
		tg := config.Section[*telegram.Config](cfg)
		tg.Enabled, tg.Token, tg.APIEndpoint, tg.Pacing = true, "123:pace", f.URL, pacing
		var waited int
		onPaced := func(_, outcome string) {
			if outcome == "waited" {
				waited++
			}
		}
		var ch channels.Channel
		for _, s := range channelSpecs(cfg, slog.New(slog.DiscardHandler), noInbox{}, nil, onPaced, nil) {
			if s.name == "telegram" {
				var err error
				if ch, err = s.build(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
		}
		for i := range 3 { // the chat's burst is 2: the third waits
			if _, err := ch.Send(t.Context(), channels.Outbound{ChatID: "42", Text: fmt.Sprint("reply ", i)}); err != nil {
				t.Fatal(err)
			}
		}
		if got := waited > 0; got != pacing {
			t.Errorf("pacing %v: %d replies waited", pacing, waited)
		}
	}
}
