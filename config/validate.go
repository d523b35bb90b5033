package config

import (
	"fmt"
	"maps"
	"math"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/channels/registry"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/schedule/spec"
	"github.com/switchboard-gateway/switchboard/tools/allowhost"
)

// Validate reports every setting that is wrong on its own or together with
// others, joined with errors.Join. Each problem is an *Error naming the key,
// the file and line when it was set in a file, and what to do about it.
//
// Settings of a disabled channel are not checked, so a half-filled telegram
// or discord section does not block a gateway that does not use it. Each
// chat platform's section checks itself (channels.Section.Validate).
func (c *Config) Validate() error {
	if c == nil {
		return &Error{Msg: "no configuration"}
	}
	v := &checker{src: c.src, sharedStore: c.Store.Driver == StorePostgres, httpServed: c.HTTP.Listen != ""}

	// llm
	v.httpURL("llm.base_url", c.LLM.BaseURL, "https://api.openai.com/v1")
	if strings.TrimSpace(c.LLM.Model) == "" {
		v.add("llm.model", "must not be empty; set it or OPENAI_MODEL")
	}
	v.positive("llm.context_window", c.LLM.ContextWindow, "the model's context size in tokens, such as 128000")
	for i, m := range c.LLM.FallbackModels {
		if strings.TrimSpace(m) == "" {
			v.add(fmt.Sprintf("llm.fallback_models[%d]", i), "must not be empty; remove the entry or name a model")
		}
	}
	v.notNegative("llm.max_retries", c.LLM.MaxRetries, "0 disables retries")
	v.positiveDuration("llm.request_timeout", c.LLM.RequestTimeout, "120s")
	v.positiveDuration("llm.stream_idle_timeout", c.LLM.StreamIdleTimeout, "60s")
	v.notNegative("llm.max_concurrent_requests", c.LLM.MaxConcurrentRequests, "0 means no cap")
	v.notNegative("llm.max_output_tokens", c.LLM.MaxOutputTokens, "0 leaves the limit to the server")
	if c.LLM.MaxOutputTokens > 0 && c.LLM.ContextWindow > 0 && c.LLM.MaxOutputTokens >= c.LLM.ContextWindow {
		v.add("llm.max_output_tokens", fmt.Sprintf("must be less than llm.context_window (%d), or no room is left for the prompt; lower it, or set 0 to leave it to the server", c.LLM.ContextWindow))
	}
	c.validateModels(v)
	for _, name := range sortedNames(c.LLM.Prices) {
		p := c.LLM.Prices[name]
		for _, k := range []struct {
			kind string
			n    float64
		}{{"input", p.Input}, {"cached", p.Cached}, {"output", p.Output}} {
			if k.n < 0 || math.IsNaN(k.n) || math.IsInf(k.n, 0) {
				v.add("llm.prices."+name+"."+k.kind, fmt.Sprintf("%v is not a price: write what a million tokens cost, 0 or more, such as 0.40", k.n))
			}
		}
	}

	// store, agent, skills
	c.validateStore(v)
	v.notEmpty("agent.name", c.Agent.Name, `the name the bot goes by, such as "Switchboard"`)
	if tz := c.Agent.Timezone; tz == "" {
		v.add("agent.timezone", `must not be empty; set an IANA zone such as "Europe/Berlin", or "UTC"`)
	} else if _, err := time.LoadLocation(tz); err != nil {
		v.add("agent.timezone", fmt.Sprintf(`unknown time zone %q; use an IANA name such as "Europe/Berlin" or "America/New_York", or "UTC"`, tz))
	}
	v.positive("agent.max_steps", c.Agent.MaxSteps, "the model calls allowed in one turn, such as 50")
	v.positive("agent.max_concurrent_turns", c.Agent.MaxConcurrentTurns, "such as 64")
	v.positiveDuration("agent.turn_timeout", c.Agent.TurnTimeout, "10m")
	v.positiveDuration("channels.reply_max_age", c.Channels.ReplyMaxAge, "24h")
	v.positive("channels.reply_max_chars", c.Channels.ReplyMaxChars, "such as 16000")
	v.positive("channels.max_input_chars", c.Channels.MaxInputChars, "such as 32000")
	v.positive("agent.tool_result_max_chars", c.Agent.ToolResultMaxChars, "such as 50000")
	v.notNegative("agent.turn_token_budget", c.Agent.TurnTokenBudget, "0 means unlimited")
	v.notNegative("agent.history_budget", c.Agent.HistoryBudget, "such as 5000; 0 leaves only llm.context_window")
	v.notNegative("agent.user_daily_token_budget", c.Agent.UserDailyTokenBudget, "0 means unlimited")
	v.positiveDuration("agent.approval_timeout", c.Agent.ApprovalTimeout, "1h")
	v.positive("agent.plan_step_max_steps", c.Agent.PlanStepMaxSteps, "such as 10")
	v.positiveDuration("agent.plan_feedback_timeout", c.Agent.PlanFeedbackTimeout, "10m")
	v.positiveDuration("agent.model_outage_max_age", c.Agent.ModelOutageMaxAge, "1h")
	if c.Agent.StillWorkingAfter < 0 {
		v.add("agent.still_working_after", fmt.Sprintf("must not be negative, got %s; set it to something like \"30s\", or 0 for never", c.Agent.StillWorkingAfter))
	}
	v.notEmpty("skills.dir", c.Skills.Dir, `a directory of skill files, such as "switchboard-skills" (it may be empty)`)
	v.oneOf("skills.self_improve", c.Skills.SelfImprove, "off", "propose", "apply")
	c.validateGrants(v)
	if l := c.Learning; l.Enabled {
		v.positive("learning.every_n_turns", l.EveryNTurns, "1 to learn after every turn")
		if l.IdleAfter < 0 {
			v.add("learning.idle_after", fmt.Sprintf("must not be negative, got %s (0 learns every_n_turns turns only; such as \"3m\")", l.IdleAfter))
		}
		v.positiveDuration("learning.job_timeout", l.JobTimeout, "60s")
		v.positive("learning.queue_size", l.QueueSize, "such as 64")
		v.notNegative("learning.memory_prompt_tokens", l.MemoryPromptTokens, "0 keeps memories out of the prompt")
	}

	// tools and MCP
	if cmd := c.Tools.Command; cmd.Enabled {
		v.notEmpty("tools.command.workspace", cmd.Workspace, `the directory command tools run in, such as "workspace"`)
		v.positiveDuration("tools.command.timeout", cmd.Timeout, "30s")
		v.positive("tools.command.max_output_chars", cmd.MaxOutputChars, "such as 20000")
		for i, p := range cmd.ConnectPorts {
			if p < 1 || p > 65535 {
				v.add(fmt.Sprintf("tools.command.connect_ports[%d]", i), fmt.Sprintf("%d is not a TCP port; list ports from 1 to 65535, such as 443", p))
			}
		}
	}
	c.validateWebAndFiles(v)
	names := map[string]int{}
	for i, s := range c.MCP.Servers {
		key := fmt.Sprintf("mcp.servers[%d]", i)
		switch {
		case !mcpName().MatchString(s.Name):
			v.add(key+".name", fmt.Sprintf("%q must be letters, digits or - (up to 20), such as \"github\"; it prefixes the server's tool names", s.Name))
		case names[s.Name] > 0:
			v.add(key+".name", fmt.Sprintf("%q is used by mcp.servers[%d] too; names must be unique", s.Name, names[s.Name]-1))
		}
		names[s.Name] = i + 1
		switch {
		case len(s.Command) == 0 && s.URL == "":
			v.add(key, "set command (a stdio server, such as [npx, -y, some-mcp-server]) or url (a streamable HTTP server)")
		case len(s.Command) > 0 && s.URL != "":
			v.add(key, "set either command or url, not both")
		case s.URL != "":
			v.httpURL(key+".url", s.URL, "http://127.0.0.1:3000/mcp")
		}
		for j, e := range s.Env {
			if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
				v.add(fmt.Sprintf("%s.env[%d]", key, j), fmt.Sprintf("%q must be KEY=value", e))
			}
		}
		for j, h := range s.Headers {
			if k, _, ok := strings.Cut(h, ":"); !ok || strings.TrimSpace(k) == "" {
				v.add(fmt.Sprintf("%s.headers[%d]", key, j), fmt.Sprintf("%q must be \"Name: value\"", h))
			}
		}
		if s.Timeout < 0 {
			v.add(key+".timeout", "must not be negative; 0 uses the default of 60s")
		}
		if s.StartupTimeout < 0 {
			v.add(key+".startup_timeout", "must not be negative; 0 uses the default of 60s")
		}
	}

	c.validateSchedule(v)

	// channels
	v.notEmpty("channels.console.user", c.Channels.Console.User, `your name in "switchboard chat", such as "local"`)
	for _, d := range registry.All {
		if sec := c.Channels.Sections[d.Name]; sec != nil {
			sec.Validate("channels."+d.Name, v)
		}
	}

	// http
	if listen := c.HTTP.Listen; listen != "" {
		host, port, err := net.SplitHostPort(listen)
		if p, perr := strconv.Atoi(port); err != nil || perr != nil || p < 0 || p > 65535 {
			v.add("http.listen", fmt.Sprintf(`%q is not host:port; write it like "127.0.0.1:8080", or leave it empty to disable the HTTP API`, listen))
		} else if !isLoopback(host) && c.HTTP.Token == "" {
			v.add("http.token", fmt.Sprintf(`required when http.listen (%q) is not a loopback address; set it, for example to ${SWITCHBOARD_HTTP_TOKEN}, or listen on 127.0.0.1`, listen))
		} else if !isLoopback(host) && len(c.HTTP.Token) < MinHTTPTokenLen {
			v.add("http.token", fmt.Sprintf(`is %d characters, too short to guard http.listen (%q), which is not a loopback address: use at least %d random characters (openssl rand -hex 32), or listen on 127.0.0.1`, len(c.HTTP.Token), listen, MinHTTPTokenLen))
		}
	}

	for i, h := range c.HTTP.PublicHosts {
		if msg := badPublicHost(h); msg != "" {
			v.add(fmt.Sprintf("http.public_hosts[%d]", i), fmt.Sprintf("%q %s; write the name clients use, optionally with :port, such as dash.example.com or dash.example.com:8443", h, msg))
		}
	}

	v.positiveDuration("shutdown_timeout", c.ShutdownTimeout, "20s")

	// log
	v.oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	v.oneOf("log.format", c.Log.Format, "text", "json")

	return joinErrors(v.errs)
}

