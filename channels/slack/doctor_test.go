package slack

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/slackfake"
)

// get is a channels.Getter as doctor's: one GET, a 200's JSON decoded.
func get(ctx context.Context, url string, header http.Header, v any, _ ...string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		err = json.NewDecoder(resp.Body).Decode(v)
	}
	return resp.StatusCode, err
}

func TestDoctor(t *testing.T) {
	f := slackfake.New(t)
	f.SetLimits(slackfake.NoLimits)
	section := func(bot, app, path string) *Config {
		c := NewConfig()
		c.Enabled, c.BotToken, c.AppToken, c.EventsPath, c.APIURL = true, bot, app, path, f.APIURL()
		return c
	}
	tests := []struct {
		name   string
		c      *Config
		failed bool
		want   []string
	}{
		{"both tokens work", section(slackfake.BotToken, slackfake.AppToken, ""), false, []string{"UBOT", "T0FAKE", "Socket Mode"}},
		{"events api needs no app token", section(slackfake.BotToken, "", "/slack/events"), false, []string{"Events API at /slack/events"}},
		{"bad bot token", section("xoxb-wrong", slackfake.AppToken, ""), true, []string{"auth.test", "rejected", "SLACK_BOT_TOKEN"}},
		{"bot token as app token", section(slackfake.BotToken, slackfake.BotToken, ""), true, []string{"apps.connections.open", "connections:write"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chk := doctor(t.Context(), tt.c, get)
			if chk.Failed != tt.failed {
				t.Fatalf("check = %+v, want failed %v", chk, tt.failed)
			}
			all := chk.Message + " " + chk.Fix
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("%q does not say %q", all, w)
				}
			}
		})
	}
	down := section(slackfake.BotToken, slackfake.AppToken, "")
	down.APIURL = "http://127.0.0.1:1/api/"
	if chk := doctor(t.Context(), down, get); !chk.Failed || !strings.Contains(chk.Fix, "reachable") {
		t.Errorf("unreachable: %+v", chk)
	}
}

func TestDoctorNamesAMissingScope(t *testing.T) {
	chk := failure("auth.test", apiAnswer{Error: "missing_scope", Needed: "chat:write", Provided: "app_mentions:read"}, "x")
	if !chk.Failed || !strings.Contains(chk.Message, "chat:write") || !strings.Contains(chk.Fix, "add the scope chat:write") {
		t.Errorf("missing scope: %+v", chk)
	}
}

var _ channels.Getter = get
