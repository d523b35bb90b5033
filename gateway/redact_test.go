package gateway

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
)

// Issue 29: the configuration's secrets are redacted from the start, and a
// secret a reload brings is redacted from then on (the old ones stay
// hidden: the running parts still hold them).
func TestReloadRefreshesRedaction(t *testing.T) {
	model := testkit.NewFakeLLM(t)
	dir := t.TempDir()
	c := config.Default()
	c.LLM.BaseURL, c.LLM.APIKey, c.LLM.Model = model.URL, "sk-first-key-0123456789", "fake-model"
	c.Store.Path = filepath.Join(dir, "sb.db")
	c.Skills.Dir = filepath.Join(dir, "skills")
	c.Learning.Enabled = false
	path := cfgfile.Write(t, c)
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Build(t.Context(), cfg, Options{ConfigPath: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	if got := g.redact.String("key sk-first-key-0123456789"); got != "key [redacted]" {
		t.Errorf("before reload: %q", got)
	}

	c.Tools.Web.Search.Provider, c.Tools.Web.Search.APIKey = "brave", "brave-second-key-0123456789"
	if err := cfgfile.WriteFile(path, c); err != nil {
		t.Fatal(err)
	}
	g.Reload()
	if got := g.redact.String("sk-first-key-0123456789 brave-second-key-0123456789"); got != "[redacted] [redacted]" {
		t.Errorf("after reload: %q", got)
	}
}

// The outbound guard's one allowance for Discord attachments: a configured
// api_base other than Discord's, exactly its host and port.
func TestOwnAPIHost(t *testing.T) {
	const discord = "https://discord.com/api/v9"
	tests := []struct {
		base string
		want []string
	}{
		{discord, nil},
		{"http://127.0.0.1:4567/api/v9", []string{"127.0.0.1:4567"}},
		{"https://proxy.internal/api/v9", []string{"proxy.internal:443"}},
		{"http://[::1]:80/api", []string{"[::1]:80"}},
		{"::not a url", nil},
	}
	for _, tt := range tests {
		if got := ownAPIHost(tt.base, discord); !slices.Equal(got, tt.want) {
			t.Errorf("ownAPIHost(%q) = %q, want %q", tt.base, got, tt.want)
		}
	}
}
