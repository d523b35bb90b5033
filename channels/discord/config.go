package discord

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"

	"github.com/switchboard-gateway/switchboard/channels"
)

// Name is the channel's name: its configuration key and stored name.
const Name = "discord"

// Config is the channels.discord section.
type Config struct {
	channels.Common `yaml:",inline"` // allow_users and admins: user ids

	Token         string   `yaml:"token" secret:"true" env:"DISCORD_BOT_TOKEN"`
	AllowGuilds   []string `yaml:"allow_guilds" reload:"access"`
	AllowChannels []string `yaml:"allow_channels" reload:"access"`
	APIBase       string   `yaml:"api_base" secret:"url"`
	GatewayURL    string   `yaml:"gateway_url" secret:"url"` // empty asks the API for the gateway
	// ShardCount splits the Discord gateway into shards (0 or 1: one
	// connection for everything); ShardID is this replica's shard, from 0 to
	// ShardCount-1. With ShardCount > 1 and no ShardID, replicas on one
	// PostgreSQL store each claim a free shard.
	ShardCount int  `yaml:"shard_count"`
	ShardID    *int `yaml:"shard_id"`
}

// Definition is the Discord channel for the registry.
var Definition = channels.Definition{
	Name:      Name,
	Title:     "Discord",
	NewConfig: func() channels.Section { return NewConfig() },
	Build:     build,
	Doctor:    doctor,
	Init: &channels.Init{
		TokenUsage:    "the Discord bot token (default DISCORD_BOT_TOKEN)",
		UserUsage:     "your Discord user id",
		APIFlag:       "api-base",
		APIUsage:      "another Discord API base URL",
		APIKey:        "api_base",
		TokenQuestion: "Discord bot token from the developer portal, your application → Bot",
		UserQuestion:  "Your Discord user id, digits (Developer Mode → right-click your name → Copy User ID; Enter: add it later)",
		NextSteps: func(a channels.InitAnswers, _ string) string {
			if len(a.Users) > 0 {
				return ""
			}
			return "Discord: the bot admits nobody yet. Write to it: it answers with your user\n  id. Add that to channels.discord.allow_users, then reload (SIGHUP) or restart.\n"
		},
	},
}

// NewConfig returns the section with its defaults: the API version
// discordgo speaks, previews and progress on.
func NewConfig() *Config {
	return &Config{Common: channels.Common{StreamPreview: true, ShowToolProgress: true}, APIBase: DefaultAPIBase}
}

// Access is the admission rule from the allowlists.
func (c *Config) Access() channels.Access {
	return channels.Access{Users: c.AllowUsers, Spaces: c.AllowGuilds, Chats: c.AllowChannels, Admins: c.Admins}
}

