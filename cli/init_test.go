package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels/discord"
	"github.com/switchboard-gateway/switchboard/channels/slack"
	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/channels/whatsapp"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/discordfake"
	"github.com/switchboard-gateway/switchboard/internal/slackfake"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
	"github.com/switchboard-gateway/switchboard/internal/wafake"
)

const (
	initTgToken = "7305551111:AAF-init-Secret_0123456789abcdef"
	initAPIKey  = "sk-init-secret-key-0123"
)

// initEnv clears the environment init reads, and runs the test in an
// empty working directory.
func initEnv(t *testing.T) string {
	t.Helper()
	for _, k := range []string{"OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET", "WHATSAPP_ACCESS_TOKEN", "WHATSAPP_APP_SECRET", "WHATSAPP_VERIFY_TOKEN", "SWITCHBOARD_HTTP_TOKEN"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	t.Chdir(dir)
	return dir
}

// noSecrets fails the test if text shows any of the secrets.
func noSecrets(t *testing.T, what, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s shows the secret %q:\n%s", what, s, text)
		}
	}
}

// A newcomer's first run, as the issue asks: `init --non-interactive`
// against the model server and Telegram writes a private file that `check`
// accepts and `serve` runs, answering a Telegram message from the user it
// admits; the database is created beside the file.
func TestInitNonInteractiveServes(t *testing.T) {
	initEnv(t)
	model := testkit.NewFakeLLM(t)
	model.SetDefault(&testkit.Reply{Text: "hello from the model"})
	tg := tgfake.New(t, initTgToken)
	dir := t.TempDir()
	path := filepath.Join(dir, "conf", "config.yaml") // a directory init creates

	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"init", "--non-interactive", "--config", path,
		"--model-url", model.URL, "--model", "fake-model", "--api-key", initAPIKey,
		"--telegram-token", initTgToken, "--telegram-api-endpoint", tg.URL, "--telegram-user", "4242",
		"--http-listen", "127.0.0.1:0"}, strings.NewReader(""), &out, &errb)
	if code != ExitOK {
		t.Fatalf("init: exit %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}
	noSecrets(t, "init's output", out.String()+errb.String(), initAPIKey, initTgToken)
	for _, want := range []string{"ok  model server", "ok  Telegram token", "wrote " + path + " (mode 0600)", "switchboard serve --config " + path,
		"the dashboard while serve runs"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("init's output lacks %q:\n%s", want, out.String())
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the file's mode is %v, want 0600", fi.Mode().Perm())
	}
	body, _ := os.ReadFile(path)
	if strings.Contains(string(body), "pairing") {
		t.Errorf("with the user's id, pairing stays off:\n%s", body)
	}
	if cfg, err := config.Load(path); err != nil || !slices.Equal(config.Section[*telegram.Config](cfg).Admins, config.Section[*telegram.Config](cfg).AllowUsers) ||
		len(config.Section[*telegram.Config](cfg).Admins) != 1 {
		t.Errorf("the operator's own id is not the admin: %v\n%s", err, body)
	}

	out.Reset()
	errb.Reset()
	if code := run(t.Context(), []string{"check", "--config", path}, strings.NewReader(""), &out, &errb); code != ExitOK ||
		!strings.Contains(out.String(), "configuration OK") || !strings.Contains(out.String(), "telegram  enabled, 1 allowed users") {
		t.Fatalf("check: exit %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}
	noSecrets(t, "check's output", out.String()+errb.String(), initAPIKey, initTgToken)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var serveErr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", path}, strings.NewReader(""), &out, &serveErr)
	}()
	tg.PushText(4242, 4242, "ada", "hi")
	wctx, wcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer wcancel()
	sent, err := tg.WaitSent(wctx, 1)
	cancel()
	code = <-done
	if err != nil {
		t.Fatalf("no reply in Telegram (%v); serve's log:\n%s", err, serveErr.String())
	}
	if sent[0].Text != "hello from the model" || code != ExitOK {
		t.Fatalf("serve answered %q and exited %d; its log:\n%s", sent[0].Text, code, serveErr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "conf", "switchboard.db")); err != nil {
		t.Errorf("the database is not beside the configuration: %v", err)
	}
	noSecrets(t, "serve's log", serveErr.String(), initAPIKey, initTgToken)
	if m := regexp.MustCompile(`dashboard=http://127\.0\.0\.1:([0-9]+)/`).FindStringSubmatch(serveErr.String()); m == nil || m[1] == "0" {
		t.Errorf("serve's start-up lines do not give the dashboard's URL:\n%s", serveErr.String())
	}
}

// init's next steps name the binary as it was run (./switchboard from a
// clone), and the dashboard.
func TestInitNextStepsNameTheBinary(t *testing.T) {
	for _, tt := range []struct{ arg0, want string }{
		{"switchboard", "switchboard"},
		{"./switchboard", "./switchboard"},
		{"/usr/local/bin/switchboard", "/usr/local/bin/switchboard"},
		{"/tmp/go-build1/b001/cli.test", "switchboard"},
	} {
		if got := commandName(tt.arg0); got != tt.want {
			t.Errorf("commandName(%q) = %q, want %q", tt.arg0, got, tt.want)
		}
	}
	initEnv(t)
	prev := programName
	programName = "./switchboard"
	t.Cleanup(func() { programName = prev })
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"init", "--non-interactive", "--no-check", "--model", "m", "--telegram-token", "1:x"},
		strings.NewReader(""), &out, &errb); code != ExitOK {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	for _, want := range []string{"\n  ./switchboard check   ", "\n  ./switchboard serve   ", "./switchboard pairing approve CODE",
		"\n  http://127.0.0.1:8080/   the dashboard while serve runs (no sign-in on loopback)\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("next steps lack %q:\n%s", want, out.String())
		}
	}
}

