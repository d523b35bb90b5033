package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"switchboard/config"
	"switchboard/llm"
	"switchboard/skills"
	"switchboard/store"
)

// doctorTimeout bounds each network check.
const doctorTimeout = 10 * time.Second

// finding is one line of the doctor's report.
type finding struct {
	level string // "ok", "warn" or "FAIL"
	what  string
	msg   string
	fix   string
}

// doctor checks what `serve` needs (the configuration, the store, the
// model server and each enabled channel's token) and says what to fix. It
// exits 0 when nothing failed.
func doctor(ctx context.Context, cfgPath string, out io.Writer) int {
	var found []finding
	report := func(f finding) {
		found = append(found, f)
		fmt.Fprintf(out, "%-4s  %-8s  %s\n", f.level, f.what, f.msg)
		if f.fix != "" {
			fmt.Fprintf(out, "                fix: %s\n", f.fix)
		}
	}
	cfg, err := config.Load(cfgPath)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		report(finding{"FAIL", "config", err.Error(), "edit the keys named above (see config.example.yaml), then run `switchboard doctor` again"})
		return ExitConfig
	}
	where := cfgPath
	if where == "" {
		where = config.DefaultPath + " (or defaults and the environment)"
	}
	report(finding{level: "ok", what: "config", msg: where})
	for _, w := range cfg.Warnings() {
		report(finding{level: "warn", what: "config", msg: w})
	}

	report(doctorStore(ctx, cfg))
	for _, f := range doctorModel(ctx, cfg) {
		report(f)
	}
	if cfg.Channels.Telegram.Enabled {
		report(doctorTelegram(ctx, cfg.Channels.Telegram))
	}
	if cfg.Channels.Discord.Enabled {
		report(doctorDiscord(ctx, cfg.Channels.Discord))
	}
	if !cfg.Channels.Telegram.Enabled && !cfg.Channels.Discord.Enabled {
		report(finding{"warn", "channels", "no chat channel is enabled, so `serve` will not start",
			"set channels.telegram.enabled or channels.discord.enabled with its token"})
	}
	report(doctorHTTP(cfg.HTTP))
	report(doctorSkills(cfg))

	failed := 0
	for _, f := range found {
		if f.level == "FAIL" {
			failed++
		}
	}
	if failed > 0 {
		fmt.Fprintf(out, "\n%d problem(s) to fix before `switchboard serve` works.\n", failed)
		return ExitFail
	}
	fmt.Fprintln(out, "\nAll checks passed.")
	return ExitOK
}

func doctorStore(ctx context.Context, cfg *config.Config) finding {
	if cfg.Store.Driver == config.StorePostgres {
		return doctorPostgres(ctx, cfg)
	}
	path := cfg.Store.Path
	if err := store.CheckPath(path); err != nil {
		return dirFinding(err)
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return finding{level: "ok", what: "store", msg: path + " will be created at the first start"}
	}
	cctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	st, err := store.Open(cctx, path)
	if _, ok := errors.AsType[*store.DirError](err); ok {
		return dirFinding(err)
	}
	if err != nil {
		return finding{"FAIL", "store", err.Error(),
			"check the file's owner and permissions (the service user needs write access to it and its directory), and that the disk is not full"}
	}
	defer st.Close()
	if err := st.Ping(cctx); err != nil {
		return finding{"FAIL", "store", err.Error(),
			"the database does not accept writes: check permissions and free space; a running serve holding a long write makes this time out"}
	}
	stats, err := st.Stats(cctx)
	if err != nil {
		return finding{"FAIL", "store", err.Error(), "the database may be damaged: restore the latest backup (see README, Operations)"}
	}
	return finding{level: "ok", what: "store", msg: fmt.Sprintf("%s is writable (%d chats, %d messages)", path, stats.Chats, stats.Messages)}
}

// dirFinding reports a *store.DirError: its cause, and its fix as the fix.
func dirFinding(err error) finding {
	de, _ := errors.AsType[*store.DirError](err)
	msg := fmt.Sprintf("%s: %s", de.Path, de.Cause)
	if de.Err != nil {
		msg += "; the error was: " + de.Err.Error()
	}
	return finding{"FAIL", "store", msg, de.Fix}
}