// ValidateStore reports what is wrong with the settings an admin command
// on the store needs (store.*, cluster.*, skills.dir), like Validate, and
// nothing else: `switchboard pairing`, `schedule` and `skills proposals`
// work without the model's and the bots' secrets, which a service keeps in
// its unit's environment.
func (c *Config) ValidateStore() error {
	if c == nil {
		return &Error{Msg: "no configuration"}
	}
	v := &checker{src: c.src, sharedStore: c.Store.Driver == StorePostgres}
	c.validateStore(v)
	v.notEmpty("skills.dir", c.Skills.Dir, `a directory of skill files, such as "switchboard-skills" (it may be empty)`)
	return joinErrors(v.errs)
}

// validateWebAndFiles checks tools.web.* and tools.files.*.
func (c *Config) validateWebAndFiles(v *checker) {
	if w := c.Tools.Web; w.Enabled {
		for i, h := range w.AllowHosts {
			if _, err := allowhost.Parse(h); err != nil {
				v.add(fmt.Sprintf("tools.web.allow_hosts[%d]", i), fmt.Sprintf("%q %v; %s", h, err, allowhost.Syntax))
			}
		}
		v.positiveDuration("tools.web.timeout", w.Timeout, "15s")
		v.positive("tools.web.max_bytes", w.MaxBytes, "such as 2097152 (2 MiB)")
		v.positive("tools.web.max_chars", w.MaxChars, "such as 20000")
		v.notNegative("tools.web.max_redirects", w.MaxRedirects, "0 follows no redirects")
		s := w.Search
		if !slices.Contains([]string{"", "searxng", "brave", "tavily"}, s.Provider) {
			v.add("tools.web.search.provider", fmt.Sprintf(`%q is not one of searxng, brave, tavily (or "" for no web_search)`, s.Provider))
		}
		switch s.Provider {
		case "searxng":
			if s.URL == "" {
				v.add("tools.web.search.url", "required with provider searxng: the instance's address, such as http://127.0.0.1:8888")
			}
		case "brave", "tavily":
			if s.APIKey == "" {
				v.add("tools.web.search.api_key", fmt.Sprintf("required with provider %s; set it, for example to ${SWITCHBOARD_SEARCH_API_KEY}", s.Provider))
			}
		}
		if s.URL != "" {
			v.httpURL("tools.web.search.url", s.URL, "http://127.0.0.1:8888")
		}
	}
	if f := c.Tools.Files; f.Enabled {
		v.notEmpty("tools.files.root", f.Root, `the directory the file tools are confined to, such as "workspace"`)
		v.positive("tools.files.max_bytes", f.MaxBytes, "such as 1048576 (1 MiB)")
	}
}