// freeURL is a model server URL on 127.0.0.1 where nothing listens.
func freeURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/v1"
}

// Each failed check is named, with its fix, shows no secret, and leaves
// nothing written; --no-check writes without checking.
func TestInitChecks(t *testing.T) {
	model := testkit.NewFakeLLM(t)
	tg := tgfake.New(t, initTgToken)
	dc := discordfake.New(t)
	down := freeURL(t)
	const wrongTg, wrongDc = "7305551111:AAF-wrong-Secret_xx", "wrong-discord-token-xyz"
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  []string
	}{
		{"all good", []string{"--model-url", model.URL, "--telegram-token", initTgToken, "--discord-token", dc.Token}, ExitOK, nil},
		{"model server unreachable", []string{"--model-url", down}, ExitFail,
			[]string{"switchboard init: model server: " + down, "fix: check llm.base_url", "--model-url", "nothing was written"}},
		{"model not offered", []string{"--model-url", model.URL, "--model", "gpt-9"}, ExitFail,
			[]string{`does not offer model "gpt-9" (it offers fake-model)`, "nothing was written"}},
		{"bad Telegram token", []string{"--model-url", model.URL, "--telegram-token", wrongTg}, ExitFail,
			[]string{"switchboard init: Telegram token: getMe: the token was rejected (status 401)", "@BotFather", "--telegram-token"}},
		{"bad Discord token", []string{"--model-url", model.URL, "--discord-token", wrongDc}, ExitFail,
			[]string{"switchboard init: Discord token: /users/@me: the token was rejected (status 401)", "--discord-token"}},
		{"no check", []string{"--model-url", down, "--telegram-token", wrongTg, "--no-check"}, ExitOK, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := initEnv(t)
			args := append([]string{"init", "--non-interactive", "--model", "fake-model", "--api-key", initAPIKey,
				"--telegram-api-endpoint", tg.URL, "--discord-api-base", dc.APIBase()}, tt.args...)
			var out, errb bytes.Buffer
			code := run(t.Context(), args, strings.NewReader(""), &out, &errb)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, out.String(), errb.String())
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(errb.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, errb.String())
				}
			}
			noSecrets(t, "the output", out.String()+errb.String(), initAPIKey, initTgToken, wrongTg, wrongDc, dc.Token)
			_, err := os.Stat(filepath.Join(dir, "config.yaml"))
			if written := err == nil; written != (tt.wantCode == ExitOK) {
				t.Errorf("config.yaml written: %v (exit %d)", written, code)
			}
		})
	}
}