// doctorPostgres checks that the PostgreSQL database opens (migrating it if
// needed) and takes writes. Messages name the DSN without its password.
func doctorPostgres(ctx context.Context, cfg *config.Config) finding {
	where := cfg.Redacted().Store.DSN
	cctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	st, err := store.OpenPostgres(cctx, cfg.Store.DSN)
	if err != nil {
		return finding{"FAIL", "store", err.Error(),
			"check store.dsn (host, port, database, user and password), that the server runs and is reachable from this machine, and that the user may create tables in the database (or its search_path schema)"}
	}
	defer st.Close()
	if err := st.Ping(cctx); err != nil {
		return finding{"FAIL", "store", err.Error(),
			"the database does not accept writes: it may be a read-only standby, or the user lacks INSERT on its tables"}
	}
	stats, err := st.Stats(cctx)
	if err != nil {
		return finding{"FAIL", "store", err.Error(), "check the user's permissions on the tables of store.dsn's database"}
	}
	return finding{level: "ok", what: "store", msg: fmt.Sprintf("%s is writable (%d chats, %d messages)", where, stats.Chats, stats.Messages)}
}

func doctorModel(ctx context.Context, cfg *config.Config) []finding {
	c, err := llm.New(llm.Config{BaseURL: cfg.LLM.BaseURL, APIKey: cfg.LLM.APIKey, Model: cfg.LLM.Model, MaxRetries: -1})
	if err != nil {
		return []finding{{"FAIL", "model", err.Error(), "fix llm.base_url and llm.model"}}
	}
	where := cfg.Redacted().LLM.BaseURL
	cctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	ids, err := c.Models(cctx)
	if err != nil {
		fix := "check llm.base_url, and that the model server runs and is reachable from this machine"
		var le *llm.Error
		if errors.As(err, &le) && (le.Status == http.StatusUnauthorized || le.Status == http.StatusForbidden) {
			fix = "the server rejected the API key: set llm.api_key (or OPENAI_API_KEY) to a valid key"
		}
		return []finding{{"FAIL", "model", fmt.Sprintf("%s: %v", where, err), fix}}
	}
	if len(ids) > 0 && !slices.Contains(ids, cfg.LLM.Model) {
		return []finding{{"FAIL", "model", fmt.Sprintf("%s answers but does not offer model %q (it offers %s)", where, cfg.LLM.Model, clipList(ids, 8)),
			"set llm.model (or OPENAI_MODEL) to one of the models the server offers"}}
	}
	var out []finding
	msg := fmt.Sprintf("%s answers and offers %s", where, cfg.LLM.Model)
	if len(ids) == 0 {
		msg = where + " answers (it does not list its models)"
	}
	out = append(out, finding{level: "ok", what: "model", msg: msg})
	for _, fb := range cfg.LLM.FallbackModels {
		if len(ids) > 0 && !slices.Contains(ids, fb) {
			out = append(out, finding{"warn", "model", fmt.Sprintf("fallback model %q is not offered by the server", fb), "remove it from llm.fallback_models or fix its name"})
		}
	}
	return out
}

func clipList(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:n], ", ") + fmt.Sprintf(" and %d more", len(ids)-n)
}

// doctorGet does one GET and decodes the JSON answer into v; secrets are
// removed from the error.
func doctorGet(ctx context.Context, url string, header http.Header, v any, secrets ...string) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, scrub(err, secrets)
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, scrub(err, secrets)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, scrub(err, secrets)
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, v); err != nil {
			return resp.StatusCode, fmt.Errorf("the answer is not the expected JSON: %w", err)
		}
	}
	return resp.StatusCode, nil
}

func scrub(err error, secrets []string) error {
	msg := err.Error()
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
		}
	}
	return errors.New(msg)
}