// badPublicHost says what is wrong with an http.public_hosts entry ("" if
// nothing): a host name, optionally with :port.
func badPublicHost(h string) string {
	h = strings.TrimSpace(h)
	if h == "" {
		return "is empty"
	}
	if strings.Contains(h, "://") || strings.ContainsAny(h, "/?#@") {
		return "is a URL, not a host name"
	}
	if host, port, err := net.SplitHostPort(h); err == nil {
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return "has a port that is not a number from 1 to 65535"
		}
		h = host
	}
	if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return "" // accepted anyway, harmless to list
	}
	if !hostName().MatchString(h) {
		return "is not a host name"
	}
	return ""
}

// validateSchedule checks schedule.*; specs are parsed by the scheduler's
// own parser, in the zone the job will run in.
func (c *Config) validateSchedule(v *checker) {
	v.positiveDuration("schedule.missed_grace", c.Schedule.MissedGrace, "1h")
	v.positive("schedule.max_failures", c.Schedule.MaxFailures, "the failed runs in a row that disable a job, such as 3")
	zone := time.UTC
	if loc, err := time.LoadLocation(c.Agent.Timezone); err == nil && c.Agent.Timezone != "" {
		zone = loc
	}
	names := map[string]int{}
	for i, j := range c.Schedule.Jobs {
		key := fmt.Sprintf("schedule.jobs[%d]", i)
		at := func(field, msg string) { v.addNear(key+"."+field, key, msg) }
		switch {
		case strings.TrimSpace(j.Name) == "":
			at("name", `must not be empty; name the job, such as "morning-digest"`)
		case names[j.Name] > 0:
			at("name", fmt.Sprintf("%q is used by schedule.jobs[%d] too; names must be unique", j.Name, names[j.Name]-1))
		}
		names[j.Name] = i + 1
		loc := zone
		if j.Timezone != "" {
			l, err := time.LoadLocation(j.Timezone)
			if err != nil {
				at("timezone", fmt.Sprintf(`unknown time zone %q; use an IANA name such as "Europe/Berlin", or leave it empty for agent.timezone`, j.Timezone))
			} else {
				loc = l
			}
		}
		if _, err := spec.Parse(j.Spec, loc); err != nil {
			at("spec", err.Error())
		}
		if names := jobChannels(); !slices.Contains(names, j.Channel) {
			at("channel", fmt.Sprintf("%q is not one of %s", j.Channel, strings.Join(names, ", ")))
		}
		if strings.TrimSpace(j.Chat) == "" {
			at("chat", `must not be empty; set the chat's id on that channel (the console's is "terminal")`)
		}
		text, prompt := strings.TrimSpace(j.Text) != "", strings.TrimSpace(j.Prompt) != ""
		switch j.Kind {
		case "reminder":
			if !text || prompt {
				v.addNear(key+".text", key+".kind", "a reminder needs text (sent as is) and no prompt")
			}
		case "task":
			if !prompt || text {
				v.addNear(key+".prompt", key+".kind", "a task needs a prompt (run as an agent turn) and no text")
			}
		default:
			at("kind", fmt.Sprintf("%q is neither reminder (with text) nor task (with prompt)", j.Kind))
		}
		if j.MaxSteps < 0 {
			at("max_steps", fmt.Sprintf("must not be negative, got %d (0 uses agent.max_steps)", j.MaxSteps))
		}
	}
}