// init never replaces a file without --force; with it, the new file
// replaces the old one, private whatever the old mode was.
func TestInitRefusesToOverwrite(t *testing.T) {
	dir := initEnv(t)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte("# mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"init", "--non-interactive", "--no-check", "--model-url", "http://127.0.0.1:1/v1", "--model", "m"}
	var out, errb bytes.Buffer
	code := run(t.Context(), args, strings.NewReader(""), &out, &errb)
	if body, _ := os.ReadFile(path); code != ExitConfig || string(body) != "# mine\n" ||
		!strings.Contains(errb.String(), "config.yaml already exists; not overwriting it (run again with --force") {
		t.Fatalf("init over an existing file: exit %d, file now %q\nstderr: %s", code, body, errb.String())
	}
	errb.Reset()
	if code := run(t.Context(), append(args, "--force"), strings.NewReader(""), &out, &errb); code != ExitOK {
		t.Fatalf("init --force: exit %d\nstderr: %s", code, errb.String())
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := os.ReadFile(path)
	if fi.Mode().Perm() != 0o600 || !strings.Contains(string(body), `model: "m"`) {
		t.Fatalf("after --force: mode %v\n%s", fi.Mode().Perm(), body)
	}
}

// What the flags and the environment become in the file: secrets from the
// environment stay there (the file refers to them), pairing is on without
// the user's id, a "$" survives; and what init refuses as bad usage.
func TestInitWrites(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		wantCode int
		want     []string // in the file, or on stderr when init fails
		check    func(t *testing.T, cfg *config.Config)
	}{
		{"secrets from the environment", map[string]string{"OPENAI_API_KEY": "sk-env-secret", "TELEGRAM_BOT_TOKEN": "1:env-token", "OPENAI_MODEL": "env-model"},
			nil, ExitOK, []string{`api_key: "${OPENAI_API_KEY}"`, `token: "${TELEGRAM_BOT_TOKEN}"`, `model: "env-model"`, "allow_users: []", "pairing: true"},
			func(t *testing.T, cfg *config.Config) {
				if cfg.LLM.APIKey != "sk-env-secret" || config.Section[*telegram.Config](cfg).Token != "1:env-token" || !config.Section[*telegram.Config](cfg).Pairing {
					t.Errorf("loaded back: %+v", config.Section[*telegram.Config](cfg))
				}
			}},
		{"flags win, ids, a dollar", map[string]string{"OPENAI_API_KEY": "sk-env-secret"},
			[]string{"--model", "m", "--api-key", "sk-$HOME-x", "--discord-token", "d.tok", "--discord-user", "310000000000000001, 310000000000000002"},
			ExitOK, []string{`api_key: "sk-$$HOME-x"`, `allow_users: ["310000000000000001", "310000000000000002"]`},
			func(t *testing.T, cfg *config.Config) {
				if cfg.LLM.APIKey != "sk-$HOME-x" || config.Section[*telegram.Config](cfg).Enabled || !slices.Equal(config.Section[*discord.Config](cfg).AllowUsers, []string{"310000000000000001", "310000000000000002"}) {
					t.Errorf("loaded back: key %q, discord %+v", cfg.LLM.APIKey, config.Section[*discord.Config](cfg))
				}
			}},
		{"HTTP beyond loopback gets a long random token", nil, []string{"--model", "m", "--http-listen", "0.0.0.0:8080"},
			ExitOK, []string{`listen: "0.0.0.0:8080"`, "  token: \""},
			func(t *testing.T, cfg *config.Config) {
				if len(cfg.HTTP.Token) < 32 || strings.Trim(cfg.HTTP.Token, "0123456789abcdef") != "" {
					t.Errorf("http.token %q: want at least 32 random hex characters", cfg.HTTP.Token)
				}
				if err := cfg.Validate(); err != nil {
					t.Errorf("the file does not validate: %v", err)
				}
			}},
		{"HTTP token from the environment", map[string]string{"SWITCHBOARD_HTTP_TOKEN": "env-http-token-0123456789abcdef"},
			[]string{"--model", "m", "--http-listen", ":8080"}, ExitOK, []string{`token: "${SWITCHBOARD_HTTP_TOKEN}"`},
			func(t *testing.T, cfg *config.Config) {
				if cfg.HTTP.Token != "env-http-token-0123456789abcdef" {
					t.Errorf("http.token %q", cfg.HTTP.Token)
				}
			}},
		{"HTTP on loopback writes no token", nil, []string{"--model", "m", "--http-listen", "127.0.0.1:9090"},
			ExitOK, []string{`listen: "127.0.0.1:9090"`},
			func(t *testing.T, cfg *config.Config) {
				if cfg.HTTP.Token != "" {
					t.Errorf("http.token %q on loopback", cfg.HTTP.Token)
				}
			}},
		{"no model", nil, nil, ExitConfig, []string{"--model is required"}, nil},
		{"a user id that is not one", nil, []string{"--model", "m", "--telegram-user", "@ada"}, ExitConfig, []string{`--telegram-user: "@ada" is not a numeric user id`}, nil},
		{"a model URL that is not one", nil, []string{"--model", "m", "--model-url", "localhost:11434"}, ExitConfig, []string{"llm.base_url"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := initEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var out, errb bytes.Buffer
			code := run(t.Context(), append([]string{"init", "--non-interactive", "--no-check"}, tt.args...), strings.NewReader(""), &out, &errb)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstderr: %s", code, tt.wantCode, errb.String())
			}
			got := errb.String()
			if code == ExitOK {
				body, _ := os.ReadFile(filepath.Join(dir, "config.yaml"))
				got = string(body)
				cfg, err := config.Load(filepath.Join(dir, "config.yaml"))
				if err == nil {
					err = cfg.Validate()
				}
				if err != nil {
					t.Fatalf("the file does not load: %v\n%s", err, body)
				}
				tt.check(t, cfg)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("lacks %q:\n%s", w, got)
				}
			}
			noSecrets(t, "the output", out.String()+errb.String(), "sk-env-secret", "env-token", "sk-$HOME-x", "d.tok")
		})
	}
}

