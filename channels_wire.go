package main

import (
	"context"
	"fmt"
	"log/slog"

	"switchboard/config"
)

// enabledChannels constructs the adapters enabled in the configuration.
func enabledChannels(ctx context.Context, cfg *config.Config, log *slog.Logger) ([]channelEntry, error) {
	var out []channelEntry
	if cfg.Channels.Telegram.Enabled {
		return nil, fmt.Errorf("telegram: %w", errNoChannel)
	}
	if cfg.Channels.Discord.Enabled {
		return nil, fmt.Errorf("discord: %w", errNoChannel)
	}
	return out, nil
}