// Warnings returns notes about settings that are valid but probably not what
// the operator wants, such as an enabled channel that admits nobody. Each
// starts with the file and line when known.
func (c *Config) Warnings() []string {
	if c == nil {
		return nil
	}
	var notes []string
	// note positions a warning at key, or else at fallback, when they were
	// set in a file.
	note := func(key, fallback, msg string) {
		file, line := c.src.where(key)
		if line == 0 {
			file, line = c.src.where(fallback)
		}
		notes = append(notes, (&Error{File: file, Line: line, Key: key, Msg: key + " " + msg}).Error())
	}
	if c.src != nil && c.src.storeNote != "" {
		notes = append(notes, (&Error{File: c.src.file, Key: "store.path", Msg: c.src.storeNote}).Error())
	}
	if c.src != nil && c.src.skillsNote != "" {
		notes = append(notes, (&Error{File: c.src.file, Key: "skills.dir", Msg: c.src.skillsNote}).Error())
	}
	for _, d := range registry.All {
		if sec := c.Channels.Sections[d.Name]; sec != nil {
			sec.Warnings("channels."+d.Name, note)
		}
	}
	for i, j := range c.Schedule.Jobs {
		key := fmt.Sprintf("schedule.jobs[%d].channel", i)
		switch {
		case j.Channel != "console" && c.Channels.Sections[j.Channel] != nil && !c.Channels.Enabled(j.Channel):
			note(key, key, fmt.Sprintf("is %s, which is not enabled, so job %q fails until it is (and is disabled after schedule.max_failures runs)", j.Channel, j.Name))
		case j.Channel == "console":
			note(key, key, fmt.Sprintf("is console, so job %q runs only while `switchboard chat` does", j.Name))
		}
	}
	if host, _, err := net.SplitHostPort(c.HTTP.Listen); err == nil && !isLoopback(host) && len(c.HTTP.PublicHosts) == 0 {
		note("http.public_hosts", "http.listen", fmt.Sprintf("is empty and http.listen (%q) is not loopback: the server answers only to localhost and IP addresses in the Host header (421 otherwise); list the names clients use", c.HTTP.Listen))
	}
	if worst := c.LLM.WorstCall(); c.Agent.TurnTimeout > 0 && worst > c.Agent.TurnTimeout {
		note("agent.turn_timeout", "llm.request_timeout", fmt.Sprintf("(%s) is shorter than one model call can take: %d attempt(s) of llm.request_timeout (%s) and %s of waits between retries come to %s, so a hung model ends the turn before the model's retries and fallbacks are done; raise agent.turn_timeout, or lower llm.request_timeout or llm.max_retries",
			c.Agent.TurnTimeout, c.LLM.attempts(), c.LLM.RequestTimeout, modelRetryWaits, worst))
	}
	if u, err := url.Parse(c.LLM.BaseURL); err == nil && u.Hostname() == "api.openai.com" && c.LLM.APIKey == "" {
		note("llm.api_key", "llm.api_key", "is empty, but api.openai.com requires one; set it or OPENAI_API_KEY")
	}
	return notes
}