var snowflake = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]+$`) })

// Validate checks an enabled section, and the shards in any case.
func (c *Config) Validate(key string, v channels.Checker) {
	switch {
	case c.ShardCount < 0:
		v.Add(key+".shard_count", fmt.Sprintf("is %d; use 0 or 1 for one gateway connection, or the number of shards", c.ShardCount))
	case c.ShardID != nil && (*c.ShardID < 0 || *c.ShardID >= max(c.ShardCount, 1)):
		v.Add(key+".shard_id", fmt.Sprintf("is %d; it must be from 0 to shard_count-1 (%d)", *c.ShardID, max(c.ShardCount, 1)-1))
	case c.ShardCount > 1 && c.ShardID == nil && !v.SharedStore():
		v.AddNear(key+".shard_id", key+".shard_count", "is not set, and only replicas on a PostgreSQL store (store.driver: postgres) can claim shards on their own; set shard_id for this process")
	}
	if !c.Enabled {
		return
	}
	channels.RequireToken(v, key, c.Token, "DISCORD_BOT_TOKEN")
	v.URL(key+".api_base", c.APIBase, []string{"http", "https"}, "https://discord.com/api/v9")
	if c.GatewayURL != "" {
		v.URL(key+".gateway_url", c.GatewayURL, []string{"ws", "wss"}, "wss://gateway.discord.gg, or leave it empty to ask the API")
	}
	snowflakes(v, key+".allow_users", c.AllowUsers, "Copy User ID")
	snowflakes(v, key+".admins", c.Admins, "Copy User ID")
	snowflakes(v, key+".allow_guilds", c.AllowGuilds, "Copy Server ID")
	snowflakes(v, key+".allow_channels", c.AllowChannels, "Copy Channel ID")
}

func snowflakes(v channels.Checker, key string, ids []string, how string) {
	for i, id := range ids {
		if !snowflake().MatchString(id) {
			v.Add(fmt.Sprintf("%s[%d]", key, i), fmt.Sprintf("%q is not a Discord id; use the numeric id (Developer Mode, then %s)", id, how))
		}
	}
}

// Warnings notes an enabled section that admits nobody.
func (c *Config) Warnings(key string, note func(key, fallback, msg string)) {
	if c.Enabled && len(c.AllowUsers) == 0 && len(c.Admins) == 0 {
		note(key+".allow_users", key+".enabled", "is empty, so the bot admits nobody on Discord; add user ids")
	}
}

// build prepares the adapter: it catches up from the store on each new
// gateway session, downloads attachments through the outbound guard, and
// with replicas claims a free shard when shard_id is not set.
func build(s channels.Section, env channels.BuildEnv) channels.Launch {
	dc := s.(*Config)
	o := Options{Token: dc.Token, APIBase: dc.APIBase, GatewayURL: dc.GatewayURL, Logger: env.Logger,
		LastSeen:   env.LatestInbound,
		ShardCount: dc.ShardCount, ShardID: dc.ShardID,
	}
	if env.DownloadTransport != nil {
		// A configured api_base other than Discord's (a fake) is the one
		// exception to the guard.
		o.DownloadTransport = env.DownloadTransport(dc.APIBase, DefaultAPIBase)
	}
	if dc.ShardCount > 1 && dc.ShardID == nil && env.Roles != nil {
		names := make([]string, dc.ShardCount)
		for i := range names {
			names[i] = fmt.Sprintf("discord-shard-%d", i)
		}
		// Held until the replica stops or dies; then another claims it.
		o.ClaimShard = func(ctx context.Context) (ShardClaim, error) {
			i, err := env.Roles.HoldAny(ctx, names)
			return ShardClaim{ID: i}, err
		}
	}
	return channels.Launch{Build: func(context.Context) (channels.Channel, error) {
		a, err := New(o)
		if err != nil {
			return nil, fmt.Errorf("discord: %w", err)
		}
		return a, nil
	}}
}

// doctor asks /users/@me with the token.
func doctor(ctx context.Context, s channels.Section, get channels.Getter) channels.Check {
	dc := s.(*Config)
	var me struct {
		Username string `json:"username"`
		ID       string `json:"id"`
	}
	token := strings.TrimPrefix(strings.TrimSpace(dc.Token), "Bot ")
	url := strings.TrimRight(dc.APIBase, "/") + "/users/@me"
	code, err := get(ctx, url, http.Header{"Authorization": {"Bot " + token}}, &me, token)
	switch {
	case err != nil:
		return channels.Check{Failed: true, Message: "/users/@me: " + err.Error(), Fix: "check that " + dc.APIBase + " is reachable from this machine"}
	case code == http.StatusUnauthorized:
		return channels.Check{Failed: true, Message: "/users/@me: the token was rejected (status 401)",
			Fix: "reset the token in the Discord developer portal (your application → Bot → Reset Token) and set channels.discord.token or DISCORD_BOT_TOKEN"}
	case code != http.StatusOK:
		return channels.Check{Failed: true, Message: fmt.Sprintf("/users/@me: status %d", code), Fix: "try again later; if it persists, check channels.discord.api_base"}
	}
	return channels.Check{Message: fmt.Sprintf("token works: bot %s (%s); make sure the Message Content intent is on in the developer portal", me.Username, me.ID)}
}

// Config is the platform's section of the configuration.
var _ channels.Section = (*Config)(nil)
