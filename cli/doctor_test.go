package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/channels/discord"
	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/discordfake"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
	"github.com/switchboard-gateway/switchboard/store"
)

func doctorConfig(t *testing.T, model *testkit.FakeLLM, tg *tgfake.Fake, tgToken string, dc *discordfake.Fake, dcToken string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := config.Default()
	cfg.LLM.BaseURL, cfg.LLM.APIKey, cfg.LLM.Model = model.URL, "sk-doctor-secret-key", "fake-model"
	cfg.Store.Path = filepath.Join(dir, "switchboard.db")
	cfg.Skills.Dir = filepath.Join(dir, "skills")
	cfg.HTTP.Listen = "127.0.0.1:0"
	t1, d1 := config.Section[*telegram.Config](cfg), config.Section[*discord.Config](cfg)
	t1.Enabled, t1.Token, t1.APIEndpoint, t1.AllowUsers = true, tgToken, tg.URL, []string{"1"}
	d1.Enabled, d1.Token, d1.APIBase, d1.AllowUsers = true, dcToken, dc.APIBase(), []string{"310000000000000001"}
	path := filepath.Join(dir, "config.yaml")
	if err := cfgfile.WriteFile(path, cfg); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDoctor(t *testing.T) {
	const tgTok = "7305550000:AAF-doctor-Secret_0123456789abcdef"
	model := testkit.NewFakeLLM(t)
	tg := tgfake.New(t, tgTok)
	dc := discordfake.New(t)

	var out bytes.Buffer
	code := run(t.Context(), []string{"doctor", "--config", doctorConfig(t, model, tg, tgTok, dc, dc.Token)}, strings.NewReader(""), &out, &out)
	report := out.String()
	if code != ExitOK {
		t.Fatalf("doctor with everything working: exit %d\n%s", code, report)
	}
	for _, want := range []string{
		"ok    config", "ok    store", "will be created at the first start",
		"ok    model     " + model.URL + " answers and offers fake-model",
		"ok    telegram  token works: bot @" + tg.BotUsername,
		"ok    discord   token works: bot " + dc.Bot.Username,
		"ok    http", "ok    skills", "All checks passed.",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}

	// Wrong tokens and a model the server does not offer: each failure says
	// what to fix, and no secret is printed.
	model.SetModels("other-model")
	out.Reset()
	code = run(t.Context(), []string{"doctor", "--config", doctorConfig(t, model, tg, "7305550000:AAF-wrong-Secret_xx", dc, "wrong-discord-token-xyz")},
		strings.NewReader(""), &out, &out)
	report = out.String()
	if code != ExitFail {
		t.Fatalf("doctor with problems: exit %d\n%s", code, report)
	}
	for _, want := range []string{
		`FAIL  model     ` + model.URL + ` answers but does not offer model "fake-model" (it offers other-model)`,
		"fix: set llm.model (or OPENAI_MODEL)",
		"FAIL  telegram  getMe: the token was rejected (status 401)",
		"fix: get the bot's token from @BotFather",
		"FAIL  discord   /users/@me: the token was rejected (status 401)",
		"fix: reset the token in the Discord developer portal",
		"3 problem(s) to fix",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	for _, secret := range []string{"AAF-wrong-Secret_xx", "wrong-discord-token-xyz", "sk-doctor-secret-key", tgTok} {
		if strings.Contains(report, secret) {
			t.Errorf("the report shows a secret: %q", secret)
		}
	}

	// A configuration error is reported as such.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("llm:\n  model: m\nhttp:\n  listen: 0.0.0.0:8080\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run(t.Context(), []string{"doctor", "--config", bad}, strings.NewReader(""), &out, &out); code != ExitConfig ||
		!strings.Contains(out.String(), "FAIL  config") || !strings.Contains(out.String(), "http.token") {
		t.Fatalf("doctor with a bad config: exit %d\n%s", code, out.String())
	}
}

// doctor says what serve would say about a store directory SQLite cannot
// work in, with the fix on its own line; a missing directory that serve
// would create is fine.
func TestDoctorStoreDirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "data")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	withShmLink := filepath.Join(dir, "db", "switchboard.db")
	if err := os.MkdirAll(filepath.Dir(withShmLink), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(withShmLink, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "gone", "shm"), withShmLink+"-shm"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path     string
		level    string
		msg, fix string
	}{
		{filepath.Join(file, "switchboard.db"), "FAIL", file + " is a file, not a directory", "move store.path"},
		{withShmLink, "FAIL", withShmLink + "-shm cannot be opened for writing (SQLite needs to create switchboard.db-wal and -shm beside it)", "remove it, or move store.path"},
		{filepath.Join(dir, "new", "dir", "switchboard.db"), "ok", "will be created at the first start", ""},
	}
	for _, tt := range tests {
		cfg := config.Default()
		cfg.Store.Path = tt.path
		f := storeFinding(cfg)
		if f.Severity.String() != tt.level || !strings.Contains(f.Message, tt.msg) || f.Fix != tt.fix {
			t.Errorf("doctor on %s: %+v\nwant %s %q, fix %q", tt.path, f, tt.level, tt.msg, tt.fix)
		}
	}
}

