package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/store"
)

// serviceConfig is deploy/config.yaml's shape: the secrets come from the
// unit's EnvironmentFile, which an operator's shell does not have.
const serviceConfig = `llm:
  api_key: ${OPENAI_API_KEY}
  model: ${OPENAI_MODEL}
store:
  path: %DB%
channels:
  telegram:
    enabled: true
    token: ${TELEGRAM_BOT_TOKEN}
    pairing: true
http:
  listen: 127.0.0.1:0
  token: ${SWITCHBOARD_HTTP_TOKEN}
`

// The admin commands on the store (pairing, schedule, skills proposals,
// backup) run with the configuration and the store alone: without the
// model's and the bots' secrets, as the service user without its unit's
// EnvironmentFile. serve and check still need them.
func TestAdminCommandsNeedOnlyTheStore(t *testing.T) {
	for _, k := range []string{"OPENAI_API_KEY", "OPENAI_MODEL", "TELEGRAM_BOT_TOKEN", "SWITCHBOARD_HTTP_TOKEN", "OPENAI_BASE_URL"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "switchboard.db")
	cfgPath := writeConfig(t, strings.ReplaceAll(serviceConfig, "%DB%", db))
	st, err := store.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.PairingCode(t.Context(), "telegram", "42", "ada", "ABCD2345", time.Hour); err != nil {
		t.Fatal(err)
	}
	st.Close()

	for _, tt := range []struct {
		args    []string
		code    int
		wantOut string
	}{
		{[]string{"pairing", "list"}, 0, "ABCD2345  telegram user 42 @ada"},
		{[]string{"pairing", "approve", "ABCD2345"}, 0, "approved telegram user 42"},
		{[]string{"schedule", "list"}, 0, ""},
		{[]string{"skills", "proposals"}, 0, ""},
		{[]string{"backup", filepath.Join(dir, "copy.db")}, 0, ""},
		{[]string{"check"}, 2, "llm.model"},
	} {
		var out, errb bytes.Buffer
		code := run(t.Context(), append([]string{"--config", cfgPath}, tt.args...), strings.NewReader(""), &out, &errb)
		if code != tt.code || !strings.Contains(out.String()+errb.String(), tt.wantOut) {
			t.Errorf("switchboard %v = %d, want %d with %q\nstdout: %s\nstderr: %s", tt.args, code, tt.code, tt.wantOut, out.String(), errb.String())
		}
	}
	st, err = store.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if ok, err := st.IsApproved(t.Context(), "telegram", "42"); err != nil || !ok {
		t.Errorf("user 42 approved = %v, %v; want approved", ok, err)
	}
}

// Run as root, a command on an SQLite store in another user's directory
// (the service's state directory) is refused before it creates root-owned
// files there, and says how to run it as that user.
func TestAdminCommandRefusedAsRootInTheServiceDir(t *testing.T) {
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	} // else the directory is this (non-root) user's already
	prev := euid
	euid = func() int { return 0 }
	t.Cleanup(func() { euid = prev })
	cfgPath := storeConfig(t, filepath.Join(dir, "switchboard.db"), nil)
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"--config", cfgPath, "pairing", "list"}, strings.NewReader(""), &out, &errb)
	if code != ExitConfig || !strings.Contains(errb.String(), "refusing to run pairing as root: "+dir+" belongs to") ||
		!strings.Contains(errb.String(), "sudo -u ") {
		t.Errorf("pairing list as root = %d\nstderr: %s", code, errb.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files were created in %s: %v", dir, entries)
	}
}
