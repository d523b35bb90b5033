package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/switchboard-gateway/switchboard/channels/registry"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/gateway"
	"github.com/switchboard-gateway/switchboard/skills"
	"github.com/switchboard-gateway/switchboard/store"
)

// This file is what `check` and `doctor` both say: every validation that
// needs no network, as one list of findings with one severity each. doctor
// adds its network checks (the model server, the channels' tokens, the
// database server, the listen address) after them. Both print the list the
// same way and derive the exit code the same way.

// Severity is how much a finding matters.
type Severity int

const (
	SevOK   Severity = iota // works as configured
	SevWarn                 // works, but probably not as meant
	SevFail                 // must be fixed: serve will not start, or a skill is skipped
)

func (s Severity) String() string {
	switch s {
	case SevWarn:
		return "warn"
	case SevFail:
		return "FAIL"
	}
	return "ok"
}

// Finding is one line of the report: Where is what was checked ("config",
// "store", "skills", a channel), Fix (if any) what to do about it.
type Finding struct {
	Severity Severity
	Where    string
	Message  string
	Fix      string
}

// printFinding writes f as check and doctor show it.
func printFinding(out io.Writer, f Finding) {
	fmt.Fprintf(out, "%-4s  %-8s  %s\n", f.Severity, f.Where, f.Message)
	if f.Fix != "" {
		fmt.Fprintf(out, "                fix: %s\n", f.Fix)
	}
}

// exitCode is the exit code for a report: ExitConfig when the configuration
// or a skill file has an error (what `check` looks at), else ExitFail when
// anything else failed (the store, the model server, a token), else ExitOK.
func exitCode(found []Finding) int {
	code := ExitOK
	for _, f := range found {
		if f.Severity != SevFail {
			continue
		}
		if f.Where == "config" || f.Where == "skills" {
			return ExitConfig
		}
		code = ExitFail
	}
	return code
}

// countFailed counts the findings that failed.
func countFailed(found []Finding) int {
	n := 0
	for _, f := range found {
		if f.Severity == SevFail {
			n++
		}
	}
	return n
}

// offlineFindings validates a loaded, valid configuration without the
// network: its warnings, the model and agent settings, the store's path,
// the channels, and the skills (tool schemas included). cfgPath is the
// --config given ("" for the default lookup).
func offlineFindings(cfg *config.Config, cfgPath string) []Finding {
	r := cfg.Redacted()
	where := cfgPath
	if where == "" {
		where = "no configuration file (looked for " + strings.Join(configCandidates(), ", ") +
			"): the built-in defaults and the environment; `switchboard init` writes one"
	}
	found := []Finding{{Where: "config", Message: where}}
	for _, w := range cfg.Warnings() {
		found = append(found, Finding{Severity: SevWarn, Where: "config", Message: w})
	}

	model := fmt.Sprintf("%s at %s (context %d tokens", r.LLM.Model, r.LLM.BaseURL, r.LLM.ContextWindow)
	if len(r.LLM.FallbackModels) > 0 {
		model += fmt.Sprintf(", fallbacks %v", r.LLM.FallbackModels)
	}
	found = append(found, Finding{Where: "model", Message: model + ")"}, storeFinding(cfg))
	if id := gateway.ReplicaID(cfg); id != "" {
		found = append(found, Finding{Where: "cluster", Message: fmt.Sprintf("replica %s, leases for %s, polling every %s (replicas on this database share its chats)",
			id, cfg.Cluster.LeaseTTL, cfg.Cluster.PollInterval)})
	}
	found = append(found, Finding{Where: "agent", Message: fmt.Sprintf("%s, max %d steps, %d concurrent turns, zone %s",
		r.Agent.Name, r.Agent.MaxSteps, r.Agent.MaxConcurrentTurns, r.Agent.Timezone)})
	found = append(found, channelFindings(cfg)...)
	found = append(found, skillsFindings(cfg)...)
	found = append(found, scheduleFindings(cfg)...)
	found = append(found, codeArgumentFindings(cfg)...)
	if cmd := cfg.Tools.Command; cmd.Enabled {
		found = append(found, Finding{Where: "commands", Message: "enabled, confined to " + cmd.Workspace})
	}
	for _, m := range r.MCP.Servers {
		at := m.URL
		if at == "" {
			at = strings.Join(m.Command, " ")
		}
		found = append(found, Finding{Where: "mcp", Message: fmt.Sprintf("%s (%s)", m.Name, at)})
	}
	return found
}

// sqliteHeader starts every SQLite database file.
var sqliteHeader = []byte("SQLite format 3\x00")

// storeFinding checks an SQLite store's path without opening it: that its
// directory can be created and written (store.CheckPath), and that an
// existing file is an SQLite database. A PostgreSQL store is only named
// (doctor connects to it).
func storeFinding(cfg *config.Config) Finding {
	if cfg.Store.Driver == config.StorePostgres {
		return Finding{Where: "store", Message: "postgres " + cfg.Redacted().Store.DSN}
	}
	path := cfg.Store.Path
	if err := store.CheckPath(path); err != nil {
		return dirFinding(err)
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Finding{Where: "store", Message: path + " will be created at the first start"}
	}
	if err != nil {
		return Finding{SevFail, "store", fmt.Sprintf("%s cannot be read: %v", path, errReason(err)),
			"give the service user read and write access to it, or move store.path"}
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return Finding{SevFail, "store", path + " is a directory, not a database file", "set store.path to a file name inside it, such as " + path + "/switchboard.db"}
	}
	head := make([]byte, len(sqliteHeader))
	n, err := io.ReadFull(f, head)
	if n == 0 && (err == nil || errors.Is(err, io.EOF)) {
		return Finding{Where: "store", Message: path + " is empty; the database will be created in it at the first start"}
	}
	if !bytes.Equal(head[:n], sqliteHeader) {
		return Finding{SevFail, "store", path + " is not a SQLite database (it does not start with the SQLite header)",
			"store.path names some other file: point it at the database, or at a new file name"}
	}
	return Finding{Where: "store", Message: path + " (an SQLite database)"}
}

