package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/store"
)

// run is the command line as main runs it, on these streams.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return Run(ctx, "dev", args, Stdio{In: stdin, Out: stdout, Err: stderr})
}

// storeConfig writes a configuration with model m and the database at db,
// changed by more (if not nil).
func storeConfig(t *testing.T, db string, more func(*config.Config)) string {
	t.Helper()
	cfg := config.Default()
	cfg.LLM.Model, cfg.Store.Path = "m", db
	if more != nil {
		more(cfg)
	}
	return cfgfile.Write(t, cfg)
}

// writeConfig writes a configuration file as is (for what the typed
// builder cannot write: mistakes, environment references).
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCommandLine(t *testing.T) {
	bad := writeConfig(t, "llm:\n  model: m\nchanels:\n  telegram: {}\n")
	notDir := writeConfig(t, "not a directory") // stands where the store's directory should be
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"version", []string{"version"}, nil, 0, "switchboard dev", ""},
		{"--version", []string{"--version"}, nil, 0, "switchboard dev", ""},
		{"-v", []string{"-v"}, nil, 0, "switchboard dev", ""},
		{"--config before the command", []string{"--config", storeConfig(t, filepath.Join(t.TempDir(), "x.db"), nil), "check"}, nil, 0, "configuration OK", ""},
		{"--config before and an argument after", []string{"--config=" + storeConfig(t, filepath.Join(t.TempDir(), "x.db"), nil), "schedule", "list"}, nil, 0, "no scheduled jobs", ""},
		{"unknown flag", []string{"--colour", "check"}, nil, 2, "", "flag provided but not defined: -colour"},
		{"an argument the command does not take", []string{"check", "extra"}, nil, 2, "", `unexpected argument "extra"`},
		{"unknown command", []string{"fly"}, nil, 2, "", `unknown command "fly"`},
		{"malformed config names file and line", []string{"check", "--config", bad}, nil, 2, "", bad + ":3"},
		{"missing explicit config", []string{"check", "--config", "/nonexistent/c.yaml"}, nil, 2, "", "/nonexistent/c.yaml"},
		{"check with env only", []string{"check", "--config", ""}, map[string]string{"OPENAI_MODEL": "m1", "OPENAI_API_KEY": "sk-secret-value"}, 0, "ok    model     m1 at", ""},
		{"check on postgres shows the replica", []string{"check", "--config", writeConfig(t, "llm:\n  model: m\nstore:\n  driver: postgres\n  dsn: postgres://sb:${PGPW}@127.0.0.1:5432/sb\ncluster:\n  replica_id: gw-7\n  lease_ttl: 20s\n")},
			map[string]string{"PGPW": "sk-secret-value"}, 0, "ok    cluster   replica gw-7, leases for 20s, polling every 250ms", ""},
		{"serve without channels", []string{"serve", "--config", storeConfig(t, filepath.Join(t.TempDir(), "x.db"), func(c *config.Config) { c.HTTP.Listen = "" })},
			nil, 2, "", "no channel is enabled"},
		{"serve where the store's directory cannot be created", []string{"serve", "--config", storeConfig(t, filepath.Join(notDir, "x.db"), func(c *config.Config) { c.HTTP.Listen = "127.0.0.1:0" })},
			nil, 1, "", "cannot create the directory " + notDir + ": " + notDir + " is a file, not a directory: move store.path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(t.TempDir()) // no ./config.yaml
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var out, errb bytes.Buffer
			code := run(context.Background(), tt.args, strings.NewReader(""), &out, &errb)
			if code != tt.wantCode || !strings.Contains(out.String(), tt.wantOut) || !strings.Contains(errb.String(), tt.wantErr) {
				t.Fatalf("code %d (want %d)\nstdout: %s\nstderr: %s", code, tt.wantCode, out.String(), errb.String())
			}
			if strings.Contains(out.String()+errb.String(), "sk-secret-value") {
				t.Fatal("the API key was printed")
			}
		})
	}
}

func TestPairingCommand(t *testing.T) {
	db := filepath.Join(t.TempDir(), "p.db")
	cfg := storeConfig(t, db, nil)
	st, err := store.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.PairingCode(t.Context(), "telegram", "42", "ada", "ABCD2345", time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.PairingCode(t.Context(), "telegram", "77", "eve", "EFGH6789", time.Hour); err != nil {
		t.Fatal(err)
	}
	st.Close()
	steps := []struct {
		args     []string
		code     int
		out, err string
	}{
		{[]string{"pairing", "list"}, 0, "ABCD2345  telegram user 42 @ada", ""},
		{[]string{"pairing", "approve", "WRONG"}, 1, "", `no pairing code "WRONG"`},
		{[]string{"pairing", "approve", "ABCD2345"}, 0, "approved telegram user 42", ""},
		{[]string{"pairing", "deny", "ABCD2345"}, 1, "", `no pending pairing code "ABCD2345"`},
		{[]string{"pairing", "deny", "EFGH6789"}, 0, "denied telegram user 77", ""},
		{[]string{"pairing", "approve", "EFGH6789"}, 1, "", "has expired"},
		{[]string{"pairing", "list"}, 0, "no pending pairing requests", ""},
		{[]string{"pairing", "revoke", "telegram", "42"}, 0, "revoked telegram user 42", ""},
		{[]string{"pairing", "revoke", "telegram", "42"}, 1, "", "was not approved by pairing"},
		{[]string{"pairing"}, 2, "", "usage: switchboard pairing"},
	}
	for _, s := range steps {
		var out, errb bytes.Buffer
		code := run(t.Context(), append(s.args, "--config", cfg), strings.NewReader(""), &out, &errb)
		if code != s.code || !strings.Contains(out.String(), s.out) || !strings.Contains(errb.String(), s.err) {
			t.Fatalf("%v: code %d\nstdout %s\nstderr %s", s.args, code, out.String(), errb.String())
		}
	}
}

// The init flags' lines of the usage text come from the channel
// definitions; they must read as they always have.
func TestUsageListsInitFlagsOfEveryChannel(t *testing.T) {
	want := `  --model-url URL  --api-key KEY  --model NAME          the model server
  --telegram-token TOKEN  --telegram-user ID            Telegram (no ID: pairing)
  --discord-token TOKEN  --discord-user ID              Discord
  --slack-token TOKEN  --slack-user ID                  Slack, --slack-app-token TOKEN
  --whatsapp-token TOKEN  --whatsapp-user ID            WhatsApp, --whatsapp-phone-number-id ID,
                                                        --whatsapp-app-secret TOKEN,
                                                        --whatsapp-verify-token TOKEN
  --matrix-token TOKEN  --matrix-user ID                Matrix, --matrix-bot-id ID
  --telegram-api-endpoint URL  --discord-api-base URL  --slack-api-url URL  --whatsapp-api-base URL  --matrix-homeserver URL
                                                        other API servers
  --http-listen ADDR   the HTTP API and dashboard (default 127.0.0.1:8080)
  --non-interactive    ask nothing (flags, then OPENAI_*, TELEGRAM_BOT_TOKEN,
                       DISCORD_BOT_TOKEN, SLACK_BOT_TOKEN, SLACK_APP_TOKEN,
                       WHATSAPP_ACCESS_TOKEN, WHATSAPP_APP_SECRET,
                       WHATSAPP_VERIFY_TOKEN, MATRIX_ACCESS_TOKEN)
  --force              replace an existing file
`
	if !strings.Contains(usage(), want) {
		t.Errorf("usage:\n%s\nwant the init flags:\n%s", usage(), want)
	}
}
