package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// secretConfig has every secret set, one of them twice, and a password in a URL.
func secretConfig() *Config {
	c := validConfig()
	c.LLM.APIKey = "sk-live-abcdef"
	c.LLM.BaseURL = "https://proxy-user:proxy-pass@llm.example.com/v1"
	c.LLM.FallbackModels = []string{"small"}
	telegramOf(c).Token = "123456:telegram-token"
	telegramOf(c).AllowUsers = []string{"@alice"}
	discordOf(c).Token = "discord-token"
	c.HTTP.Token = "sk-live-abcdef" // the same value twice
	c.Tools.Web.AllowHosts = []string{"wiki.internal"}
	c.Tools.Web.Search = WebSearch{Provider: "searxng", URL: "https://searx:searx-pass@search.example.com", APIKey: "brave-secret-key"}
	return c
}

func TestSecrets(t *testing.T) {
	got := secretConfig().Secrets()
	want := []string{"123456:telegram-token", "brave-secret-key", "sk-live-abcdef", "discord-token", "proxy-pass", "searx-pass"}
	if !slices.Equal(got, want) {
		t.Errorf("Secrets() = %q, want %q (longest first, no duplicates)", got, want)
	}
	if got := validConfig().Secrets(); len(got) != 0 {
		t.Errorf("Secrets() without secrets = %q, want none", got)
	}
}

func TestRedactedHidesSecrets(t *testing.T) {
	c := secretConfig()
	secrets := c.Secrets()
	r := c.Redacted()

	for name, got := range map[string]string{
		"llm.api_key":              r.LLM.APIKey,
		"channels.telegram.token":  telegramOf(r).Token,
		"channels.discord.token":   discordOf(r).Token,
		"http.token":               r.HTTP.Token,
		"tools.web.search.api_key": r.Tools.Web.Search.APIKey,
	} {
		if got != "***" {
			t.Errorf("%s = %q, want ***", name, got)
		}
	}
	if want := "https://proxy-user:***@llm.example.com/v1"; r.LLM.BaseURL != want {
		t.Errorf("llm.base_url = %q, want %q", r.LLM.BaseURL, want)
	}
	if want := "https://searx:***@search.example.com"; r.Tools.Web.Search.URL != want {
		t.Errorf("tools.web.search.url = %q, want %q", r.Tools.Web.Search.URL, want)
	}

	// Nothing secret survives in any rendering `check` might use.
	out, err := yaml.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, rendering := range []string{string(out), fmt.Sprintf("%+v", *r)} {
		for _, s := range secrets {
			if strings.Contains(rendering, s) {
				t.Errorf("redacted output contains secret %q:\n%s", s, rendering)
			}
		}
	}

	// The original is untouched, and the copy shares no lists with it.
	if c.LLM.APIKey != "sk-live-abcdef" || c.LLM.BaseURL != "https://proxy-user:proxy-pass@llm.example.com/v1" {
		t.Errorf("Redacted changed the original: %+v", c.LLM)
	}
	telegramOf(r).AllowUsers[0] = "@mallory"
	r.LLM.FallbackModels[0] = "changed"
	r.Tools.Web.AllowHosts[0] = "evil.internal"
	if telegramOf(c).AllowUsers[0] != "@alice" || c.LLM.FallbackModels[0] != "small" || c.Tools.Web.AllowHosts[0] != "wiki.internal" {
		t.Error("Redacted shares list storage with the original")
	}
	if r.Agent != c.Agent || r.Log != c.Log || r.LLM.Model != c.LLM.Model {
		t.Error("Redacted changed settings that are not secret")
	}
}

func TestRedactedKeepsEmptySecretsEmpty(t *testing.T) {
	r := validConfig().Redacted()
	for name, got := range map[string]string{
		"llm.api_key": r.LLM.APIKey, "channels.telegram.token": telegramOf(r).Token,
		"channels.discord.token": discordOf(r).Token, "http.token": r.HTTP.Token,
	} {
		if got != "" {
			t.Errorf("%s = %q, want empty so check shows it is unset", name, got)
		}
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://api.openai.com/v1", "https://api.openai.com/v1"},
		{"https://user@host/v1", "https://user@host/v1"},
		{"https://user:pw@host:8443/v1?q=1", "https://user:***@host:8443/v1?q=1"},
		{"wss://a%40b:p%40ss@gw/", "wss://a%40b:***@gw/"},
		{"//user:pw@host/x", "//user:***@host/x"},
		{"not a url", "not a url"},
	}
	for _, tt := range tests {
		if got := redactURL(tt.in); got != tt.want {
			t.Errorf("redactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRedactedAndSecretsOnNil(t *testing.T) {
	var c *Config
	if c.Redacted() != nil || c.Secrets() != nil || c.Warnings() != nil {
		t.Error("nil Config: want nil results")
	}
}

func TestStoreDSNPasswordIsSecret(t *testing.T) {
	for _, c := range []struct {
		dsn, redacted string
		secrets       []string
	}{
		{"postgres://sb:pa%23ss@db.internal:5432/sb?sslmode=require",
			"postgres://sb:***@db.internal:5432/sb?sslmode=require", []string{"pa%23ss", "pa#ss"}},
		{"postgresql://sb@db/sb?sslmode=disable&password=qpass1",
			"postgresql://sb@db/sb?sslmode=disable&password=***", []string{"qpass1"}},
		{"postgres://sb:bad#pw@db:notaport/sb", // does not parse as a URL: masked all the same
			"postgres://sb:***@db:notaport/sb", []string{"bad#pw"}},
		{"host=db user=sb password=kv-pass dbname=sb",
			"host=db user=sb password=*** dbname=sb", []string{"kv-pass"}},
		{"host=db password = 'it\\'s secret' dbname=sb",
			"host=db password = *** dbname=sb", []string{"it's secret"}},
		{"postgres://sb@db/sb", "postgres://sb@db/sb", nil},
		{"host=db user=passwordless", "host=db user=passwordless", nil},
	} {
		cfg := validConfig()
		cfg.Store.Driver, cfg.Store.DSN = StorePostgres, c.dsn
		if got := cfg.Redacted().Store.DSN; got != c.redacted {
			t.Errorf("Redacted().Store.DSN of %q = %q, want %q", c.dsn, got, c.redacted)
		}
		got := cfg.Secrets()
		for _, s := range c.secrets {
			if !slices.Contains(got, s) {
				t.Errorf("Secrets() of %q = %q, want it to contain %q", c.dsn, got, s)
			}
		}
		if len(c.secrets) == 0 && len(got) != 0 {
			t.Errorf("Secrets() of %q = %q, want none", c.dsn, got)
		}
		out, err := yaml.Marshal(cfg.Redacted())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range got {
			if strings.Contains(string(out), s) {
				t.Errorf("redacted YAML of %q contains %q", c.dsn, s)
			}
		}
	}
}