// errReason is an OS error without the path a *PathError repeats.
func errReason(err error) string {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

// dirFinding reports a *store.DirError: its cause, and its fix as the fix.
func dirFinding(err error) Finding {
	de, _ := errors.AsType[*store.DirError](err)
	msg := fmt.Sprintf("%s: %s", de.Path, de.Cause)
	if de.Err != nil {
		msg += "; the error was: " + de.Err.Error()
	}
	return Finding{SevFail, "store", msg, de.Fix}
}

// channelFindings lists every channel: the terminal always, the chat
// platforms and the HTTP API when enabled. serve needs at least one of the
// latter three; without any, only `switchboard chat` works.
func channelFindings(cfg *config.Config) []Finding {
	found := []Finding{{Where: "console", Message: "the terminal chat (switchboard chat)"}}
	paired := pairedCounts(cfg)
	for _, d := range registry.All {
		sec := cfg.Channels.Section(d.Name)
		if sec == nil || !sec.Settings().Enabled {
			continue
		}
		msg := fmt.Sprintf("enabled, %d allowed users", len(sec.Settings().AllowUsers))
		if n, ok := paired[d.Name]; ok && (n > 0 || sec.Access().Pairing) {
			msg += fmt.Sprintf(", %d paired", n)
		}
		if sec.Access().Pairing {
			msg += ", pairing on (strangers get a code: switchboard pairing list)"
		}
		if d.Summary != nil {
			msg += d.Summary(sec)
		}
		found = append(found, Finding{Where: d.Name, Message: msg})
	}
	if h := cfg.HTTP; h.Listen != "" {
		auth := "no token (loopback only)"
		if h.Token != "" {
			auth = "bearer token required"
		}
		found = append(found, Finding{Where: "http", Message: fmt.Sprintf("OpenAI-compatible chat API, dashboard, health checks and metrics on %s; %s", h.Listen, auth)})
	} else {
		found = append(found, Finding{Where: "http", Message: "disabled (http.listen is empty): no chat API, dashboard, health checks or metrics"})
	}
	if err := gateway.CheckServable(cfg); err != nil {
		found = append(found, Finding{SevWarn, "channels", "nothing for `switchboard serve` to serve: it will not start; `switchboard chat` works",
			"set " + gateway.EnableChannelKeys() + " with its token, or http.listen for the chat API"})
	}
	return found
}

// skillsFindings loads the skills as serve would, tool schemas and grants
// included. A skill with a problem is skipped by serve (which keeps
// running), so it fails here: the operator meant it to work. Then, per
// skill that asks for anything, what it asks for and what it is granted
// (skillGrantFindings).
func skillsFindings(cfg *config.Config) []Finding {
	cmd := cfg.Tools.Command
	reg := skills.Load(os.DirFS(cfg.Skills.Dir), skills.Builtin(), skills.Env{Command: skills.CommandPolicyOf(cmd),
		Grants: cfg.Skills.Grants, Secrets: cfg.Secrets()})
	var found []Finding
	if probs := reg.Problems(); len(probs) > 0 {
		var b strings.Builder
		for _, p := range probs {
			b.WriteString("\n                  " + p.Error())
		}
		found = append(found, Finding{SevFail, "skills", fmt.Sprintf("%d problem(s); serve skips those skills and tools:%s", len(probs), b.String()),
			"fix the files and lines named above (the skills folder reloads by itself)"})
	} else {
		var names []string
		for _, s := range reg.Skills() {
			names = append(names, s.Name)
		}
		found = append(found, Finding{Where: "skills", Message: fmt.Sprintf("%d from %s and built in: %s", len(names), cfg.Skills.Dir, strings.Join(names, ", "))})
	}
	return append(found, skillGrantFindings(cfg, reg)...)
}

// pairedCounts counts the users admitted by pairing per channel, from an
// existing SQLite store opened read-only (check neither creates nor
// migrates it); nil when there is none to read (PostgreSQL is doctor's).
func pairedCounts(cfg *config.Config) map[string]int {
	if cfg.Store.Driver == config.StorePostgres {
		return nil
	}
	if fi, err := os.Stat(cfg.Store.Path); err != nil || fi.Size() == 0 {
		return nil
	}
	if ownerRefused(cfg, "check") != nil {
		return nil // root would leave a -shm file of its own in the service's directory
	}
	ctx := context.Background()
	st, err := store.Open(ctx, cfg.Store.Path, store.WithReadOnly())
	if err != nil {
		return nil
	}
	defer st.Close()
	users, err := st.ApprovedUsers(ctx)
	if err != nil {
		return nil
	}
	counts := map[string]int{}
	for _, d := range registry.All {
		counts[d.Name] = 0
	}
	for _, u := range users {
		counts[u.Channel]++
	}
	return counts
}

// scheduleFindings lists the jobs schedule.jobs declares: what would run,
// when, and where.
func scheduleFindings(cfg *config.Config) []Finding {
	var found []Finding
	for _, j := range cfg.Schedule.Jobs {
		zone := j.Timezone
		if zone == "" {
			zone = cfg.Agent.Timezone
		}
		found = append(found, Finding{Where: "schedule", Message: fmt.Sprintf("job %q: a %s at %q (%s) in %s chat %s", j.Name, j.Kind, j.Spec, zone, j.Channel, j.Chat)})
	}
	return found
}
