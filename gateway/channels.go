package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/discord"
	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/tools"
)

// ownAPIHost is the outbound guard's allowance for a channel's configured
// API base: its host and port exactly when it is not the platform's own
// (a fake on loopback in tests, a local Bot API server), else none.
func ownAPIHost(base, platform string) []string {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || base == platform {
		return nil
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return []string{net.JoinHostPort(u.Hostname(), port)}
}

// inboxReader is what a channel's catch-up reads from the store.
type inboxReader interface {
	LatestInbound(ctx context.Context, channel string) (map[string]string, error)
}

// roleHolder claims one of several roles among replicas (cluster.Replica).
type roleHolder interface {
	HoldAny(ctx context.Context, roles []string) (int, error)
}

// channelSpecs describes the chat adapters enabled in the configuration.
// Access rules come from each channel's allowlists (empty admits nobody).
// Nothing is contacted here: the supervisor builds and runs each channel,
// and retries one that fails while the others serve. Discord catches up
// from inbox on each new gateway session.
//
// roles is the replica when replicas share the store (nil otherwise):
// Telegram long polling waits for the poller role, and a Discord gateway
// split into shards without a configured shard_id claims a free one.
//
// onPaced (nil: none) counts the calls an adapter's outbound pacing held
// back, for the metrics.
func channelSpecs(cfg *config.Config, log *slog.Logger, inbox inboxReader, roles roleHolder, onPaced func(channel, outcome string)) []channelSpec {
	var out []channelSpec
	if tg := cfg.Channels.Telegram; tg.Enabled {
		o := telegram.Options{Token: tg.Token, APIEndpoint: tg.APIEndpoint, PollTimeout: tg.PollTimeout,
			Logger: log}
		if onPaced != nil {
			o.OnPaced = func(outcome string) { onPaced("telegram", outcome) }
		}
		if !tg.Pacing {
			o.Pacing = &telegram.NoPacing
		}
		if tg.Webhook.URL != "" {
			o.Webhook = &telegram.WebhookOptions{URL: tg.Webhook.URL, Listen: tg.Webhook.Listen, SecretToken: tg.Webhook.SecretToken}
		}
		spec := channelSpec{name: "telegram", access: channelAccess(cfg, "telegram"),
			build: func(ctx context.Context) (channels.Channel, error) {
				a, err := telegram.New(ctx, o)
				if err != nil {
					return nil, fmt.Errorf("telegram: %w", err)
				}
				return a, nil
			}}
		if o.Webhook == nil && roles != nil {
			// getUpdates allows one poller per bot; a webhook is served by
			// every replica.
			spec.gate = func(ctx context.Context) error {
				_, err := roles.HoldAny(ctx, []string{roleTelegramPoller})
				return err
			}
		}
		out = append(out, spec)
	}
	if dc := cfg.Channels.Discord; dc.Enabled {
		o := discord.Options{Token: dc.Token, APIBase: dc.APIBase, GatewayURL: dc.GatewayURL, Logger: log,
			LastSeen: func(ctx context.Context) (map[string]string, error) {
				return inbox.LatestInbound(ctx, "discord")
			},
			ShardCount: dc.ShardCount, ShardID: dc.ShardID,
			// Attachments through web_fetch's outbound guard; a configured
			// api_base other than Discord's (a fake) is the one exception.
			DownloadTransport: tools.GuardedTransport(ownAPIHost(dc.APIBase, discord.DefaultAPIBase), nil, nil),
		}
		if dc.ShardCount > 1 && dc.ShardID == nil && roles != nil {
			names := make([]string, dc.ShardCount)
			for i := range names {
				names[i] = fmt.Sprintf("discord-shard-%d", i)
			}
			// Held until the replica stops or dies; then another claims it.
			o.ClaimShard = func(ctx context.Context) (discord.ShardClaim, error) {
				i, err := roles.HoldAny(ctx, names)
				return discord.ShardClaim{ID: i}, err
			}
		}
		out = append(out, channelSpec{name: "discord", access: channelAccess(cfg, "discord"),
			build: func(context.Context) (channels.Channel, error) {
				a, err := discord.New(o)
				if err != nil {
					return nil, fmt.Errorf("discord: %w", err)
				}
				return a, nil
			}})
	}
	return out
}

// channelAccess is a chat channel's admission rule from its allowlists.
func channelAccess(cfg *config.Config, name string) router.Access {
	switch name {
	case "telegram":
		tg := cfg.Channels.Telegram
		return router.Access{Users: tg.AllowUsers, Pairing: tg.Pairing, Admins: tg.Admins}
	case "discord":
		dc := cfg.Channels.Discord
		return router.Access{Users: dc.AllowUsers, Spaces: dc.AllowGuilds, Chats: dc.AllowChannels, Admins: dc.Admins}
	}
	return router.Access{}
}