// Slack's token goes to bot_token and its member ids (U…) are taken; the
// app token comes from SLACK_APP_TOKEN, and doctor's check of both runs.
func TestInitSlack(t *testing.T) {
	initEnv(t)
	model := testkit.NewFakeLLM(t)
	f := slackfake.New(t)
	t.Setenv("SLACK_APP_TOKEN", slackfake.AppToken)
	path := filepath.Join(t.TempDir(), "config.yaml")
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"init", "--non-interactive", "--config", path,
		"--model-url", model.URL, "--model", "fake-model",
		"--slack-token", slackfake.BotToken, "--slack-api-url", f.APIURL(), "--slack-user", "U0ADA"}, strings.NewReader(""), &out, &errb)
	if code != ExitOK {
		t.Fatalf("init: exit %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}
	noSecrets(t, "init's output", out.String()+errb.String(), slackfake.BotToken, slackfake.AppToken)
	if !strings.Contains(out.String(), "ok  Slack token") {
		t.Errorf("no Slack check:\n%s", out.String())
	}
	body, _ := os.ReadFile(path)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("the file does not load: %v\n%s", err, body)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the file is not valid: %v\n%s", err, body)
	}
	sc := config.Section[*slack.Config](cfg)
	if sc.BotToken != slackfake.BotToken || sc.AppToken != slackfake.AppToken || !slices.Equal(sc.AllowUsers, []string{"U0ADA"}) || sc.Pairing {
		t.Errorf("section = %+v\n%s", sc, body)
	}
	if code := run(t.Context(), []string{"init", "--non-interactive", "--config", filepath.Join(t.TempDir(), "c.yaml"),
		"--model-url", model.URL, "--model", "fake-model", "--slack-token", slackfake.BotToken, "--slack-user", "42"},
		strings.NewReader(""), &out, &errb); code == ExitOK {
		t.Error("a numeric Slack user id was taken")
	}
}

