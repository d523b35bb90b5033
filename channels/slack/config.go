package slack

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/switchboard-gateway/switchboard/channels"
)

// Name is the channel's name: its configuration key and stored name.
const Name = "slack"

// DefaultAPIURL is Slack's Web API base.
const DefaultAPIURL = "https://slack.com/api/"

// Config is the channels.slack section.
type Config struct {
	channels.Common `yaml:",inline"` // allow_users and admins: Slack user ids (U…, W…)

	BotToken string `yaml:"bot_token" secret:"true" env:"SLACK_BOT_TOKEN"` // xoxb-…
	// AppToken is the app-level token (xapp-…, scope connections:write)
	// that opens Socket Mode connections; not needed with events_path.
	AppToken string `yaml:"app_token" secret:"true" env:"SLACK_APP_TOKEN"`
	// SigningSecret verifies the Events API's requests (events_path).
	SigningSecret string `yaml:"signing_secret" secret:"true" env:"SLACK_SIGNING_SECRET"`
	// AllowTeams are the workspace ids (T…) whose messages are taken;
	// empty: the bot token's own workspace only.
	AllowTeams []string `yaml:"allow_teams" reload:"access"`
	APIURL     string   `yaml:"api_url" secret:"url"`
	// EventsPath, when set, receives events by HTTP (the Events API, and
	// interactivity) at this path of http.listen instead of Socket Mode.
	EventsPath string `yaml:"events_path"`
	// Pairing lets an unknown user in a DM ask for access with a one-time
	// code that the operator approves.
	Pairing bool `yaml:"pairing" reload:"access"`
}

// Definition is the Slack channel for the registry.
var Definition = channels.Definition{
	Name:      Name,
	Title:     "Slack",
	NewConfig: func() channels.Section { return NewConfig() },
	Build:     build,
	Summary: func(s channels.Section) string {
		if p := s.(*Config).EventsPath; p != "" {
			return ", Events API at " + p
		}
		return ", Socket Mode"
	},
	Doctor: doctor,
	Init: &channels.Init{
		TokenUsage:    "the Slack bot token, xoxb-… (default SLACK_BOT_TOKEN)",
		UserUsage:     "your Slack member id, U…",
		APIFlag:       "api-url",
		APIUsage:      "another Slack Web API URL",
		APIKey:        "api_url",
		TokenQuestion: "Slack bot token (xoxb-…) from your app's OAuth & Permissions page",
		UserQuestion:  "Your Slack member id, U… (profile → ⋮ → Copy member ID; Enter: pairing codes instead)",
		TokenKey:      "bot_token",
		More: []channels.InitSecret{{Key: "app_token", Flag: "app-token",
			Usage:    "the Slack app-level token for Socket Mode, xapp-… (default SLACK_APP_TOKEN)",
			Question: "Slack app-level token (xapp-…, scope connections:write) for Socket Mode, from Basic Information → App-Level Tokens"}},
		UserID: userIDRE,
		Apply: func(s channels.Section, a channels.InitAnswers) {
			s.(*Config).Pairing = len(a.Users) == 0
		},
		Extra: func(a channels.InitAnswers) string {
			out := ""
			if a.More["app_token"] == "" {
				out = "    # Socket Mode's app-level token (xapp-…, scope connections:write):\n    # app_token, or SLACK_APP_TOKEN in the environment.\n"
			}
			if len(a.Users) == 0 {
				out += "    # A stranger writing to the bot in a DM gets a one-time code for\n    # `switchboard pairing approve CODE`.\n    pairing: true\n"
			}
			return out
		},
		NextSteps: func(a channels.InitAnswers, arg string) string {
			s := "Slack: docs/operations.md has the app manifest to paste.\n"
			if a.More["app_token"] == "" {
				s = "Slack: set SLACK_APP_TOKEN to the app-level token (xapp-…) for Socket Mode;\n  docs/operations.md has the app manifest to paste.\n"
			}
			if len(a.Users) == 0 {
				s += fmt.Sprintf("  Write to the bot in a DM; it answers with a pairing code. Admit yourself\n  with: switchboard pairing approve CODE%s\n", arg)
			}
			return s
		},
	},
}

// NewConfig returns the section with its defaults: Slack's API, Socket
// Mode, previews and progress on.
func NewConfig() *Config {
	return &Config{Common: channels.Common{StreamPreview: true, ShowToolProgress: true}, APIURL: DefaultAPIURL}
}

