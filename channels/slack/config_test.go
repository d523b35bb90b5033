package slack_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/slack"
	"github.com/switchboard-gateway/switchboard/config"
)

// load writes a configuration with the given channels.slack section and
// loads and validates it.
func load(t *testing.T, section string) (*config.Config, error) {
	t.Helper()
	return loadWith(t, "", section)
}

// loadWith is load with more top-level YAML before the channels.
func loadWith(t *testing.T, top, section string) (*config.Config, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	data := top + "llm:\n  base_url: http://127.0.0.1:1/v1\n  api_key: sk-test-0123456789\n  model: m\nstore:\n  path: " +
		filepath.Join(dir, "sb.db") + "\nchannels:\n  slack:\n" + section
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	return cfg, cfg.Validate()
}

func TestConfigValidate(t *testing.T) {
	for _, env := range []string{"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET"} {
		t.Setenv(env, "")
	}
	tests := []struct {
		name    string
		section string
		want    []string // substrings of the error; none: valid
	}{
		{"socket mode", "    enabled: true\n    bot_token: xoxb-1-2-abc\n    app_token: xapp-1-A1-2-abc\n    allow_users: [U012AB3CD]\n", nil},
		{"events api", "    enabled: true\n    bot_token: xoxb-1\n    signing_secret: s3cret\n    events_path: /slack/events\n    allow_users: [\"*\"]\n", nil},
		{"disabled is not checked", "    enabled: false\n    bot_token: nonsense\n", nil},
		{"no bot token", "    enabled: true\n    app_token: xapp-1\n", []string{"channels.slack.bot_token", "SLACK_BOT_TOKEN"}},
		{"a user token", "    enabled: true\n    bot_token: xoxp-1\n    app_token: xapp-1\n", []string{"must start with xoxb-"}},
		{"no app token in socket mode", "    enabled: true\n    bot_token: xoxb-1\n", []string{"channels.slack.app_token", "SLACK_APP_TOKEN", "events_path"}},
		{"a bot token as app token", "    enabled: true\n    bot_token: xoxb-1\n    app_token: xoxb-2\n", []string{"must start with xapp-"}},
		{"events api without secret", "    enabled: true\n    bot_token: xoxb-1\n    events_path: /slack/events\n", []string{"channels.slack.signing_secret", "SLACK_SIGNING_SECRET"}},
		{"events path not a path", "    enabled: true\n    bot_token: xoxb-1\n    signing_secret: s\n    events_path: slack\n", []string{"channels.slack.events_path"}},
		{"events path on the chat API", "    enabled: true\n    bot_token: xoxb-1\n    signing_secret: s\n    events_path: /v1/chat/completions\n", []string{"gateway's own routes"}},
		{"bad ids", "    enabled: true\n    bot_token: xoxb-1\n    app_token: xapp-1\n    allow_users: [\"@ann\"]\n    admins: [\"*\"]\n    allow_teams: [acme]\n",
			[]string{"allow_users[0]", "admins[0]", "allow_teams[0]", "member id"}},
		{"bad api url", "    enabled: true\n    bot_token: xoxb-1\n    app_token: xapp-1\n    api_url: slack.com\n", []string{"channels.slack.api_url"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.section)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// The Events API posts to the gateway's HTTP server: events_path without
// http.listen is refused at load, not found out when nothing arrives.
func TestEventsPathNeedsHTTPListen(t *testing.T) {
	t.Setenv("SLACK_APP_TOKEN", "")
	_, err := loadWith(t, "http:\n  listen: \"\"\n", "    enabled: true\n    bot_token: xoxb-1\n    signing_secret: s3cret\n    events_path: /slack/events\n    allow_users: [U012AB3CD]\n")
	if err == nil || !strings.Contains(err.Error(), "channels.slack.events_path") || !strings.Contains(err.Error(), "needs http.listen") {
		t.Fatalf("events_path without http.listen: %v; want an error naming channels.slack.events_path and http.listen", err)
	}
}

func TestConfigEnvAndSecrets(t *testing.T) {
	t.Setenv("SLACK_BOT_TOKEN", "xoxb-from-env")
	t.Setenv("SLACK_APP_TOKEN", "xapp-from-env")
	t.Setenv("SLACK_SIGNING_SECRET", "")
	cfg, err := load(t, "    enabled: true\n    allow_users: [U1AB]\n")
	if err != nil {
		t.Fatal(err)
	}
	sc := channels.SectionOf[*slack.Config](cfg.Channels.Sections)
	if sc == nil || sc.BotToken != "xoxb-from-env" || sc.AppToken != "xapp-from-env" || sc.APIURL != slack.DefaultAPIURL {
		t.Fatalf("section = %+v", sc)
	}
	joined := strings.Join(cfg.Secrets(), " ")
	for _, s := range []string{"xoxb-from-env", "xapp-from-env"} {
		if !strings.Contains(joined, s) {
			t.Errorf("secrets %q lack %s", joined, s)
		}
	}
}

func TestConfigWarnings(t *testing.T) {
	t.Setenv("SLACK_SIGNING_SECRET", "")
	cfg, err := load(t, "    enabled: true\n    bot_token: xoxb-1\n    app_token: xapp-1\n    signing_secret: s\n    events_path: /slack/events\n")
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(cfg.Warnings(), "\n")
	for _, want := range []string{"admits nobody on Slack", "app_token", "is not used"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings %q do not say %q", w, want)
		}
	}
}

func TestAccess(t *testing.T) {
	c := slack.NewConfig()
	c.AllowUsers, c.AllowTeams, c.Pairing, c.Admins = []string{"U1"}, []string{"T1"}, true, []string{"U9"}
	a := c.Access()
	if !a.Allows(channels.Inbound{UserID: "U1", ChatType: channels.Group, Space: "T1"}) ||
		a.Allows(channels.Inbound{UserID: "U1", ChatType: channels.Group, Space: "T2"}) ||
		!a.IsAdmin(channels.Inbound{UserID: "U9"}) || !a.Pairing {
		t.Errorf("access = %+v", a)
	}
}