// Interactive mode through a pipe: each part is checked as it is
// answered and asked again when the check fails; secrets are never shown;
// a flag answers its question.
func TestInitInteractive(t *testing.T) {
	dir := initEnv(t)
	model := testkit.NewFakeLLM(t)
	tg := tgfake.New(t, initTgToken)
	answers := strings.Join([]string{
		model.URL,                        // model server URL
		initAPIKey,                       // API key
		"no-such-model",                  // model: not offered, so the model alone is asked again
		"",                               // model: the one offered
		"7305551111:AAF-wrong-Secret_xx", // Telegram token: rejected, asked again
		initTgToken,                      // Telegram token
		"@ada",                           // user id: not digits, asked again
		"",                               // no id: pairing
		"",                               // Discord: skipped
		"",                               // Slack: skipped
		"",                               // WhatsApp: skipped
		"",                               // Matrix: skipped
		"",                               // a sign-in token for the dashboard: yes
	}, "\n") + "\n"
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"init", "--telegram-api-endpoint", tg.URL}, strings.NewReader(answers), &out, &errb)
	if code != ExitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}
	noSecrets(t, "the conversation", out.String()+errb.String(), initAPIKey, initTgToken, "AAF-wrong-Secret_xx")
	for _, want := range []string{
		"Model server URL (OpenAI-compatible; for Ollama: http://localhost:11434/v1) [https://api.openai.com/v1]: \n",
		"API key (Enter for none): ",
		"  the server offers: fake-model\nModel [fake-model]: ",
		`  the server does not offer "no-such-model"; it offers: fake-model` + "\nModel [fake-model]: ",
		"ok: model server",
		"Telegram token: getMe: the token was rejected (status 401)",
		"ok: Telegram token",
		`user id: "@ada" is not a numeric user id`,
		"Discord bot token from the developer portal, your application → Bot (Enter to skip): ",
		"This writes config.yaml.",
		"wrote config.yaml (mode 0600)",
		"switchboard pairing approve CODE",
		"Protect the dashboard (http://127.0.0.1:8080/) and the chat API with a sign-in token? y/n [y]: ",
		"  http://127.0.0.1:8080/   the dashboard while serve runs (sign in with http.token from config.yaml)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the conversation lacks %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(out.String(), "Model server URL"); n != 1 {
		t.Errorf("the model server URL was asked %d times; a model the server does not offer asks the model alone again", n)
	}
	cfg, err := config.Load(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.Model != "fake-model" || cfg.LLM.APIKey != initAPIKey || config.Section[*telegram.Config](cfg).Token != initTgToken ||
		!config.Section[*telegram.Config](cfg).Pairing || len(config.Section[*telegram.Config](cfg).AllowUsers) != 0 || config.Section[*discord.Config](cfg).Enabled {
		t.Errorf("the file holds %+v %+v", cfg.LLM, cfg.Channels)
	}
	if len(cfg.HTTP.Token) < 32 || strings.Trim(cfg.HTTP.Token, "0123456789abcdef") != "" || cfg.HTTP.Listen != "127.0.0.1:8080" {
		t.Errorf("http %+v: want the default listen with a random token", cfg.HTTP)
	}

	// check accepts it, and says nothing of an empty allowlist: pairing
	// is how people get in.
	out.Reset()
	if code := run(t.Context(), []string{"check"}, strings.NewReader(""), &out, &errb); code != ExitOK || strings.Contains(out.String(), "warning") {
		t.Fatalf("check: exit %d\n%s", code, out.String())
	}

	// Ctrl-C (the context ends) while a question waits writes nothing.
	t.Chdir(t.TempDir())
	errb.Reset()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	never, _ := io.Pipe() // an answer that never comes
	if code := run(ctx, []string{"init"}, never, &out, &errb); code != ExitFail ||
		!strings.Contains(errb.String(), "switchboard init: interrupted; nothing was written") {
		t.Fatalf("interrupted: exit %d\nstderr: %s", code, errb.String())
	}
	if _, err := os.Stat("config.yaml"); err == nil {
		t.Fatal("a file was written")
	}

	// Input that ends early writes nothing.
	t.Chdir(t.TempDir())
	errb.Reset()
	if code := run(t.Context(), []string{"init"}, strings.NewReader(model.URL+"\n"), &out, &errb); code != ExitFail ||
		!strings.Contains(errb.String(), "the input ended before every question was answered; nothing was written") {
		t.Fatalf("early end: exit %d\nstderr: %s", code, errb.String())
	}
	if _, err := os.Stat("config.yaml"); err == nil {
		t.Fatal("a file was written")
	}
}

