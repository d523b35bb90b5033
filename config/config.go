// Package config loads, checks and describes Switchboard's configuration.
//
// The usual sequence is Load, then Validate, then Warnings:
//
//	cfg, err := config.Load(path) // syntax, unknown keys, wrong types
//	if err == nil {
//		err = cfg.Validate() // values that make no sense together
//	}
//
// Every problem is reported as an *Error naming the key (and the file and line
// when the value came from a file), so a caller can tell configuration
// mistakes from other failures with errors.As.
//
// The YAML key names are a public contract: operators' files depend on them.
// config.example.yaml at the repository root lists every key with its default
// and is loaded by the tests so that it cannot drift from this package.
package config

import (
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/llm"

	_ "time/tzdata" // agent.timezone must resolve on hosts without a zoneinfo database (scratch and distroless images)
)

// DefaultPath is the file Load reads when it is given no path. Unlike an
// explicitly named file, it may be missing: Switchboard then runs on built-in
// defaults and the environment.
const DefaultPath = "config.yaml"

// Config is the whole configuration. Its zero value is not useful; start from
// Load or Default.
type Config struct {
	LLM      LLM      `yaml:"llm"`
	Store    Store    `yaml:"store"`
	Agent    Agent    `yaml:"agent"`
	Channels Channels `yaml:"channels"`
	Skills   Skills   `yaml:"skills"`
	Learning Learning `yaml:"learning"`
	Tools    Tools    `yaml:"tools"`
	MCP      MCP      `yaml:"mcp"`
	Schedule Schedule `yaml:"schedule"`
	HTTP     HTTP     `yaml:"http"`
	Log      Log      `yaml:"log"`
	Cluster  Cluster  `yaml:"cluster"`

	// ShutdownTimeout is how long running turns may finish after SIGTERM
	// before they are checkpointed (cancelled, and resumed after a restart).
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`

	// src remembers where values came from, so Validate and Warnings can
	// point at file:line. Nil for a Config built by Default or by hand.
	src *source
}

// LLM configures the OpenAI-compatible model endpoint.
//
// Struct tags beside yaml, here and in every chat platform's section:
// secret:"true" marks a secret (Redacted masks it, Secrets lists it),
// secret:"url" a URL that may carry a password, env:"NAME" the environment
// variable an empty value falls back to (see Load).
type LLM struct {
	BaseURL        string        `yaml:"base_url" secret:"url" env:"OPENAI_BASE_URL"`
	APIKey         string        `yaml:"api_key" secret:"true" env:"OPENAI_API_KEY"`
	Model          string        `yaml:"model" env:"OPENAI_MODEL"` // required
	ContextWindow  int           `yaml:"context_window"`           // tokens the model accepts in one request
	FallbackModels []string      `yaml:"fallback_models"`          // tried in order when Model fails
	MaxRetries     int           `yaml:"max_retries"`              // retries of one request; 0 disables
	RequestTimeout time.Duration `yaml:"request_timeout"`          // for one model request, streaming included
	// StreamIdleTimeout ends an attempt that received no byte for this
	// long (before the answer starts or in the middle of its stream): a
	// hung server is retried without waiting out RequestTimeout.
	StreamIdleTimeout time.Duration `yaml:"stream_idle_timeout"`
	// MaxConcurrentRequests caps the requests in flight to each model
	// (the primary and each fallback), for providers that rate-limit;
	// more wait in line and their users are told their place; 0: no cap.
	MaxConcurrentRequests int    `yaml:"max_concurrent_requests"`
	MaxOutputTokens       int    `yaml:"max_output_tokens"`   // 0 leaves it to the server
	Vision                bool   `yaml:"vision"`              // the model accepts image input
	TranscriptionModel    string `yaml:"transcription_model"` // voice messages are transcribed with it; empty: off
	// Provider is the kind of model server (llm.Providers: openai, azure,
	// mistral, ...); empty: detected from base_url. Azure takes requests
	// at /openai/deployments/{model}/... with APIVersion and an api-key
	// header; Mistral only its own tool-call ids.
	Provider   string `yaml:"provider"`
	APIVersion string `yaml:"api_version"` // Azure OpenAI's api-version; empty: base_url's, else 2024-10-21
	// Temperature is sent with every request but to reasoning models;
	// unset: none, the server's default.
	Temperature *float64 `yaml:"temperature"`
	// Models are per-model settings, by model name (Azure: deployment).
	Models map[string]LLMModel `yaml:"models"`
	// Prices, per model name, turn tokens into an estimated cost on the
	// dashboard, in /status and /usage; none: tokens only.
	Prices   map[string]Price `yaml:"prices,omitempty"`
	Currency string           `yaml:"currency"` // what Prices are in, shown beside costs
}

// LLMModel is the settings of one model (llm.models.NAME). Unset fields
// are detected: a reasoning model by its name (o1, o3, o4, gpt-5) or by
// its server refusing max_tokens.
type LLMModel struct {
	// Reasoning: the output cap goes as max_completion_tokens and no
	// temperature is sent.
	Reasoning   *bool    `yaml:"reasoning"`
	Temperature *float64 `yaml:"temperature"` // overrides llm.temperature for this model
}

// ClientConfig is the model client's configuration from these settings
// (retries, timeouts, logger and the rest are the caller's to add).
func (l LLM) ClientConfig() llm.Config {
	c := llm.Config{BaseURL: l.BaseURL, APIKey: l.APIKey, Model: l.Model, FallbackModels: l.FallbackModels,
		Provider: l.Provider, APIVersion: l.APIVersion, Temperature: l.Temperature}
	if len(l.Models) > 0 {
		c.Models = make(map[string]llm.ModelSettings, len(l.Models))
		for name, m := range l.Models {
			c.Models[name] = llm.ModelSettings{Reasoning: m.Reasoning, Temperature: m.Temperature}
		}
	}
	return c
}

// Price is what a million tokens of each kind cost on one model
// (llm.prices.NAME).
type Price struct {
	Input  float64 `yaml:"input"`  // prompt tokens not served from the cache
	Cached float64 `yaml:"cached"` // prompt tokens served from the provider's cache
	Output float64 `yaml:"output"` // completion tokens, reasoning included
}

// Store configures the database: a SQLite file (the embedded default) or
// PostgreSQL, which several replicas can share.
type Store struct {
	Driver string `yaml:"driver"` // sqlite or postgres
	Path   string `yaml:"path"`   // sqlite: the database file
	DSN    string `yaml:"dsn"`    // postgres: the connection string; its password is a secret
}

// Store drivers.
const (
	StoreSQLite   = "sqlite"
	StorePostgres = "postgres"
)

// Source is what opens the store with Driver: the file path for sqlite, the
// DSN for postgres.
func (s Store) Source() string {
	if s.Driver == StorePostgres {
		return s.DSN
	}
	return s.Path
}

// Agent configures the turn loop.
type Agent struct {
	Name                 string        `yaml:"name"`                    // the bot's name in the system prompt
	SystemPrompt         string        `yaml:"system_prompt"`           // operator instructions appended to the identity
	Timezone             string        `yaml:"timezone"`                // IANA zone for dates shown to the model and schedules
	MaxSteps             int           `yaml:"max_steps"`               // model calls in one turn
	MaxConcurrentTurns   int           `yaml:"max_concurrent_turns"`    // turns running at once across all chats
	TurnTimeout          time.Duration `yaml:"turn_timeout"`            // wall-clock limit of one turn
	ToolResultMaxChars   int           `yaml:"tool_result_max_chars"`   // longer tool results are truncated
	HistoryBudget        int           `yaml:"history_budget"`          // tokens of history a request carries; 0 = the context window
	TurnTokenBudget      int           `yaml:"turn_token_budget"`       // 0 = unlimited
	UserDailyTokenBudget int           `yaml:"user_daily_token_budget"` // 0 = unlimited
	ApprovalTimeout      time.Duration `yaml:"approval_timeout"`        // an unanswered approval request expires
	PlanStepMaxSteps     int           `yaml:"plan_step_max_steps"`     // step cap of each /plan step
	PlanFeedbackTimeout  time.Duration `yaml:"plan_feedback_timeout"`   // without an answer a plan continues
	ModelOutageMaxAge    time.Duration `yaml:"model_outage_max_age"`    // how long a message waits for a model that is unavailable
	// StillWorkingAfter: a model call silent this long gets the chat one
	// "Still working on it…" line per turn; 0: never.
	StillWorkingAfter time.Duration `yaml:"still_working_after"`
}

// Channels configures the chat adapters.
type Channels struct {
	Console Console `yaml:"console"`
	// Sections are the chat platforms' sections (channels.telegram,
	// channels.discord, ...), by name: one per definition in
	// channels/registry, each the type its package defines. Read one with
	// Section.
	Sections map[string]channels.Section `yaml:"-"`
	// ReplyMaxAge is how long a reply the platform did not take (an
	// outage) is kept and retried before it is dropped with an ERROR.
	ReplyMaxAge time.Duration `yaml:"reply_max_age"`
	// ReplyMaxChars caps one reply to a chat, in characters; past it the
	// reply is cut and says so.
	ReplyMaxChars int `yaml:"reply_max_chars"`
	// MaxInputChars caps one inbound message, in characters, on every
	// channel and the chat API; past it the message is refused, not stored.
	MaxInputChars int `yaml:"max_input_chars"`
}

// Console configures `switchboard chat`.
type Console struct {
	User string `yaml:"user"` // who you are in the terminal chat
	// StreamPreview prints the reply as the model writes it; off, each
	// reply is printed whole when it is sent.
	StreamPreview bool `yaml:"stream_preview"`
}

// Cluster configures how replicas on one PostgreSQL store share the work
// (store.driver: postgres). Each chat is owned by one replica at a time;
// roles (the Telegram poller, the scheduler, Discord shards) are held by
// one replica each.
type Cluster struct {
	// ReplicaID names this process among the replicas; it must be unique
	// among those running. Empty: <hostname>-<pid>.
	ReplicaID string `yaml:"replica_id"`
	// LeaseTTL is how long a replica may go without a heartbeat before its
	// chats and roles pass to another replica.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// PollInterval is how often a replica looks for stored messages of
	// chats nobody owns (taken in by another replica, or left by a dead one).
	PollInterval time.Duration `yaml:"poll_interval"`
}

// Skills configures where skill files are read from.
type Skills struct {
	Dir string `yaml:"dir"`
	// SelfImprove says what happens to the instructions the bot proposes
	// for a skill after turns in which it was active: off (no review),
	// propose (stored for `switchboard skills proposals`) or apply (used
	// from the next turn as a learned overlay, revertable; the files are
	// never rewritten).
	SelfImprove string `yaml:"self_improve"`
	// Grants says, per skill name, what a skill may reach: a skill whose
	// tools need a host or a ${VAR} it is not granted is not offered.
	Grants map[string]SkillGrant `yaml:"grants,omitempty"`
}

// SkillGrant is what the operator lets one skill use (skills.grants.NAME).
type SkillGrant struct {
	// Hosts are the hosts, or host:port, its http tools may reach (also
	// where the outbound guard would refuse them: loopback, private).
	Hosts []string `yaml:"hosts"`
	// Env are the environment variables its ${VAR} may expand; the
	// gateway's own secrets are never expanded, even if named here.
	Env []string `yaml:"env"`
}

// Learning configures what the bot learns after each turn, in the
// background: memories, user profiles and (with skills.self_improve) skill
// reviews.
type Learning struct {
	Enabled            bool          `yaml:"enabled"`              // off: nothing is learned or recalled
	EveryNTurns        int           `yaml:"every_n_turns"`        // run the jobs after every Nth turn of a user in a chat
	IdleAfter          time.Duration `yaml:"idle_after"`           // or once the chat has been quiet this long; 0: every Nth turn only
	JobTimeout         time.Duration `yaml:"job_timeout"`          // one job run
	QueueSize          int           `yaml:"queue_size"`           // users and chats waiting for a run
	MemoryPromptTokens int           `yaml:"memory_prompt_tokens"` // budget of recalled memories in a prompt; 0 keeps them out
}

// Tools configures the built-in tools. Those that touch the machine
// (commands, workspace files) are off by default; web_fetch is on, as it
// reaches only public addresses.
type Tools struct {
	Command CommandTool `yaml:"command"`
	Web     WebTools    `yaml:"web"`
	Files   FileTools   `yaml:"files"`
}

// WebTools governs web_fetch and web_search.
type WebTools struct {
	Enabled bool `yaml:"enabled"` // off: neither web tool is offered
	// AllowHosts lists host names, IP addresses or CIDR networks web_fetch
	// may reach although they are not public (loopback, private, link-local,
	// this host's own…); a name or an address may carry a port, then only
	// that port is allowed.
	AllowHosts   []string      `yaml:"allow_hosts"`
	Timeout      time.Duration `yaml:"timeout"`       // one fetch or search, body included
	MaxBytes     int           `yaml:"max_bytes"`     // download cap; the rest is not read
	MaxChars     int           `yaml:"max_chars"`     // result cap, in characters
	MaxRedirects int           `yaml:"max_redirects"` // 0 follows none
	Search       WebSearch     `yaml:"search"`
}

// WebSearch chooses web_search's provider; without one the tool is absent.
type WebSearch struct {
	Provider string `yaml:"provider"`              // "", searxng, brave or tavily
	URL      string `yaml:"url" secret:"url"`      // searxng: the instance; brave, tavily: an endpoint override
	APIKey   string `yaml:"api_key" secret:"true"` // brave and tavily
}

// FileTools governs the workspace file tools (file_read, file_write,
// file_list, file_edit).
type FileTools struct {
	Enabled  bool   `yaml:"enabled"`   // off: the file tools are not offered
	Root     string `yaml:"root"`      // the only directory they may touch
	PerChat  bool   `yaml:"per_chat"`  // a folder per chat under root (<channel>/<chat>)
	MaxBytes int    `yaml:"max_bytes"` // largest file read, written or edited
}

// CommandTool governs skill tools of kind "command".
type CommandTool struct {
	Enabled        bool          `yaml:"enabled"`          // off: command tools refuse to run
	Workspace      string        `yaml:"workspace"`        // the only directory commands run in and may name paths in
	Timeout        time.Duration `yaml:"timeout"`          // per run
	MaxOutputChars int           `yaml:"max_output_chars"` // longer output is truncated
	// ConnectPorts are the TCP ports commands may connect to (Landlock ABI
	// 4+). Empty, the default: none, so a command cannot reach the
	// gateway's own HTTP API, a database or the network.
	ConnectPorts []int `yaml:"connect_ports"`
}

// MCP lists Model Context Protocol servers whose tools join the tool set.
type MCP struct {
	Servers []MCPServer `yaml:"servers"`
}

// MCPServer is one MCP server: a local command (stdio) or a URL (streamable HTTP).
type MCPServer struct {
	Name    string        `yaml:"name"`    // tool names are prefixed "<name>__"
	Command []string      `yaml:"command"` // argv of a stdio server
	Env     []string      `yaml:"env"`     // KEY=value pairs for a stdio server
	URL     string        `yaml:"url"`     // a streamable HTTP server
	Headers []string      `yaml:"headers"` // "Name: value" pairs for an HTTP server
	Timeout time.Duration `yaml:"timeout"` // per call
	// StartupTimeout bounds starting the server (or connecting to it) and
	// listing its tools, at start and at each retry.
	StartupTimeout time.Duration `yaml:"startup_timeout"`
}

// Schedule configures scheduled jobs: those listed here, and those people
// create in conversation.
type Schedule struct {
	Jobs []ScheduleJob `yaml:"jobs"`
	// MissedGrace is how late a job may still run once, after the service
	// was down at its time; older runs are skipped and recorded as missed.
	MissedGrace time.Duration `yaml:"missed_grace"`
	// MaxFailures failed runs in a row disable a job and tell its owner.
	MaxFailures int `yaml:"max_failures"`
}

// ScheduleJob is a job defined by the operator, identified by its name.
type ScheduleJob struct {
	Name     string `yaml:"name"`
	Spec     string `yaml:"spec"`     // "0 9 * * MON", "@daily", "@every 2h" or "at 2026-12-24 09:00"
	Timezone string `yaml:"timezone"` // IANA zone of the spec; empty: agent.timezone
	Channel  string `yaml:"channel"`  // console or a chat platform's name (telegram, discord)
	Chat     string `yaml:"chat"`     // the chat's id on that channel
	Kind     string `yaml:"kind"`     // reminder (Text sent as is) or task (Prompt run as an agent turn)
	Text     string `yaml:"text"`
	Prompt   string `yaml:"prompt"`
	MaxSteps int    `yaml:"max_steps"` // tasks: 0 uses agent.max_steps
}

// HTTP configures the HTTP API.
type HTTP struct {
	Listen string `yaml:"listen"`                                           // host:port; empty disables the HTTP API
	Token  string `yaml:"token" secret:"true" env:"SWITCHBOARD_HTTP_TOKEN"` // required unless Listen is a loopback address
	// PublicHosts are the host names clients use to reach the server, as
	// they appear in the Host header ("name" for any port, "name:port"
	// for one): behind a proxy that keeps Host, or on a non-loopback
	// listen address. Loopback names and IP addresses are always accepted.
	PublicHosts []string `yaml:"public_hosts"`
}

// Log configures logging.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn or error
	Format string `yaml:"format"` // text or json
}

// Built-in defaults, each with the reason it was chosen.
const (
	// The public OpenAI endpoint: the API every compatible server imitates.
	defaultBaseURL = "https://api.openai.com/v1"
	// What current OpenAI models accept; set it lower for smaller models, as
	// compaction relies on it to decide when a conversation must shrink.
	defaultContextWindow = 128000
	// Enough to ride out a rate-limit burst or a dropped connection without
	// making a user wait minutes for a reply that will not come.
	defaultMaxRetries = 3
	// A long answer can stream for minutes; shorter limits cut off good
	// answers, longer ones hide a hung server. With the retries it fits
	// inside agent.turn_timeout: 4 attempts × 120s + 60s of waits < 10m.
	defaultRequestTimeout = 120 * time.Second
	// No byte for a minute is a hung server (or a silent proxy), not a
	// model thinking: servers send their first bytes within seconds, and
	// keep-alive comments or chunks while they work.
	defaultStreamIdleTimeout = 60 * time.Second
	defaultCurrency          = "USD" // as the providers publish their prices
	// modelRetryWaits is the most one model call waits between retries
	// (llm.DefaultMaxRetryWait), for the consistency warning.
	modelRetryWaits = 60 * time.Second
	// Embedded, nothing to install or run beside the binary; PostgreSQL is
	// for several replicas.
	defaultStoreDriver = StoreSQLite
	// Beside the configuration file (see storeNextTo), or in the working
	// directory when there is none, so a fresh checkout runs as is.
	defaultStorePath = "switchboard.db"
	// A neutral name that says what the bot is.
	defaultAgentName = "Switchboard"
	// Servers usually run in UTC; operators set their own zone explicitly.
	defaultTimezone = "UTC"
	// Generous for real multi-tool work, yet stops a model stuck in a tool
	// loop before it burns much money.
	defaultMaxSteps = 50
	// A turn waits on the network (the model, tools, the chat platform),
	// not on the CPU: a burst of 50 turns at once costs the gateway under
	// 10 % of one core over its 3 s and about 0.2 MB of peak memory per
	// turn (bench/burst; 1,000 at once peak at 140 MB, bench/suite), so 64
	// at once are some 15 MB. At 4, a burst of 50 users with a 2 s
	// model ran in rounds and the last waited 26 s; at 64 they are all
	// answered in one model latency. A provider that rate-limits is capped
	// with llm.max_concurrent_requests instead.
	defaultMaxConcurrentTurns = 64
	// Long enough for 50 steps of slow tools, short enough that a stuck turn
	// releases its chat the same day.
	defaultTurnTimeout = 10 * time.Minute
	// About 12k tokens: a whole web page or log tail fits, a runaway dump
	// does not fill the context window.
	defaultToolResultMaxChars = 50000
	// defaultHistoryBudget: about 20 KB of conversation, the last 15 to 35
	// exchanges verbatim, with the rolling summary and recalled memories
	// for the rest; a request stays under 30 KB (~7k tokens) with the
	// static prompt and tools however long the conversation grows, and a
	// 300-turn chat sends 0.56× the model bytes it sent with 12,000
	// (bench/economy, issue 32).
	defaultHistoryBudget = 5000
	// defaultApprovalTimeout leaves time to notice a request, yet a stale
	// one does not run hours later by surprise.
	defaultApprovalTimeout = time.Hour
	// defaultModelOutageMaxAge: long enough for a provider's incident or a
	// model server's restart, short enough that a late answer is still
	// wanted.
	defaultModelOutageMaxAge = time.Hour
	// defaultStillWorkingAfter: longer than a model takes to start an
	// answer, short enough that a user does not wonder whether the bot is
	// there (the typing indicator alone says nothing of a hung server).
	defaultStillWorkingAfter = 30 * time.Second
	// defaultPlanStepMaxSteps: a plan step is one focused piece of work.
	defaultPlanStepMaxSteps = 10
	// defaultPlanFeedbackTimeout: a plan goes on if nobody answers.
	defaultPlanFeedbackTimeout = 10 * time.Minute
	// The name the console user gets in the store and in the prompt.
	defaultConsoleUser = "local"
	// Beside the configuration file (see skillsNextTo), like the database;
	// not "skills", which in a clone of the repository is a Go package.
	defaultSkillsDir = "switchboard-skills"
	// legacySkillsDir is the default of earlier versions, in the working
	// directory.
	legacySkillsDir = "skills"
	// defaultWorkspace is where command tools run: a directory of its own,
	// never the service's working directory with its config and database.
	defaultWorkspace = "workspace"
	// defaultCommandTimeout stops a hung command before it holds a turn.
	defaultCommandTimeout = 30 * time.Second
	// defaultCommandOutput fits a page of output in the model's context.
	defaultCommandOutput = 20000
	// web_fetch is on: its dialer reaches only public addresses, its results
	// are labelled untrusted, and a bot that cannot look anything up is a toy.
	defaultWebEnabled = true
	// defaultWebTimeout: a slow page is better skipped than a turn held up.
	defaultWebTimeout = 15 * time.Second
	// defaultWebMaxBytes (2 MiB) is far more than any article's HTML, far
	// less than the video someone links to.
	defaultWebMaxBytes = 2 << 20
	// defaultWebMaxChars: about 5k tokens, a long article.
	defaultWebMaxChars = 20000
	// defaultWebMaxRedirects follows the usual http→https→www chains.
	defaultWebMaxRedirects = 5
	// defaultFilesRoot is the same directory command tools use, so files the
	// bot writes can be sent with send_file and used by commands.
	defaultFilesRoot = "workspace"
	// defaultFilesMaxBytes (1 MiB): a long document fits, a dump does not.
	defaultFilesMaxBytes = 1 << 20
	// Proposals wait for the operator: a conversation should not change
	// how a skill behaves for everyone without a human looking.
	defaultSelfImprove = "propose"
	// One learning pass (one model call for memories and the profile) per
	// ten turns, or sooner when the chat pauses (defaultIdleAfter): a small
	// fraction of what the turns cost.
	defaultEveryNTurns = 10
	// A few quiet minutes end a burst of messages: what was said is learned
	// before the user comes back, without a call per message.
	defaultIdleAfter = 3 * time.Minute
	// A model call or two with room for a slow provider.
	defaultJobTimeout = 60 * time.Second
	// Users and chats waiting for a run; beyond it work is dropped and
	// picked up by the user's next run (the cursors keep it).
	defaultLearningQueue = 64
	// About a dozen remembered facts: useful context, small next to any
	// context window.
	defaultMemoryPromptTokens = 500
	// defaultMCPTimeout bounds one MCP tool call.
	defaultMCPTimeout = 60 * time.Second
	// An hour late, "remind me at 9" is still useful; a morning digest at
	// noon is not: older missed runs are skipped and recorded.
	defaultMissedGrace = time.Hour
	// Three failures in a row is a broken job, not a passing glitch.
	defaultMaxFailures = 3
	// Loopback only, so a fresh install exposes nothing to the network and
	// needs no token.
	defaultHTTPListen = "127.0.0.1:8080"
	// Most turns finish within seconds, and systemd's default stop timeout
	// (90s) leaves room to close the store after this; longer turns are
	// checkpointed and resume after the restart.
	defaultShutdownTimeout = 20 * time.Second
	// Info shows start-up, connections and errors without per-message noise.
	defaultLogLevel = "info"
	// Text reads well in a terminal; choose json for a log collector.
	defaultLogFormat = "text"

	defaultLeaseTTL     = 15 * time.Second
	defaultPollInterval = 250 * time.Millisecond

	// A day outlasts a platform outage and a night with nobody to look;
	// an answer older than that confuses more than it helps.
	defaultReplyMaxAge = 24 * time.Hour
	// 16,000 characters is four Telegram messages, eight Discord ones: more
	// than any answer needs; a runaway reply (a dump, a loop) is cut rather
	// than sent as dozens of messages.
	defaultReplyMaxChars = 16_000
	// 32,000 characters is far above what a chat platform lets a person
	// type in one message (Telegram 4096, Discord 4000 with Nitro) and a
	// small share of a 128k-token context; a pasted dump past it is refused
	// before it is stored, rather than stored and then refused as too big.
	defaultMaxInputChars = 32_000
)

// Default returns the built-in defaults. It has no model and no secrets, so
// it does not pass Validate on its own; Load adds those from the environment.
// Settings without a default (api_key, model, system_prompt, tokens, allow
// lists, gateway_url, the token budgets, max_output_tokens) are zero.
func Default() *Config {
	return &Config{
		LLM: LLM{
			BaseURL:        defaultBaseURL,
			ContextWindow:  defaultContextWindow,
			MaxRetries:     defaultMaxRetries,
			RequestTimeout: defaultRequestTimeout,

			StreamIdleTimeout: defaultStreamIdleTimeout,
			Models:            map[string]LLMModel{},
			Prices:            map[string]Price{},
			Currency:          defaultCurrency,
		},
		Store: Store{Driver: defaultStoreDriver, Path: defaultStorePath},
		Agent: Agent{
			Name:                defaultAgentName,
			Timezone:            defaultTimezone,
			MaxSteps:            defaultMaxSteps,
			MaxConcurrentTurns:  defaultMaxConcurrentTurns,
			TurnTimeout:         defaultTurnTimeout,
			ToolResultMaxChars:  defaultToolResultMaxChars,
			HistoryBudget:       defaultHistoryBudget,
			ApprovalTimeout:     defaultApprovalTimeout,
			PlanStepMaxSteps:    defaultPlanStepMaxSteps,
			PlanFeedbackTimeout: defaultPlanFeedbackTimeout,
			ModelOutageMaxAge:   defaultModelOutageMaxAge,
			StillWorkingAfter:   defaultStillWorkingAfter,
		},
		Channels: Channels{
			Console:     Console{User: defaultConsoleUser, StreamPreview: true},
			Sections:    newSections(), // each with its package's defaults
			ReplyMaxAge: defaultReplyMaxAge,

			ReplyMaxChars: defaultReplyMaxChars,
			MaxInputChars: defaultMaxInputChars,
		},
		Skills: Skills{Dir: defaultSkillsDir, SelfImprove: defaultSelfImprove, Grants: map[string]SkillGrant{}},
		Learning: Learning{Enabled: true, EveryNTurns: defaultEveryNTurns, IdleAfter: defaultIdleAfter, JobTimeout: defaultJobTimeout,
			QueueSize: defaultLearningQueue, MemoryPromptTokens: defaultMemoryPromptTokens},
		Tools: Tools{
			Command: CommandTool{Workspace: defaultWorkspace, Timeout: defaultCommandTimeout,
				MaxOutputChars: defaultCommandOutput},
			Web: WebTools{Enabled: defaultWebEnabled, Timeout: defaultWebTimeout, MaxBytes: defaultWebMaxBytes,
				MaxChars: defaultWebMaxChars, MaxRedirects: defaultWebMaxRedirects},
			Files: FileTools{Root: defaultFilesRoot, MaxBytes: defaultFilesMaxBytes},
		},
		Schedule:        Schedule{MissedGrace: defaultMissedGrace, MaxFailures: defaultMaxFailures},
		HTTP:            HTTP{Listen: defaultHTTPListen},
		Log:             Log{Level: defaultLogLevel, Format: defaultLogFormat},
		Cluster:         Cluster{LeaseTTL: defaultLeaseTTL, PollInterval: defaultPollInterval},
		ShutdownTimeout: defaultShutdownTimeout,
	}
}

// source records where a loaded Config's values came from.
type source struct {
	file  string
	lines map[string]int    // key path ("llm.model", "channels.telegram.allow_users[1]") → line
	env   map[string]string // key path → environment variable it was taken from
	// storeNote explains a store.path kept in the working directory for an
	// earlier version's database (see storeNextTo); empty otherwise.
	storeNote string
	// skillsNote likewise explains a skills.dir kept at an earlier
	// version's default (see skillsNextTo).
	skillsNote string
}

// where returns the file and line at which key was set, if it was set in a file.
func (s *source) where(key string) (string, int) {
	if s == nil {
		return "", 0
	}
	line := s.lines[key]
	if line == 0 {
		return "", 0
	}
	return s.file, line
}

// fromEnv returns the environment variable key was taken from, if any.
func (s *source) fromEnv(key string) string {
	if s == nil {
		return ""
	}
	return s.env[key]
}

// MinHTTPTokenLen is the shortest http.token accepted when http.listen is
// not a loopback address: the login form and the bearer check are slowed
// per client, but a short token still falls to a patient botnet.
const MinHTTPTokenLen = 16
