package config

import (
	"os"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/switchboard-gateway/switchboard/channels/slack"
)

const examplePath = "../config.example.yaml"

// The example must load, validate, and document exactly the built-in
// defaults, so it cannot rot as the schema changes.
func TestExampleLoadsValidatesAndMatchesDefaults(t *testing.T) {
	setEnv(t, map[string]string{
		"OPENAI_API_KEY": "sk-example",
		"OPENAI_MODEL":   "gpt-example",
	})
	cfg, err := Load(examplePath)
	if err != nil {
		t.Fatalf("Load(%s): %v", examplePath, err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if w := cfg.Warnings(); len(w) != 0 {
		t.Errorf("Warnings = %q, want none", w)
	}

	want := Default()
	want.LLM.APIKey = "sk-example"
	want.LLM.Model = "gpt-example"
	assertConfig(t, cfg, want)
}

func TestExampleSecretsComeFromEnvironment(t *testing.T) {
	setEnv(t, map[string]string{
		"OPENAI_MODEL":               "gpt-example",
		"TELEGRAM_BOT_TOKEN":         "123:tg",
		"DISCORD_BOT_TOKEN":          "dc-token",
		"SWITCHBOARD_HTTP_TOKEN":     "http-token",
		"SWITCHBOARD_SEARCH_API_KEY": "search-key",
		"SLACK_BOT_TOKEN":            "xoxb-sl",
		"SLACK_APP_TOKEN":            "xapp-sl",
		"SLACK_SIGNING_SECRET":       "sl-secret",
	})
	cfg, err := Load(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	sl := cfg.Channels.Sections[slack.Name].(*slack.Config)
	got := []string{telegramOf(cfg).Token, discordOf(cfg).Token, cfg.HTTP.Token, cfg.Tools.Web.Search.APIKey,
		sl.BotToken, sl.AppToken, sl.SigningSecret}
	want := []string{"123:tg", "dc-token", "http-token", "search-key", "xoxb-sl", "xapp-sl", "sl-secret"}
	if !slices.Equal(got, want) {
		t.Errorf("tokens = %q, want %q", got, want)
	}
	if telegramOf(cfg).Enabled || discordOf(cfg).Enabled || sl.Enabled {
		t.Error("the example enables a chat channel; all must be disabled by default")
	}
}

// Every key of the schema appears in the example, and nothing else does.
func TestExampleListsEveryKey(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	var got []string
	var collect func(n *yaml.Node, prefix string)
	collect = func(n *yaml.Node, prefix string) {
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := joinKey(prefix, n.Content[i].Value)
			got = append(got, key)
			collect(n.Content[i+1], key)
		}
	}
	collect(root.Content[0], "")

	want := allKeys()
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("example keys differ from the schema\nmissing: %q\nextra:   %q", diff(want, got), diff(got, want))
	}
}

// diff returns the elements of a that are not in b.
func diff(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// Defaults written out as YAML load back unchanged: every field type of the
// schema has a check in the walker, and durations round-trip.
func TestDefaultsRoundTrip(t *testing.T) {
	want := validConfig()
	want.LLM.FallbackModels = []string{"a", "b"}
	telegramOf(want).AllowUsers = []string{"123", "@bob"}
	telegramOf(want).Enabled = true
	discordOf(want).AllowGuilds = []string{"42"}
	want.HTTP.Token = "tok"
	data, err := yaml.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got := mustLoad(t, string(data), nil)
	assertConfig(t, got, want)
}

func TestDefaultNeedsOnlyAModel(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Errorf("Default() with a model: Validate = %v, want nil", err)
	}
	got := messages(t, Default().Validate())
	want := []string{"llm.model: must not be empty; set it or OPENAI_MODEL"}
	if !slices.Equal(got, want) {
		t.Errorf("Default().Validate() = %q, want %q", got, want)
	}
}