var (
	mcpName  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9-]{1,20}$`) })
	hostName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?\.?$`) })
)

// checker collects validation problems.
type checker struct {
	src         *source
	sharedStore bool // store.driver is postgres
	httpServed  bool // http.listen is set
	errs        []*Error
}

// addNear is add for a key that may be missing from the file: the problem
// is then placed at near (the enclosing list item).
func (v *checker) addNear(key, near, msg string) {
	if _, line := v.src.where(key); line == 0 {
		if file, line := v.src.where(near); line > 0 {
			v.errs = append(v.errs, &Error{File: file, Line: line, Key: key, Msg: key + ": " + msg})
			return
		}
	}
	v.add(key, msg)
}

// add records a problem with key; msg says what is wrong and what to do.
func (v *checker) add(key, msg string) {
	file, line := v.src.where(key)
	msg = key + ": " + msg
	if env := v.src.fromEnv(key); env != "" {
		msg += " (the value comes from " + env + ")"
	}
	v.errs = append(v.errs, &Error{File: file, Line: line, Key: key, Msg: msg})
}

func (v *checker) notEmpty(key, val, what string) {
	if strings.TrimSpace(val) == "" {
		v.add(key, "must not be empty; set it to "+what)
	}
}

func (v *checker) positive(key string, n int, what string) {
	if n <= 0 {
		v.add(key, fmt.Sprintf("must be a positive number, got %d; set it to %s", n, what))
	}
}

func (v *checker) notNegative(key string, n int, zero string) {
	if n < 0 {
		v.add(key, fmt.Sprintf("must not be negative, got %d (%s)", n, zero))
	}
}

func (v *checker) positiveDuration(key string, d time.Duration, example string) {
	if d <= 0 {
		v.add(key, fmt.Sprintf("must be a positive duration, got %s; set it to something like %q", d, example))
	}
}

func (v *checker) oneOf(key, val string, allowed ...string) {
	if !slices.Contains(allowed, val) {
		v.add(key, fmt.Sprintf("%q is not one of %s", val, strings.Join(allowed, ", ")))
	}
}

func (v *checker) httpURL(key, val, example string) {
	v.url(key, val, []string{"http", "https"}, example)
}

