package main

import (
	"context"
	"fmt"
	"log/slog"

	"switchboard/channels/discord"
	"switchboard/channels/telegram"
	"switchboard/config"
	"switchboard/router"
)

// enabledChannels constructs the adapters enabled in the configuration.
// Access rules come from each channel's allowlists (empty admits nobody).
// A channel that cannot start is reported and left out; the others run.
func enabledChannels(ctx context.Context, cfg *config.Config, log *slog.Logger) ([]channelEntry, []error) {
	var out []channelEntry
	var errs []error
	if tg := cfg.Channels.Telegram; tg.Enabled {
		o := telegram.Options{Token: tg.Token, APIEndpoint: tg.APIEndpoint, PollTimeout: tg.PollTimeout,
			Logger: log}
		if tg.Webhook.URL != "" {
			o.Webhook = &telegram.WebhookOptions{URL: tg.Webhook.URL, Listen: tg.Webhook.Listen, SecretToken: tg.Webhook.SecretToken}
		}
		if a, err := telegram.New(ctx, o); err != nil {
			errs = append(errs, fmt.Errorf("telegram: %w", err))
		} else {
			out = append(out, channelEntry{ch: a, access: router.Access{Users: tg.AllowUsers, Pairing: tg.Pairing}})
		}
	}
	if dc := cfg.Channels.Discord; dc.Enabled {
		a, err := discord.New(discord.Options{Token: dc.Token, APIBase: dc.APIBase, GatewayURL: dc.GatewayURL,
			Logger: log})
		if err != nil {
			errs = append(errs, fmt.Errorf("discord: %w", err))
		} else {
			out = append(out, channelEntry{ch: a, access: router.Access{Users: dc.AllowUsers, Spaces: dc.AllowGuilds, Chats: dc.AllowChannels}})
		}
	}
	return out, errs
}
