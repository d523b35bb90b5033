package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
)

// /status shows operator matters (here a broken skill file) to the
// channel's admins only; any other allowed user sees their own chat's
// status.
func TestStatusShowsOperatorMattersToAdminsOnly(t *testing.T) {
	parallelBusy(t)
	tg := tgfake.New(t, tgToken)
	model := testkit.NewFakeLLM(t)
	script := newModelScript(model)
	dir := t.TempDir()
	cfg, err := config.Load(faultConfig(t, dir, tg, model, noRetries))
	if err != nil {
		t.Fatal(err)
	}
	config.Section[*telegram.Config](cfg).Admins = []string{strconv.FormatInt(fu1, 10)}
	cfgPath := cfgfile.Write(t, cfg)
	if err := os.MkdirAll(cfg.Skills.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	broken := "name: broken\ndescription: a skill with a typo\ninstructionz: do things\n"
	if err := os.WriteFile(filepath.Join(cfg.Skills.Dir, "broken.yaml"), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startFaultServe(t, cfgPath, tg, model, script)

	s.say(fu2, "/status")
	user := s.waitSent(t, fu2, 1)[0].Text
	s.say(fu1, "/status")
	admin := s.waitSent(t, fu1, 1)[0].Text
	if !strings.Contains(admin, "Skill problem") || !strings.Contains(admin, "broken.yaml") {
		t.Errorf("the admin's /status = %q, want the broken skill file", admin)
	}
	if strings.Contains(user, "Skill problem") || strings.Contains(user, "broken") {
		t.Errorf("a user's /status shows the operator's skill error: %q", user)
	}
	if !strings.HasPrefix(user, "Idle.") {
		t.Errorf("a user's /status = %q, want their own chat's status", user)
	}
}
