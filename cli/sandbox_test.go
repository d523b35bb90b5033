package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/gateway"
	"github.com/switchboard-gateway/switchboard/internal/sandbox"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
)

// doctor says, one line each, which protections confine command tools on
// this host: Landlock (present here and on CI), non-dumpable, a separate
// uid, the descendant sweep. Issue 29, finding 2.
func TestDoctorSaysWhichProtectionsAreActive(t *testing.T) {
	model := testkit.NewFakeLLM(t)
	dir := t.TempDir()
	cfg := config.Default()
	cfg.LLM.BaseURL, cfg.LLM.APIKey, cfg.LLM.Model = model.URL, "sk-sandbox", "fake-model"
	cfg.Store.Path = filepath.Join(dir, "switchboard.db")
	cfg.Skills.Dir = filepath.Join(dir, "skills")
	cfg.Tools.Command.Enabled, cfg.Tools.Command.Workspace = true, filepath.Join(dir, "workspace")
	path := filepath.Join(dir, "config.yaml")
	if err := cfgfile.WriteFile(path, cfg); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	RunWith(t.Context(), "dev", []string{"doctor", "--config", path}, Stdio{In: strings.NewReader(""), Out: &out, Err: &out}, gateway.Options{})
	report := out.String()
	abi := sandbox.LandlockABI()
	if abi == 0 {
		testkit.Missing(t, "this kernel has no Landlock; doctor says:\n%s", report)
	}
	uid := "the gateway runs as root; commands run as uid/gid 65534 (nobody)"
	if os.Geteuid() != 0 {
		uid = fmt.Sprintf("commands run as the gateway's uid %d", os.Geteuid())
	}
	for _, want := range []string{
		fmt.Sprintf("ok    sandbox   landlock: active (ABI %d: commands read the system folders and write only their working folder and a private home)", abi),
		"ok    sandbox   non-dumpable: active",
		"sandbox   separate uid: ", uid,
		"ok    sandbox   descendant sweep: active (a subreaper launcher kills every process a command started, setsid ones included)",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("doctor lacks %q:\n%s", want, report)
		}
	}
	// /tmp/TestX… is 0700: under root, the workspace is not reachable by
	// the commands' uid through its full path, and doctor says so.
	if os.Geteuid() == 0 && !strings.Contains(report, "does not let them reach "+cfg.Tools.Command.Workspace) {
		t.Errorf("doctor does not warn of the unreachable workspace:\n%s", report)
	}
}
