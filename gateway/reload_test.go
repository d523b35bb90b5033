package gateway

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/redact"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/skills"
)

// SIGHUP applies a changed skills.grants: a skill granted what it lacked is
// offered from the next turn, and the grants are not a restart key.
func TestReloadAppliesSkillGrants(t *testing.T) {
	dir := t.TempDir()
	skillsDir := filepath.Join(dir, "skills")
	if err := os.MkdirAll(skillsDir, 0o750); err != nil {
		t.Fatal(err)
	}
	weather := "name: weather\ndescription: Weather.\ndefine_tools:\n  - name: get_weather\n    kind: http\n    url: http://127.0.0.1:8081/w\n    headers: {X-Key: \"${WEATHER_API_KEY}\"}\n"
	if err := os.WriteFile(filepath.Join(skillsDir, "weather.yaml"), []byte(weather), 0o600); err != nil {
		t.Fatal(err)
	}
	old := config.Default()
	old.LLM.Model, old.Skills.Dir, old.Store.Path = "m", skillsDir, filepath.Join(dir, "switchboard.db")
	now := *old
	now.Skills.Grants = map[string]config.SkillGrant{"weather": {Hosts: []string{"127.0.0.1:8081"}, Env: []string{"WEATHER_API_KEY"}}}
	path := filepath.Join(dir, "config.yaml")
	if err := cfgfile.WriteFile(path, &now); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	w := skills.NewWatcher(os.DirFS(skillsDir), nil, skills.Env{}, nil)
	if _, ok := w.Current().Get("weather"); ok {
		t.Fatal("offered before the grant")
	}
	g := &Gateway{cfg: old, opts: Options{ConfigPath: path}, skills: w, redact: redact.New(nil), log: slog.New(slog.NewTextHandler(&logs, nil))}
	g.Reload()
	if _, ok := w.Current().Get("weather"); !ok {
		t.Fatalf("not offered after the reload: %v\n%s", w.Current().Withheld(), logs.String())
	}
	if strings.Contains(logs.String(), "only take effect after a restart") {
		t.Errorf("the grants are named as needing a restart:\n%s", logs.String())
	}
	if g.cfg.Skills.Grants["weather"].Hosts == nil {
		t.Error("the applied configuration lacks the grants")
	}
}