// doctor says when serve turned learning off because the model cannot make
// forced function calls (recorded in the store), and for which model.
func TestDoctorSaysLearningTurnedItselfOff(t *testing.T) {
	model := testkit.NewFakeLLM(t)
	tg := tgfake.New(t, "7305550000:AAF-doctor-Secret_0123456789abcdef")
	dc := discordfake.New(t)
	path := doctorConfig(t, model, tg, "7305550000:AAF-doctor-Secret_0123456789abcdef", dc, dc.Token)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), cfg.Store.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetLearningOff(t.Context(), store.LearningOff{Model: "fake-model", Reason: "learning: learn: the model did not call the function"}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	var out bytes.Buffer
	code := run(t.Context(), []string{"doctor", "--config", path}, strings.NewReader(""), &out, &out)
	report := out.String()
	if code != ExitOK {
		t.Fatalf("exit %d, want %d (a warning)\n%s", code, ExitOK, report)
	}
	for _, want := range []string{"warn  learning  off since ", "model fake-model cannot make forced function calls",
		"fix: use a model or server that supports tool_choice"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

// doctor finds a damaged store, quick and with --deep: pages overwritten
// in the middle of a real database file, and a file cut short, each with
// the restore of a backup as its fix, not permissions or disk space.
func TestDoctorFindsDamage(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"four pages overwritten", func(t *testing.T, path string) { testkit.OverwritePages(t, path, 0, 4) }},
		{"file cut short", func(t *testing.T, path string) {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, fi.Size()*6/10); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		for _, flags := range [][]string{nil, {"--deep"}} {
			t.Run(tc.name+" "+strings.Join(flags, ""), func(t *testing.T) {
				cfgPath, dbPath := storeOnlyConfig(t)
				st, err := store.Open(t.Context(), dbPath)
				if err != nil {
					t.Fatal(err)
				}
				st.Close()
				testkit.FillDatabase(t, dbPath, 300)
				tc.damage(t, dbPath)
				var out bytes.Buffer
				code := run(t.Context(), append([]string{"doctor", "--config", cfgPath}, flags...), strings.NewReader(""), &out, &out)
				report := out.String()
				if code != ExitFail || !strings.Contains(report, "FAIL  store     "+dbPath+" is damaged") ||
					!strings.Contains(report, "fix: stop switchboard and restore a backup") {
					t.Fatalf("doctor on a damaged store: exit %d\n%s", code, report)
				}
				if strings.Contains(report, "permissions") || strings.Contains(report, "disk is not full") || strings.Contains(report, "free space") {
					t.Errorf("doctor blames permissions or space for damage:\n%s", report)
				}
			})
		}
	}
}

// storeOnlyConfig writes a configuration whose store is in a new
// directory, with a model server doctor reaches.
func storeOnlyConfig(t *testing.T) (cfgPath, dbPath string) {
	t.Helper()
	dir := t.TempDir()
	cfg := config.Default()
	model := testkit.NewFakeLLM(t)
	cfg.LLM.BaseURL, cfg.LLM.APIKey, cfg.LLM.Model = model.URL, "sk-doctor", "fake-model"
	cfg.Store.Path = filepath.Join(dir, "switchboard.db")
	cfg.Skills.Dir = filepath.Join(dir, "skills")
	cfgPath = filepath.Join(dir, "config.yaml")
	if err := cfgfile.WriteFile(cfgPath, cfg); err != nil {
		t.Fatal(err)
	}
	return cfgPath, cfg.Store.Path
}