// An init flag on another command is a usage error.
func TestInitFlagsOnlyForInit(t *testing.T) {
	initEnv(t)
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"check", "--force"}, strings.NewReader(""), &out, &errb); code != ExitConfig ||
		!strings.Contains(errb.String(), "--force is a flag of init, not of check") {
		t.Fatalf("exit %d\nstderr: %s", code, errb.String())
	}
}

// Slack's app-level token is asked after its bot token, checked with it
// (apps.connections.open) and written to the file; the flag answers it.
func TestInitSlackAsksTheAppToken(t *testing.T) {
	dir := initEnv(t)
	model := testkit.NewFakeLLM(t)
	f := slackfake.New(t)
	answers := strings.Join([]string{
		model.URL, "", "fake-model", // the model
		"",                 // Telegram: skipped
		"",                 // Discord: skipped
		slackfake.BotToken, // Slack bot token
		slackfake.AppToken, // Slack app-level token
		"U0ADA",            // member id
		"",                 // WhatsApp: skipped
		"",                 // Matrix: skipped
		"n",                // no sign-in token
	}, "\n") + "\n"
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"init", "--slack-api-url", f.APIURL()}, strings.NewReader(answers), &out, &errb)
	if code != ExitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}
	noSecrets(t, "the conversation", out.String()+errb.String(), slackfake.BotToken, slackfake.AppToken)
	if !strings.Contains(out.String(), "Slack app-level token (xapp-…, scope connections:write) for Socket Mode") ||
		!strings.Contains(out.String(), "ok: Slack token") {
		t.Errorf("the conversation lacks the app token's question or the check:\n%s", out.String())
	}
	if f.Calls("apps.connections.open") == 0 {
		t.Error("the app token was not checked")
	}
	cfg, err := config.Load(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if sc := config.Section[*slack.Config](cfg); sc.AppToken != slackfake.AppToken || sc.BotToken != slackfake.BotToken {
		t.Errorf("the file holds %+v", sc)
	}

	// The flag answers the question, and the file takes its value.
	path := filepath.Join(t.TempDir(), "flag.yaml")
	out.Reset()
	if code := run(t.Context(), []string{"init", "--non-interactive", "--config", path, "--model-url", model.URL, "--model", "fake-model",
		"--slack-token", slackfake.BotToken, "--slack-app-token", slackfake.AppToken, "--slack-api-url", f.APIURL(), "--slack-user", "U0ADA"},
		strings.NewReader(""), &out, &errb); code != ExitOK {
		t.Fatalf("init with --slack-app-token: exit %d\n%s%s", code, out.String(), errb.String())
	}
	cfg, err = config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if sc := config.Section[*slack.Config](cfg); sc.AppToken != slackfake.AppToken {
		t.Errorf("--slack-app-token: the file holds %+v", sc)
	}
}

