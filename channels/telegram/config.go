package telegram

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
)

// Name is the channel's name: its configuration key and stored name.
const Name = name

// rolePoller is the replicas' role of the one long poller: getUpdates
// allows one per bot.
const rolePoller = "telegram-poller"

// Config is the channels.telegram section.
type Config struct {
	channels.Common `yaml:",inline"` // allow_users: numeric ids or @usernames; admins: numeric ids

	Token       string        `yaml:"token" secret:"true" env:"TELEGRAM_BOT_TOKEN"`
	APIEndpoint string        `yaml:"api_endpoint" secret:"url"`
	PollTimeout time.Duration `yaml:"poll_timeout"`
	Webhook     Webhook       `yaml:"webhook"` // empty URL: long polling
	// Pairing lets an unknown user ask for access with a one-time code that
	// the operator approves with `switchboard pairing approve CODE`.
	Pairing bool `yaml:"pairing" reload:"access"`
	// Pacing keeps what the bot sends within Telegram's documented rate
	// limits (30 messages a second, 1 a second in a chat, 20 a minute in
	// a group). Off only for a Bot API server without those limits (an
	// emulator in a benchmark).
	Pacing bool `yaml:"pacing"`
}

// Webhook receives Telegram updates by HTTPS push instead of long polling.
type Webhook struct {
	URL         string `yaml:"url"`                        // public https URL Telegram posts to
	Listen      string `yaml:"listen"`                     // local address serving it, such as 127.0.0.1:8443 behind a proxy
	SecretToken string `yaml:"secret_token" secret:"true"` // checked on every request
}

// Definition is the Telegram channel for the registry.
var Definition = channels.Definition{
	Name:      Name,
	Title:     "Telegram",
	NewConfig: func() channels.Section { return NewConfig() },
	Build:     build,
	Summary: func(s channels.Section) string {
		if u := s.(*Config).Webhook.URL; u != "" {
			return ", webhook " + u
		}
		return ""
	},
	Doctor: doctor,
	Init: &channels.Init{
		TokenUsage:    "the Telegram bot token (default TELEGRAM_BOT_TOKEN)",
		UserUsage:     "your Telegram user id (without one, pairing codes are on)",
		APIFlag:       "api-endpoint",
		APIUsage:      "a local Bot API server instead of Telegram's",
		APIKey:        "api_endpoint",
		UsageNote:     "(no ID: pairing)",
		TokenQuestion: "Telegram bot token from @BotFather",
		UserQuestion:  "Your Telegram user id, digits (@userinfobot tells you; Enter: pairing codes instead)",
		Apply: func(s channels.Section, a channels.InitAnswers) {
			s.(*Config).Pairing = len(a.Users) == 0 // without the operator's id, pairing codes
		},
		Extra: func(a channels.InitAnswers) string {
			if len(a.Users) > 0 {
				return ""
			}
			return "    # A stranger writing to the bot in private gets a one-time code for\n    # `switchboard pairing approve CODE`.\n    pairing: true\n"
		},
		NextSteps: func(a channels.InitAnswers, arg string) string {
			if len(a.Users) > 0 {
				return ""
			}
			return fmt.Sprintf("Telegram: write to your bot in private; it answers with a pairing code. Admit\n  yourself with: switchboard pairing approve CODE%s\n", arg)
		},
	},
}

// NewConfig returns the section with its defaults: replies that feel live
// (previews and progress on), paced.
func NewConfig() *Config {
	return &Config{
		Common:      channels.Common{StreamPreview: true, ShowToolProgress: true},
		APIEndpoint: defaultEndpoint,
		PollTimeout: defaultPollTimeout,
		Pacing:      true,
	}
}

// Access is the admission rule from the allowlists.
func (c *Config) Access() channels.Access {
	return channels.Access{Users: c.AllowUsers, Pairing: c.Pairing, Admins: c.Admins}
}