func (v *checker) url(key, val string, schemes []string, example string) {
	u, err := url.Parse(val)
	if err != nil || !slices.Contains(schemes, u.Scheme) || u.Host == "" {
		v.add(key, fmt.Sprintf("%q is not a %s URL; write it like %s", redactURL(val), strings.Join(schemes, " or "), example))
	}
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func (c *Config) validateStore(v *checker) {
	switch st := c.Store; st.Driver {
	case StoreSQLite:
		v.notEmpty("store.path", st.Path, `a file name for the SQLite database, such as "switchboard.db"`)
	case StorePostgres:
		const example = `such as "postgres://switchboard:${SWITCHBOARD_DB_PASSWORD}@127.0.0.1:5432/switchboard"`
		switch dsn := strings.TrimSpace(st.DSN); {
		case dsn == "":
			v.add("store.dsn", "required when store.driver is postgres; set it to a PostgreSQL connection string, "+example)
		case strings.Contains(dsn, "://"):
			// The DSN is not quoted back: it may hold the password.
			u, err := url.Parse(dsn)
			if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
				v.add("store.dsn", "is not a postgres:// URL; write it "+example+", or as key=value pairs (host=… user=… dbname=…)")
			}
		case !strings.Contains(dsn, "="):
			v.add("store.dsn", "is neither a postgres:// URL nor key=value pairs; write it "+example)
		}
	default:
		v.oneOf("store.driver", st.Driver, StoreSQLite, StorePostgres)
	}
	cl := c.Cluster
	v.positiveDuration("cluster.lease_ttl", cl.LeaseTTL, "15s")
	v.positiveDuration("cluster.poll_interval", cl.PollInterval, "250ms")
	if cl.LeaseTTL > 0 && cl.LeaseTTL < time.Second {
		v.add("cluster.lease_ttl", fmt.Sprintf("is %s; a lease shorter than 1s expires between heartbeats: use at least 1s, such as 15s", cl.LeaseTTL))
	}
	if id := cl.ReplicaID; id != "" && (strings.TrimSpace(id) != id || len(id) > 128 || strings.ContainsAny(id, "\x00\n")) {
		v.add("cluster.replica_id", "must be a short name without surrounding spaces or line breaks, such as \"gw-1\"")
	}
}

// jobChannels are the channels a scheduled job may name: the terminal and
// every chat platform.
func jobChannels() []string {
	return append([]string{"console"}, registry.Names()...)
}

// The channels.Checker a section validates itself with.

func (v *checker) Add(key, msg string)           { v.add(key, msg) }
func (v *checker) AddNear(key, near, msg string) { v.addNear(key, near, msg) }
func (v *checker) NotEmpty(key, val, what string) {
	v.notEmpty(key, val, what)
}
func (v *checker) PositiveDuration(key string, d time.Duration, example string) {
	v.positiveDuration(key, d, example)
}
func (v *checker) URL(key, val string, schemes []string, example string) {
	v.url(key, val, schemes, example)
}
func (v *checker) SharedStore() bool { return v.sharedStore }

func (v *checker) HTTPServed() bool { return v.httpServed }

// attempts is how many requests one model call may make: each model's
// first try and retries, for the primary and each fallback.
func (l LLM) attempts() int {
	return (1 + len(l.FallbackModels)) * (1 + max(l.MaxRetries, 0))
}

// WorstCall is the longest one model call can take as configured, every
// attempt timing out: attempts × llm.request_timeout plus the waits
// between retries. agent.turn_timeout should be longer (Warnings).
func (l LLM) WorstCall() time.Duration {
	return time.Duration(l.attempts())*l.RequestTimeout + modelRetryWaits
}

// validateModels checks llm.provider, llm.temperature and llm.models.
func (c *Config) validateModels(v *checker) {
	if p := c.LLM.Provider; p != "" && !slices.Contains(llm.Providers, p) {
		v.add("llm.provider", fmt.Sprintf("unknown provider %q; use one of %s, or leave it empty to detect it from llm.base_url", p, strings.Join(llm.Providers, ", ")))
	}
	temp := func(key string, t *float64) {
		if t != nil && (*t < 0 || *t > 2) {
			v.add(key, fmt.Sprintf("%g is out of range; use a value from 0 to 2, or leave it unset for the server's default", *t))
		}
	}
	temp("llm.temperature", c.LLM.Temperature)
	for _, name := range slices.Sorted(maps.Keys(c.LLM.Models)) {
		m := c.LLM.Models[name]
		key := "llm.models." + name
		if strings.TrimSpace(name) == "" {
			v.add("llm.models", "has an entry without a model name; name the model (Azure: the deployment)")
		}
		temp(key+".temperature", m.Temperature)
		if m.Reasoning != nil && *m.Reasoning && m.Temperature != nil {
			v.add(key+".temperature", "a reasoning model takes no temperature; remove it, or set reasoning: false")
		}
	}
}