// WhatsApp's access token goes to access_token; the phone number id is
// asked (and shown, not a secret), the app secret and verify token like
// secrets; the numbers are E.164; doctor's check runs against the fake,
// and the next steps name the webhook URL to register.
func TestInitWhatsApp(t *testing.T) {
	dir := initEnv(t)
	model := testkit.NewFakeLLM(t)
	f := wafake.New(t)
	answers := strings.Join([]string{
		model.URL, "", "fake-model", // the model
		"",                   // Telegram: skipped
		"",                   // Discord: skipped
		"",                   // Slack: skipped
		wafake.AccessToken,   // WhatsApp access token
		"123",                // phone number id: not the fake's, so the check fails and all is asked again
		wafake.AppSecret,     // app secret
		wafake.VerifyToken,   // verify token
		"",                   // the access token again: the one given before
		wafake.PhoneNumberID, // phone number id
		"",                   // app secret: the one given before
		"",                   // verify token: the one given before
		"ada",                // not a number: asked again
		"+15551234567",       // the operator's number
		"",                   // Matrix: skipped
		"n",                  // no sign-in token
	}, "\n") + "\n"
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"init", "--whatsapp-api-base", f.APIBase()}, strings.NewReader(answers), &out, &errb)
	if code != ExitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}
	noSecrets(t, "the conversation", out.String()+errb.String(), wafake.AccessToken, wafake.AppSecret, wafake.VerifyToken)
	for _, want := range []string{
		"WhatsApp phone number id (digits, under WhatsApp → API Setup; not the number): ",
		"WhatsApp phone number id (digits, under WhatsApp → API Setup; not the number) [123]: ",
		"Meta App Secret (App settings → Basic), which signs the webhook (Enter: the one given before, - to skip): ",
		"WhatsApp token: phone number 123: not found",
		"ok: WhatsApp token",
		`user id: "ada" is not a user id`,
		"register https://YOUR-HOST/whatsapp/webhook as the webhook's Callback",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the conversation lacks %q:\n%s", want, out.String())
		}
	}
	body, _ := os.ReadFile(filepath.Join(dir, "config.yaml"))
	cfg, err := config.Load(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatalf("the file does not load: %v\n%s", err, body)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the file is not valid: %v\n%s", err, body)
	}
	wc := config.Section[*whatsapp.Config](cfg)
	if !wc.Enabled || wc.AccessToken != wafake.AccessToken || wc.PhoneNumberID != wafake.PhoneNumberID || wc.AppSecret != wafake.AppSecret ||
		wc.VerifyToken != wafake.VerifyToken || !slices.Equal(wc.AllowUsers, []string{"+15551234567"}) || wc.Pairing {
		t.Errorf("section = %+v\n%s", wc, body)
	}

	// The flags and the environment, without questions; no number: pairing.
	t.Setenv("WHATSAPP_APP_SECRET", wafake.AppSecret)
	t.Setenv("WHATSAPP_VERIFY_TOKEN", wafake.VerifyToken)
	path := filepath.Join(t.TempDir(), "flags.yaml")
	out.Reset()
	if code := run(t.Context(), []string{"init", "--non-interactive", "--config", path, "--model-url", model.URL, "--model", "fake-model",
		"--whatsapp-token", wafake.AccessToken, "--whatsapp-phone-number-id", wafake.PhoneNumberID, "--whatsapp-api-base", f.APIBase()},
		strings.NewReader(""), &out, &errb); code != ExitOK {
		t.Fatalf("init with flags: exit %d\n%s%s", code, out.String(), errb.String())
	}
	noSecrets(t, "init's output", out.String()+errb.String(), wafake.AccessToken, wafake.AppSecret, wafake.VerifyToken)
	body, _ = os.ReadFile(path)
	if strings.Contains(string(body), wafake.AppSecret) || !strings.Contains(string(body), `"${WHATSAPP_APP_SECRET}"`) {
		t.Errorf("the app secret from the environment is not referred to:\n%s", body)
	}
	cfg, err = config.Load(path)
	if err != nil {
		t.Fatalf("the file does not load: %v\n%s", err, body)
	}
	if wc := config.Section[*whatsapp.Config](cfg); wc.PhoneNumberID != wafake.PhoneNumberID || !wc.Pairing || wc.AppSecret != wafake.AppSecret {
		t.Errorf("section = %+v\n%s", wc, body)
	}
	if !strings.Contains(out.String(), "ok  WhatsApp token") || !strings.Contains(out.String(), "switchboard pairing approve CODE --config "+path) {
		t.Errorf("no check or pairing step:\n%s", out.String())
	}
}
