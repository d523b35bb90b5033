package gateway

import (
	"path/filepath"
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