var (
	userRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]+|@[A-Za-z0-9_]+)$`) })
	nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`) })
	idRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]+$`) })
)

// Validate checks an enabled section.
func (c *Config) Validate(key string, v channels.Checker) {
	if !c.Enabled {
		return
	}
	channels.RequireToken(v, key, c.Token, "TELEGRAM_BOT_TOKEN")
	v.URL(key+".api_endpoint", c.APIEndpoint, []string{"http", "https"}, "https://api.telegram.org")
	v.PositiveDuration(key+".poll_timeout", c.PollTimeout, "30s")
	if wh := c.Webhook; wh.URL != "" {
		v.URL(key+".webhook.url", wh.URL, []string{"https"}, "https://bot.example.com/telegram")
		v.NotEmpty(key+".webhook.listen", wh.Listen, `the local address to serve it on, such as "127.0.0.1:8443"`)
		if len(wh.SecretToken) < 16 {
			v.Add(key+".webhook.secret_token", "required with a webhook: at least 16 characters (A-Z, a-z, 0-9, _ and -), such as ${TELEGRAM_WEBHOOK_SECRET}")
		}
	}
	for i, u := range c.AllowUsers {
		if !userRE().MatchString(u) {
			hint := "the numeric id"
			if nameRE().MatchString(u) {
				hint = fmt.Sprintf("%q or the numeric id", "@"+u)
			}
			v.Add(fmt.Sprintf("%s.allow_users[%d]", key, i), fmt.Sprintf("%q is neither a numeric user id nor an @username; write %s", u, hint))
		}
	}
	for i, u := range c.Admins {
		if !idRE().MatchString(u) {
			v.Add(fmt.Sprintf("%s.admins[%d]", key, i), fmt.Sprintf("%q is not a numeric user id; admins takes ids only (a username can pass to someone else): the bot logs the id of a user it refuses, or ask @userinfobot", u))
		}
	}
}

// Warnings notes an enabled section that admits nobody, and usernames in
// the allowlist.
func (c *Config) Warnings(key string, note func(key, fallback, msg string)) {
	if !c.Enabled {
		return
	}
	if len(c.AllowUsers) == 0 && len(c.Admins) == 0 && !c.Pairing { // with pairing, the operator admits people one by one
		note(key+".allow_users", key+".enabled", "is empty, so the bot admits nobody on Telegram; add numeric user ids or @usernames")
	}
	for i, u := range c.AllowUsers {
		if strings.HasPrefix(u, "@") {
			k := fmt.Sprintf("%s.allow_users[%d]", key, i)
			note(k, k, fmt.Sprintf("is the username %s: it admits whoever holds that name, also someone who takes it after a rename; the numeric user id stays with the person (the bot logs it when it refuses someone)", u))
		}
	}
}

// build prepares the adapter. With replicas, long polling waits for the
// poller role; a webhook is served by every replica.
func build(s channels.Section, env channels.BuildEnv) channels.Launch {
	tg := s.(*Config)
	o := Options{Token: tg.Token, APIEndpoint: tg.APIEndpoint, PollTimeout: tg.PollTimeout, Logger: env.Logger,
		OnPaced: env.OnPaced}
	if !tg.Pacing {
		o.Pacing = &NoPacing
	}
	if tg.Webhook.URL != "" {
		o.Webhook = &WebhookOptions{URL: tg.Webhook.URL, Listen: tg.Webhook.Listen, SecretToken: tg.Webhook.SecretToken}
	}
	standby := o.Webhook == nil && env.Roles != nil
	o.PollOnRun = standby // polling waits for the role (Gate)
	l := channels.Launch{Build: func(ctx context.Context) (channels.Channel, error) {
		a, err := New(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("telegram: %w", err)
		}
		return a, nil
	}}
	if standby {
		l.Gate = func(ctx context.Context) error {
			_, err := env.Roles.HoldAny(ctx, []string{rolePoller})
			return err
		}
	}
	return l
}

// doctor asks getMe with the token.
func doctor(ctx context.Context, s channels.Section, get channels.Getter) channels.Check {
	tg := s.(*Config)
	var me struct {
		OK     bool `json:"ok"`
		Result struct {
			Username string `json:"username"`
		} `json:"result"`
	}
	url := strings.TrimRight(tg.APIEndpoint, "/") + "/bot" + tg.Token + "/getMe"
	code, err := get(ctx, url, http.Header{}, &me, tg.Token)
	switch {
	case err != nil:
		return channels.Check{Failed: true, Message: "getMe: " + err.Error(), Fix: "check that " + tg.APIEndpoint + " is reachable from this machine"}
	case code == http.StatusUnauthorized || code == http.StatusNotFound:
		return channels.Check{Failed: true, Message: fmt.Sprintf("getMe: the token was rejected (status %d)", code),
			Fix: "get the bot's token from @BotFather (/token) and set channels.telegram.token or TELEGRAM_BOT_TOKEN"}
	case code != http.StatusOK || !me.OK:
		return channels.Check{Failed: true, Message: fmt.Sprintf("getMe: status %d", code), Fix: "try again later; if it persists, check channels.telegram.api_endpoint"}
	}
	msg := "token works: bot @" + me.Result.Username
	if tg.Webhook.URL != "" {
		msg += ", webhook " + tg.Webhook.URL
	}
	return channels.Check{Message: msg}
}

// Config is the platform's section of the configuration.
var _ channels.Section = (*Config)(nil)
