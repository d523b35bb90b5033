package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"switchboard/channels/discord"
	"switchboard/config"
	"switchboard/router"
)

// enabledChannels constructs the adapters enabled in the configuration.
// Access rules come from each channel's allowlists (empty admits nobody).
func enabledChannels(ctx context.Context, cfg *config.Config, log *slog.Logger) ([]channelEntry, error) {
	var out []channelEntry
	if tg := cfg.Channels.Telegram; tg.Enabled {
		return nil, errors.New("telegram: channel not available in this build")
	}
	if dc := cfg.Channels.Discord; dc.Enabled {
		a, err := discord.New(discord.Options{Token: dc.Token, APIBase: dc.APIBase, GatewayURL: dc.GatewayURL,
			Logger: log.With("channel", "discord")})
		if err != nil {
			return nil, fmt.Errorf("discord: %w", err)
		}
		out = append(out, channelEntry{ch: a, access: router.Access{Users: dc.AllowUsers, Spaces: dc.AllowGuilds, Chats: dc.AllowChannels}})
	}
	return out, nil
}
