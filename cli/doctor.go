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

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/registry"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// doctorTimeout bounds each network check.
const doctorTimeout = 10 * time.Second

// doctor checks what `serve` needs and says what to fix: first what check
// checks (the same findings, see offlineFindings), then what needs the
// network or opens things: the store (opened and written), the model
// server, each enabled chat channel's token and the HTTP listen address.
// The exit code follows the same rule as check's (exitCode).
func doctor(ctx context.Context, cfgPath string, deep bool, out io.Writer) int {
	var found []Finding
	report := func(f Finding) {
		found = append(found, f)
		printFinding(out, f)
	}
	cfg, err := config.Load(cfgPath)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		report(Finding{SevFail, "config", err.Error(), "edit the keys named above (see config.example.yaml), then run `switchboard doctor` again"})
		return ExitConfig
	}
	offline := offlineFindings(cfg, cfgPath)
	storeOK := true
	for _, f := range offline {
		report(f)
		if f.Where == "store" && f.Severity == SevFail {
			storeOK = false
		}
	}

	for _, f := range sandboxFindings(cfg) {
		report(f)
	}
	if storeOK {
		if f, ok := doctorStore(ctx, cfg, deep); ok {
			report(f)
			if f, ok := doctorLearning(ctx, cfg); ok && f.Severity != SevFail {
				report(f)
			}
		}
	}
	for _, f := range doctorModel(ctx, cfg) {
		report(f)
	}
	for _, d := range registry.All {
		if d.Doctor != nil && cfg.Channels.Enabled(d.Name) {
			report(doctorChannel(ctx, d, cfg))
		}
	}
	if cfg.HTTP.Listen != "" {
		report(doctorHTTP(cfg.HTTP))
	}

	if n := countFailed(found); n > 0 {
		fmt.Fprintf(out, "\n%d problem(s) to fix.\n", n)
	} else {
		fmt.Fprintln(out, "\nAll checks passed.")
	}
	return exitCode(found)
}

// doctorStore opens the store as serve would (creating and migrating an
// SQLite file that does not exist yet is left to serve: ok is false then),
// checks an SQLite file's integrity (quick, or with deep in full) and
// tries a write. A damaged file gets the restore as its fix, whichever
// step found the damage.
func doctorStore(ctx context.Context, cfg *config.Config, deep bool) (f Finding, ok bool) {
	if cfg.Store.Driver == config.StorePostgres {
		return doctorPostgres(ctx, cfg), true
	}
	path := cfg.Store.Path
	if fi, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) || (err == nil && fi.Size() == 0) {
		return Finding{}, false
	}
	cctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	st, err := store.Open(cctx, path)
	if _, ok := errors.AsType[*store.DirError](err); ok {
		return dirFinding(err), true
	}
	if err == nil {
		defer st.Close()
		if deep {
			cctx, cancel = context.WithTimeout(ctx, 10*doctorTimeout) // a full check reads every index too
			defer cancel()
		}
		err = st.CheckIntegrity(cctx, deep)
		if err == nil {
			err = st.Ping(cctx)
		}
	}
	if de, ok := errors.AsType[*store.DamageError](err); ok {
		return Finding{SevFail, "store", fmt.Sprintf("%s is damaged: %s", path, damageCause(de)), de.Fix()}, true
	}
	if err != nil && st == nil {
		return Finding{SevFail, "store", err.Error(),
			"check the file's owner and permissions (the service user needs write access to it and its directory), and that the disk is not full"}, true
	}
	if err != nil {
		return Finding{SevFail, "store", err.Error(),
			"the database does not accept writes: check permissions and free space; a running serve holding a long write makes this time out"}, true
	}
	stats, err := st.Stats(cctx)
	if err != nil {
		return Finding{SevFail, "store", err.Error(), "the database may be damaged: restore the latest backup (see README, Operations)"}, true
	}
	return Finding{Where: "store", Message: fmt.Sprintf("%s is writable (%d chats, %d messages)", path, stats.Chats, stats.Messages)}, true
}

// doctorLearning reports whether learning turned itself off in serve
// because the configured model cannot make forced function calls (recorded
// in the store; ok is false when there is nothing to say).
func doctorLearning(ctx context.Context, cfg *config.Config) (f Finding, ok bool) {
	if !cfg.Learning.Enabled {
		return Finding{}, false
	}
	cctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	var st *store.Store
	var err error
	if cfg.Store.Driver == config.StorePostgres {
		st, err = store.OpenPostgres(cctx, cfg.Store.DSN)
	} else {
		st, err = store.Open(cctx, cfg.Store.Path)
	}
	if err != nil {
		return Finding{}, false // the store's finding says why
	}
	defer st.Close()
	off, recorded, err := st.LearningOff(cctx)
	if err != nil || !recorded || off.Model != cfg.LLM.Model {
		return Finding{}, false
	}
	return Finding{SevWarn, "learning", fmt.Sprintf("off since %s: model %s cannot make forced function calls (%s)",
		off.At.Format(time.RFC3339), off.Model, off.Reason),
		"use a model or server that supports tool_choice (function calling), or set learning.enabled: false; serve tries learning again at its next start"}, true
}