func doctorTelegram(ctx context.Context, tg config.Telegram) finding {
	var me struct {
		OK     bool `json:"ok"`
		Result struct {
			Username string `json:"username"`
		} `json:"result"`
	}
	url := strings.TrimRight(tg.APIEndpoint, "/") + "/bot" + tg.Token + "/getMe"
	code, err := doctorGet(ctx, url, http.Header{}, &me, tg.Token)
	switch {
	case err != nil:
		return finding{"FAIL", "telegram", "getMe: " + err.Error(), "check that " + tg.APIEndpoint + " is reachable from this machine"}
	case code == http.StatusUnauthorized || code == http.StatusNotFound:
		return finding{"FAIL", "telegram", fmt.Sprintf("getMe: the token was rejected (status %d)", code),
			"get the bot's token from @BotFather (/token) and set channels.telegram.token or TELEGRAM_BOT_TOKEN"}
	case code != http.StatusOK || !me.OK:
		return finding{"FAIL", "telegram", fmt.Sprintf("getMe: status %d", code), "try again later; if it persists, check channels.telegram.api_endpoint"}
	}
	msg := "token works: bot @" + me.Result.Username
	if tg.Webhook.URL != "" {
		msg += ", webhook " + tg.Webhook.URL
	}
	return finding{level: "ok", what: "telegram", msg: msg}
}

func doctorDiscord(ctx context.Context, dc config.Discord) finding {
	var me struct {
		Username string `json:"username"`
		ID       string `json:"id"`
	}
	token := strings.TrimPrefix(strings.TrimSpace(dc.Token), "Bot ")
	url := strings.TrimRight(dc.APIBase, "/") + "/users/@me"
	code, err := doctorGet(ctx, url, http.Header{"Authorization": {"Bot " + token}}, &me, token)
	switch {
	case err != nil:
		return finding{"FAIL", "discord", "/users/@me: " + err.Error(), "check that " + dc.APIBase + " is reachable from this machine"}
	case code == http.StatusUnauthorized:
		return finding{"FAIL", "discord", "/users/@me: the token was rejected (status 401)",
			"reset the token in the Discord developer portal (your application → Bot → Reset Token) and set channels.discord.token or DISCORD_BOT_TOKEN"}
	case code != http.StatusOK:
		return finding{"FAIL", "discord", fmt.Sprintf("/users/@me: status %d", code), "try again later; if it persists, check channels.discord.api_base"}
	}
	return finding{level: "ok", what: "discord", msg: fmt.Sprintf("token works: bot %s (%s); make sure the Message Content intent is on in the developer portal", me.Username, me.ID)}
}

func doctorHTTP(h config.HTTP) finding {
	if h.Listen == "" {
		return finding{level: "ok", what: "http", msg: "disabled (http.listen is empty): no health checks, metrics, chat API or dashboard"}
	}
	ln, err := net.Listen("tcp", h.Listen)
	if err != nil {
		return finding{"warn", "http", fmt.Sprintf("cannot listen on %s: %v", h.Listen, err),
			"if switchboard is running, that is expected; otherwise choose a free http.listen address"}
	}
	ln.Close()
	auth := "no token (loopback only)"
	if h.Token != "" {
		auth = "bearer token required"
	}
	return finding{level: "ok", what: "http", msg: fmt.Sprintf("%s is free; %s", h.Listen, auth)}
}

func doctorSkills(cfg *config.Config) finding {
	cmd := cfg.Tools.Command
	reg := skills.Load(os.DirFS(cfg.Skills.Dir), skills.Builtin(), skills.Env{Command: skills.CommandPolicy{
		Enabled: cmd.Enabled, Workspace: cmd.Workspace, Timeout: cmd.Timeout, MaxOutputChars: cmd.MaxOutputChars}})
	if probs := reg.Problems(); len(probs) > 0 {
		var b strings.Builder
		for _, p := range probs {
			b.WriteString("\n                  " + p.Error())
		}
		return finding{"warn", "skills", fmt.Sprintf("%d problem(s); those skills are skipped:%s", len(probs), b.String()),
			"fix the files and lines named above (the skills folder reloads by itself)"}
	}
	return finding{level: "ok", what: "skills", msg: fmt.Sprintf("%d loaded from %s and built in", len(reg.Skills()), cfg.Skills.Dir)}
}
