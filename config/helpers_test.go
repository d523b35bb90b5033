package config

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/channels/discord"
	"github.com/switchboard-gateway/switchboard/channels/telegram"
)

// envVars are the variables Load or config.example.yaml read. Tests clear
// them so that the developer's own environment cannot change results.
var envVars = []string{
	"OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL",
	"TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN", "SWITCHBOARD_HTTP_TOKEN", "SWITCHBOARD_SEARCH_API_KEY",
	"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET",
}

// setEnv clears envVars, then sets env, for the duration of the test.
// An empty value behaves like an unset one for everything Load does.
func setEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, k := range envVars {
		t.Setenv(k, "")
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// doc joins lines into a YAML document, so that line numbers in a test are
// the 1-based index of the line.
func doc(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

// loadString writes content to config.yaml in a fresh directory, makes that
// the working directory (so messages say "config.yaml:N") and loads it with
// env set.
func loadString(t *testing.T, content string, env map[string]string) (*Config, error) {
	t.Helper()
	setEnv(t, env)
	t.Chdir(t.TempDir())
	if err := os.WriteFile("config.yaml", []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load("config.yaml")
}

// mustLoad is loadString for documents that must load.
func mustLoad(t *testing.T, content string, env map[string]string) *Config {
	t.Helper()
	cfg, err := loadString(t, content, env)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return cfg
}

// normalized returns a copy of c that reflect.DeepEqual can compare with a
// Config built by hand: no source positions, and empty lists as nil.
func normalized(c *Config) *Config {
	r := *c
	r.src = nil
	r.Channels = c.Channels.Clone()
	for _, p := range []*[]string{
		&r.LLM.FallbackModels,
		&telegramOf(&r).AllowUsers,
		&discordOf(&r).AllowUsers,
		&telegramOf(&r).Admins,
		&discordOf(&r).Admins,
		&discordOf(&r).AllowGuilds,
		&discordOf(&r).AllowChannels,
		&r.Tools.Web.AllowHosts,
		&r.HTTP.PublicHosts,
	} {
		if len(*p) == 0 {
			*p = nil
		}
	}
	for _, sec := range r.Channels.Sections { // every platform's, also one the list above does not name
		nilEmptySlices(reflect.ValueOf(sec).Elem())
	}
	if len(r.MCP.Servers) == 0 {
		r.MCP.Servers = nil
	}
	if len(r.Tools.Command.ConnectPorts) == 0 {
		r.Tools.Command.ConnectPorts = nil
	}
	if len(r.Schedule.Jobs) == 0 {
		r.Schedule.Jobs = nil
	}
	return &r
}

func assertConfig(t *testing.T, got, want *Config) {
	t.Helper()
	if g, w := normalized(got), normalized(want); !reflect.DeepEqual(g, w) {
		t.Errorf("config differs\ngot  %+v\nwant %+v", *g, *w)
	}
}

// problems splits an error from Load or Validate into its *Error parts.
func problems(t *testing.T, err error) []*Error {
	t.Helper()
	if err == nil {
		return nil
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var out []*Error
	for _, e := range errs {
		var ce *Error
		if !errors.As(e, &ce) {
			t.Fatalf("problem %q (%T) is not a *config.Error", e, e)
		}
		out = append(out, ce)
	}
	return out
}

// messages renders each problem of err.
func messages(t *testing.T, err error) []string {
	t.Helper()
	var out []string
	for _, p := range problems(t, err) {
		out = append(out, p.Error())
	}
	return out
}

// validConfig is the smallest configuration that passes Validate.
func validConfig() *Config {
	c := Default()
	c.LLM.Model = "gpt-test"
	return c
}

// telegramOf and discordOf are c's platform sections.
func telegramOf(c *Config) *telegram.Config { return Section[*telegram.Config](c) }
func discordOf(c *Config) *discord.Config   { return Section[*discord.Config](c) }

// nilEmptySlices sets the empty slices among v's fields, nested structs
// included, to nil.
func nilEmptySlices(v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case !f.CanSet():
		case f.Kind() == reflect.Slice && f.Len() == 0:
			f.SetZero()
		case f.Kind() == reflect.Struct:
			nilEmptySlices(f)
		}
	}
}