// doctorPostgres checks that the PostgreSQL database opens (migrating it if
// needed) and takes writes. Messages name the DSN without its password.
func doctorPostgres(ctx context.Context, cfg *config.Config) Finding {
	where := cfg.Redacted().Store.DSN
	cctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	st, err := store.OpenPostgres(cctx, cfg.Store.DSN)
	if err != nil {
		return Finding{SevFail, "store", err.Error(),
			"check store.dsn (host, port, database, user and password), that the server runs and is reachable from this machine, and that the user may create tables in the database (or its search_path schema)"}
	}
	defer st.Close()
	if err := st.Ping(cctx); err != nil {
		return Finding{SevFail, "store", err.Error(),
			"the database does not accept writes: it may be a read-only standby, or the user lacks INSERT on its tables"}
	}
	stats, err := st.Stats(cctx)
	if err != nil {
		return Finding{SevFail, "store", err.Error(), "check the user's permissions on the tables of store.dsn's database"}
	}
	return Finding{Where: "store", Message: fmt.Sprintf("%s is writable (%d chats, %d messages)", where, stats.Chats, stats.Messages)}
}

func doctorModel(ctx context.Context, cfg *config.Config) []Finding {
	mc := cfg.LLM.ClientConfig()
	mc.FallbackModels, mc.MaxRetries = nil, -1
	c, err := llm.New(mc)
	if err != nil {
		return []Finding{{SevFail, "model", err.Error(), "fix llm.base_url and llm.model"}}
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
		return []Finding{{SevFail, "model", fmt.Sprintf("%s: %v", where, err), fix}}
	}
	if len(ids) > 0 && !slices.Contains(ids, cfg.LLM.Model) {
		return []Finding{{SevFail, "model", fmt.Sprintf("%s answers but does not offer model %q (it offers %s)", where, cfg.LLM.Model, clipList(ids, 8)),
			"set llm.model (or OPENAI_MODEL) to one of the models the server offers"}}
	}
	var out []Finding
	msg := fmt.Sprintf("%s answers and offers %s", where, cfg.LLM.Model)
	if len(ids) == 0 {
		msg = where + " answers (it does not list its models)"
	}
	out = append(out, Finding{Where: "model", Message: msg})
	for _, fb := range cfg.LLM.FallbackModels {
		if len(ids) > 0 && !slices.Contains(ids, fb) {
			out = append(out, Finding{SevWarn, "model", fmt.Sprintf("fallback model %q is not offered by the server", fb), "remove it from llm.fallback_models or fix its name"})
		}
	}
	return append(out, doctorFeatures(ctx, cfg, c)...)
}

// modelProbeTimeout bounds the probe of the model's features (three
// short model calls).
const modelProbeTimeout = 60 * time.Second

// doctorFeatures probes what the model can do (tools, forced calls,
// streaming usage, images) and says what works, warning where the
// configuration relies on what does not.
func doctorFeatures(ctx context.Context, cfg *config.Config, c *llm.Client) []Finding {
	cctx, cancel := context.WithTimeout(ctx, modelProbeTimeout)
	defer cancel()
	caps, err := c.Features(cctx)
	if err != nil {
		return []Finding{{SevWarn, "model", "could not probe what the model can do: " + err.Error(),
			"check that the model server answers chat requests (llm.base_url, llm.model, llm.api_key)"}}
	}
	how := "detected from llm.base_url; llm.provider names it"
	if cfg.LLM.Provider != "" {
		how = "llm.provider"
	}
	out := []Finding{{Where: "model", Message: fmt.Sprintf("provider %s (%s)", caps.Provider, how)}}
	add := func(what string, cp llm.Capability, needed bool, fix string) {
		f := Finding{Where: "model", Message: fmt.Sprintf("%s: %s", what, cp.Detail)}
		if !cp.OK {
			f.Message = fmt.Sprintf("%s: no: %s", what, cp.Detail)
			if needed {
				f.Severity, f.Fix = SevWarn, fix
			}
		}
		out = append(out, f)
	}
	add("tool calls", caps.Tools, true,
		"use a model and server with function calling (for Ollama, vLLM and llama.cpp: a model and chat template with tool support); without it the bot cannot use its tools")
	add("forced calls", caps.ForcedCall, cfg.Learning.Enabled,
		"learning needs forced calls (tool_choice): use a model that honours them, or set learning.enabled: false")
	add("streaming usage", caps.StreamUsage, cfg.Agent.TurnTokenBudget > 0 || cfg.Agent.UserDailyTokenBudget > 0,
		"token budgets count nothing without usage: use a server that reports usage in streams (stream_options.include_usage), or unset the budgets")
	add("images", caps.Images, cfg.LLM.Vision,
		"llm.vision is on but the model refused an image: use a vision model, or set llm.vision: false")
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

// doctorChannel runs a chat platform's token check (its definition's
// Doctor) on cfg's section.
func doctorChannel(ctx context.Context, d channels.Definition, cfg *config.Config) Finding {
	c := d.Doctor(ctx, cfg.Channels.Section(d.Name), doctorGet)
	if c.Failed {
		return Finding{SevFail, d.Name, c.Message, c.Fix}
	}
	return Finding{Where: d.Name, Message: c.Message}
}

// doctorHTTP tries to listen on http.listen.
func doctorHTTP(h config.HTTP) Finding {
	ln, err := net.Listen("tcp", h.Listen)
	if err != nil {
		return Finding{SevWarn, "http", fmt.Sprintf("cannot listen on %s: %v", h.Listen, err),
			"if switchboard is running, that is expected; otherwise choose a free http.listen address"}
	}
	ln.Close()
	return Finding{Where: "http", Message: h.Listen + " is free"}
}

// damageCause is what found the damage: the integrity check's first
// problems, or SQLite's error.
func damageCause(de *store.DamageError) string {
	switch {
	case len(de.Problems) > 3:
		return "the integrity check found " + strings.Join(de.Problems[:3], "; ") + fmt.Sprintf(" and %d more", len(de.Problems)-3)
	case len(de.Problems) > 0:
		return "the integrity check found " + strings.Join(de.Problems, "; ")
	case de.Err != nil:
		return de.Err.Error()
	}
	return "SQLite says so"
}