// Access is the admission rule from the allowlists; allow_teams restricts
// channel messages to those workspaces.
func (c *Config) Access() channels.Access {
	return channels.Access{Users: c.AllowUsers, Spaces: c.AllowTeams, Pairing: c.Pairing, Admins: c.Admins}
}

var (
	userIDRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[UW][A-Z0-9]{2,}$`) })
	teamIDRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^T[A-Z0-9]{2,}$`) })
	pathRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^/[A-Za-z0-9._~/-]*$`) })
)

// Validate checks an enabled section.
func (c *Config) Validate(key string, v channels.Checker) {
	if !c.Enabled {
		return
	}
	switch t := strings.TrimSpace(c.BotToken); {
	case t == "":
		v.Add(key+".bot_token", "required when "+key+".enabled is true; set it or SLACK_BOT_TOKEN (the Bot User OAuth Token, xoxb-…)")
	case !strings.HasPrefix(t, "xoxb-"):
		v.Add(key+".bot_token", "is not a bot token: it must start with xoxb- (OAuth & Permissions → Bot User OAuth Token)")
	}
	v.URL(key+".api_url", c.APIURL, []string{"http", "https"}, DefaultAPIURL)
	if c.EventsPath == "" {
		switch t := strings.TrimSpace(c.AppToken); {
		case t == "":
			v.AddNear(key+".app_token", key+".enabled", "required for Socket Mode; set it or SLACK_APP_TOKEN (Basic Information → App-Level Tokens, scope connections:write), or set events_path for the Events API")
		case !strings.HasPrefix(t, "xapp-"):
			v.Add(key+".app_token", "is not an app-level token: it must start with xapp- (Basic Information → App-Level Tokens)")
		}
	} else {
		switch {
		case !pathRE().MatchString(c.EventsPath) || c.EventsPath == "/":
			v.Add(key+".events_path", fmt.Sprintf("%q must be a path below the root of http.listen, such as /slack/events", c.EventsPath))
		case strings.HasPrefix(c.EventsPath, "/v1/") || slices.Contains([]string{"/healthz", "/readyz", "/metrics", "/login"}, c.EventsPath):
			v.Add(key+".events_path", fmt.Sprintf("%q is one of the gateway's own routes; use another path, such as /slack/events", c.EventsPath))
		}
		if strings.TrimSpace(c.SigningSecret) == "" {
			v.AddNear(key+".signing_secret", key+".events_path", "required with events_path; set it or SLACK_SIGNING_SECRET (Basic Information → Signing Secret)")
		}
		if !v.HTTPServed() {
			v.AddNear(key+".events_path", "http.listen", "needs http.listen: the Events API posts to this path on the gateway's HTTP server; set http.listen (behind an HTTPS proxy), or leave events_path empty for Socket Mode")
		}
	}
	ids(v, key+".allow_users", c.AllowUsers, userIDRE(), true, "a Slack member id such as U012AB3CD (profile → ⋮ → Copy member ID)")
	ids(v, key+".admins", c.Admins, userIDRE(), false, "a Slack member id such as U012AB3CD (profile → ⋮ → Copy member ID)")
	ids(v, key+".allow_teams", c.AllowTeams, teamIDRE(), false, "a workspace id such as T012AB3CD (auth.test's team_id, or the T… in the workspace's URL)")
}

func ids(v channels.Checker, key string, list []string, re *regexp.Regexp, star bool, what string) {
	for i, id := range list {
		if (star && id == "*") || re.MatchString(id) {
			continue
		}
		v.Add(fmt.Sprintf("%s[%d]", key, i), fmt.Sprintf("%q is not %s", id, what))
	}
}

// Warnings notes an enabled section that admits nobody, and an app token
// that the Events API does not use.
func (c *Config) Warnings(key string, note func(key, fallback, msg string)) {
	if !c.Enabled {
		return
	}
	if len(c.AllowUsers) == 0 && len(c.Admins) == 0 && !c.Pairing {
		note(key+".allow_users", key+".enabled", "is empty, so the bot admits nobody on Slack; add member ids (U…) or turn pairing on")
	}
	if c.EventsPath != "" && c.AppToken != "" {
		note(key+".app_token", key+".events_path", "is not used: with events_path set, events come by HTTP, not Socket Mode")
	}
}

// build prepares the adapter. Socket Mode is one connection per app
// token: Slack spreads envelopes over up to ten, so replicas may each
// hold one.
func build(s channels.Section, env channels.BuildEnv) channels.Launch {
	c := s.(*Config)
	o := Options{BotToken: c.BotToken, AppToken: c.AppToken, SigningSecret: c.SigningSecret, APIURL: c.APIURL,
		EventsPath: c.EventsPath, AllowTeams: c.AllowTeams, Logger: env.Logger, LastSeen: env.LatestInbound}
	if env.DownloadTransport != nil {
		o.DownloadTransport = env.DownloadTransport(c.APIURL, DefaultAPIURL)
	}
	return channels.Launch{Build: func(ctx context.Context) (channels.Channel, error) {
		a, err := New(o)
		if err != nil {
			return nil, err
		}
		return a, nil
	}}
}

// doctor tries the bot token (auth.test) and, for Socket Mode, the app
// token (apps.connections.open), naming a missing scope.
func doctor(ctx context.Context, s channels.Section, get channels.Getter) channels.Check {
	c := s.(*Config)
	base := c.APIURL
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	var auth struct {
		apiAnswer
		User   string `json:"user"`
		UserID string `json:"user_id"`
		Team   string `json:"team"`
		TeamID string `json:"team_id"`
	}
	fixBot := "set channels.slack.bot_token or SLACK_BOT_TOKEN to the Bot User OAuth Token (xoxb-…) from your app's OAuth & Permissions page"
	if chk, ok := call(ctx, get, base, "auth.test", c.BotToken, &auth, &auth.apiAnswer, fixBot); !ok {
		return chk
	}
	msg := fmt.Sprintf("bot token works: %s (%s) in %s (%s)", auth.User, auth.UserID, auth.Team, auth.TeamID)
	if c.EventsPath != "" {
		return channels.Check{Message: msg + "; Events API at " + c.EventsPath}
	}
	var open apiAnswer
	fixApp := "set channels.slack.app_token or SLACK_APP_TOKEN to an app-level token (xapp-…) with the scope connections:write (Basic Information → App-Level Tokens), and turn Socket Mode on"
	if chk, ok := call(ctx, get, base, "apps.connections.open", c.AppToken, &open, &open, fixApp); !ok {
		return chk
	}
	return channels.Check{Message: msg + "; app token opens Socket Mode"}
}

// apiAnswer is the envelope of every Web API answer.
type apiAnswer struct {
	OK       bool   `json:"ok"`
	Error    string `json:"error"`
	Needed   string `json:"needed"`
	Provided string `json:"provided"`
}

// call asks a Web API method with token and reports a failure as a Check.
func call(ctx context.Context, get channels.Getter, base, method, token string, v any, ans *apiAnswer, fix string) (channels.Check, bool) {
	u, err := url.JoinPath(base, method)
	if err != nil {
		return channels.Check{Failed: true, Message: method + ": " + err.Error(), Fix: "check channels.slack.api_url"}, false
	}
	code, err := get(ctx, u, http.Header{"Authorization": {"Bearer " + token}}, v, token)
	switch {
	case err != nil:
		return channels.Check{Failed: true, Message: method + ": " + err.Error(), Fix: "check that " + base + " is reachable from this machine"}, false
	case code != http.StatusOK:
		return channels.Check{Failed: true, Message: fmt.Sprintf("%s: status %d", method, code), Fix: "try again later; if it persists, check channels.slack.api_url"}, false
	case !ans.OK:
		return failure(method, *ans, fix), false
	}
	return channels.Check{}, true
}

// failure explains a Web API error answer.
func failure(method string, a apiAnswer, fix string) channels.Check {
	switch a.Error {
	case "missing_scope":
		return channels.Check{Failed: true, Message: fmt.Sprintf("%s: the token lacks the scope %s (it has %s)", method, a.Needed, a.Provided),
			Fix: "add the scope " + a.Needed + " to the app (OAuth & Permissions, or the manifest in docs/operations.md) and reinstall it to the workspace"}
	case "invalid_auth", "not_authed", "token_revoked", "account_inactive", "not_allowed_token_type":
		return channels.Check{Failed: true, Message: method + ": the token was rejected (" + a.Error + ")", Fix: fix}
	}
	return channels.Check{Failed: true, Message: method + ": " + a.Error, Fix: fix}
}

// Config is the platform's section of the configuration.
var _ channels.Section = (*Config)(nil)
