// Package gateway builds, serves and stops the whole Switchboard: the
// store, the model, the agent and the router, the channels under a
// supervisor, the HTTP server, the scheduler, the learner and, on a shared
// PostgreSQL store, the replica. The cli package parses the command line
// and maps what this package returns to exit codes.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/approvals"
	"github.com/switchboard-gateway/switchboard/assembly"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/cluster"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/delegate"
	"github.com/switchboard-gateway/switchboard/httpapi"
	"github.com/switchboard-gateway/switchboard/internal/gcpace"
	"github.com/switchboard-gateway/switchboard/internal/redact"
	"github.com/switchboard-gateway/switchboard/learning"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/mcpclient"
	"github.com/switchboard-gateway/switchboard/metrics"
	"github.com/switchboard-gateway/switchboard/plans"
	"github.com/switchboard-gateway/switchboard/profile"
	"github.com/switchboard-gateway/switchboard/reply"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/schedule"
	"github.com/switchboard-gateway/switchboard/skills"
	"github.com/switchboard-gateway/switchboard/store"
)

// Options are what Build needs besides the configuration.
type Options struct {
	// Version is the running build's version, for logs, metrics, /readyz
	// and the replica's info.
	Version string
	// Logger is the process logger (secrets redacted); nil discards.
	Logger *slog.Logger
	// Level is Logger's level, which Reload changes; nil: it does not.
	Level *slog.LevelVar
	// ConfigPath is the file Reload reads again ("" for ./config.yaml or
	// the defaults and the environment).
	ConfigPath string

	// StoreOptions are more options for the store (tests: a database that
	// cannot take writes, store.WithMaxPages, store.WithReadOnly).
	StoreOptions []store.Option
	// BeforeRouterStart, if set, runs just before Serve starts the router
	// (tests: a stop while starting).
	BeforeRouterStart func()
	// EarlyChannels makes Build start building the chat channels while
	// the store opens, for Serve to run (see earlyChannels). serve sets
	// it; a terminal chat, which runs no chat channel, does not.
	EarlyChannels bool
	// LearningRunner, if set, makes the learning runner from the
	// configured one's settings instead of learning.NewRunner (tests: jobs
	// that fail, short timeouts).
	LearningRunner func(learning.Config) *learning.Runner
}

// Gateway is the wired gateway.
type Gateway struct {
	cfg    *config.Config
	opts   Options
	log    *slog.Logger
	loc    *time.Location // agent.timezone
	rid    string         // the replica id among replicas; "" on SQLite
	store  *store.Store
	skills *skills.Watcher
	mcp    *mcpclient.Manager
	model  *llm.Client
	agent  *agent.Agent
	router *router.Router
	sched  *schedule.Scheduler // started after the router, stopped before it
	mon    *monitor            // metrics, dashboard activity, the HTTP API channel
	learn  *learner            // memories, profiles, skill reviews after each turn
	pacer  *gcpace.Pacer       // the GC target by load; nil if GOGC is set
	// serving is set once the router has started (/readyz waits for it).
	serving atomic.Bool
	// replica is this process among replicas sharing a PostgreSQL store;
	// nil on SQLite.
	replica *cluster.Replica
	// sup runs the channels while serving (Reload changes their access).
	sup *supervisor
	// early are the channels Build began to build (nil if none).
	early *earlyChannels
	// closers undo Build, last first.
	closers cleanup
	// skillsLoaded is closed once skills is set (loadSkills).
	skillsLoaded <-chan struct{}
	// redact hides the secrets in tool results, replies and dashboard
	// pages; Reload adds those a new configuration holds.
	redact *redact.Redactor
}

// cleanup is a stack of functions that undo what was built, run last
// first: what was opened first (the store) is closed last.
type cleanup []func()

func (c *cleanup) push(f func()) { *c = append(*c, f) }

func (c *cleanup) run() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
	*c = nil
}

// Build opens the store and wires model, agent and router, in the named
// steps below, each of which may push what undoes it on g.closers. Close the
// Gateway when done.
func Build(ctx context.Context, cfg *config.Config, opts Options) (*Gateway, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{cfg: cfg, opts: opts, log: log}
	// The instance lock, then the channels' round trips to their platforms
	// (Options.EarlyChannels), then everything else while they travel.
	if err := g.lockStore(); err != nil {
		return nil, err
	}
	g.startChannelsEarly(ctx)
	if err := g.wire(); err != nil {
		g.Close()
		return nil, err
	}
	g.loadSkills()
	for _, step := range []func(context.Context) error{
		g.openStore,     // the store, the replica
		g.buildSchedule, // the operator's jobs and the schedule tools
		g.connectMCP,    // MCP servers (one that is down is retried later)
		g.buildAgent,    // skills and the agent loop
		g.buildLearner,  // memories, profiles, skill reviews; the GC pacer
		g.buildRouter,   // background tasks, assembly, interceptors, the router
	} {
		if err := step(ctx); err != nil {
			g.Close()
			return nil, err
		}
	}
	return g, nil
}

// wire makes what every step needs: the time zone, the model client, the
// redactor and the monitor.
func (g *Gateway) wire() error {
	cfg, opts, log := g.cfg, g.opts, g.log
	loc, err := time.LoadLocation(cfg.Agent.Timezone)
	if err != nil {
		return fmt.Errorf("agent.timezone: %w", err)
	}
	retries := cfg.LLM.MaxRetries
	if retries == 0 {
		retries = -1 // llm.max_retries: 0 disables them; llm.Config's 0 is its default
	}
	mc := cfg.LLM.ClientConfig() // endpoint, models, provider and per-model settings
	mc.MaxRetries, mc.RequestTimeout, mc.MaxConcurrentRequests = retries, cfg.LLM.RequestTimeout, cfg.LLM.MaxConcurrentRequests
	mc.StreamIdleTimeout, mc.Logger = cfg.LLM.StreamIdleTimeout, log.With("component", "llm")
	model, err := llm.New(mc)
	if err != nil {
		return err
	}
	rid := ReplicaID(cfg)
	if rid != "" {
		log = log.With("replica", rid)
	}
	r := redact.New(secretsOf(cfg))
	m := newMonitor(cfg, opts.Version, rid, model, log)
	g.log, g.loc, g.rid, g.model, g.redact, g.mon = log, loc, rid, model, r, m
	return nil
}

// openStore opens the store and, on a shared PostgreSQL store, makes this
// process a replica.
func (g *Gateway) openStore(ctx context.Context) error {
	log := g.log
	// The logger first, so a test's StoreOptions may replace it.
	st, err := store.OpenDriver(ctx, g.cfg.Store.Driver, g.cfg.Store.Source(),
		append([]store.Option{store.WithLogger(log.With("component", "store"))}, g.opts.StoreOptions...)...)
	if err != nil {
		return err
	}
	g.store = st
	if g.early != nil {
		g.early.inbox.set(st)
	}
	g.closers.push(func() {
		if err := st.Close(); err != nil {
			log.Error("close store", "err", err)
		}
	})
	g.checkStore(ctx, st)
	g.replica, err = newReplica(g.cfg, g.opts.Version, g.rid, st, log)
	return err
}

// checkStore runs the store's quick integrity check in the background, so
// a large file does not delay the start: damage it finds turns /readyz
// 503 and is logged at ERROR with the fix (store.DamageError). Close
// waits for it. A database this start created holds nothing to check (and
// the check's connection and reads would compete with the first poll).
func (g *Gateway) checkStore(ctx context.Context, st *store.Store) {
	if st.Created() {
		return
	}
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		err := st.CheckIntegrity(cctx, false)
		switch {
		case err == nil:
			g.log.Debug("store: integrity check passed", "took", time.Since(start).Round(time.Millisecond))
		case store.Damaged(err):
			// Logged by the store, at ERROR.
		case cctx.Err() == nil:
			g.log.Warn("store: the integrity check could not run", "err", err)
		}
	}()
	g.closers.push(func() {
		cancel()
		<-done
	})
}

// buildSchedule makes the scheduler of the operator's jobs and the jobs
// users ask for.
func (g *Gateway) buildSchedule(context.Context) error {
	cfg, st := g.cfg, g.store
	sched, err := schedule.New(schedule.Config{Store: st, Jobs: cfg.Schedule.Jobs, Location: g.loc, MissedGrace: cfg.Schedule.MissedGrace,
		MaxFailures: cfg.Schedule.MaxFailures, Logger: g.log.With("component", "schedule"),
		OnRun:   func(r schedule.Report) { g.mon.metrics.JobDone("schedule", r.Outcome) },
		ZoneFor: profile.New(profile.Config{Store: st, Logger: g.log}).ZoneFor}) // the zone users told the bot
	if err != nil {
		return err
	}
	if g.replica != nil {
		sched.MaxSleep(4 * cfg.Cluster.PollInterval) // jobs made on other replicas
	}
	g.sched = sched
	return nil
}

// connectMCP connects the MCP servers; one that is down is logged and
// retried in the background.
func (g *Gateway) connectMCP(ctx context.Context) error {
	log := g.log
	mcp, mcpErrs := mcpclient.Connect(ctx, g.cfg.MCP.Servers, log.With("component", "mcp"))
	for _, err := range mcpErrs {
		log.Error("MCP server problem (a server that is down is retried in the background)", "err", err)
	}
	g.mcp = mcp
	g.closers.push(func() {
		if err := mcp.Close(); err != nil {
			log.Warn("close MCP servers", "err", err)
		}
	})
	return nil
}

// loadSkills starts reading and checking the skill files while the store
// opens (neither needs the other: two cores start sooner than one);
// buildAgent waits for them, and so does Close.
func (g *Gateway) loadSkills() {
	cfg := g.cfg
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		g.skills = skills.NewWatcher(os.DirFS(cfg.Skills.Dir), skills.Builtin(), skills.Env{
			Model:   g.mon.model,
			Command: skills.CommandPolicyOf(cfg.Tools.Command),
			Grants:  cfg.Skills.Grants, Secrets: cfg.Secrets(),
		}, g.log.With("component", "skills"))
	}()
	g.skillsLoaded = loaded
	g.closers.push(func() { <-loaded })
}

// buildAgent makes the agent loop with the tools every turn has, once the
// skills are loaded (loadSkills).
func (g *Gateway) buildAgent(context.Context) error {
	cfg, log := g.cfg, g.log
	<-g.skillsLoaded
	ag, err := agent.New(agent.Config{
		Model: g.mon.model, Store: redactingStore{Store: g.store, redact: g.redact.String},
		Sources: assembly.Static(assembly.StaticSources{Location: g.loc, Web: webTools(cfg), Files: fileTools(cfg, g.skills.Current),
			MCP: g.mcp.Source(), Schedule: g.sched.Source()}),
		Identity:             agent.Identity{Name: cfg.Agent.Name, Instructions: cfg.Agent.SystemPrompt},
		Location:             g.loc,
		ContextWindow:        cfg.LLM.ContextWindow,
		HistoryBudget:        cfg.Agent.HistoryBudget,
		MaxSteps:             cfg.Agent.MaxSteps,
		ToolResultMaxChars:   cfg.Agent.ToolResultMaxChars,
		MaxOutputTokens:      cfg.LLM.MaxOutputTokens,
		TurnTokenBudget:      cfg.Agent.TurnTokenBudget,
		UserDailyTokenBudget: cfg.Agent.UserDailyTokenBudget,
		Logger:               log.With("component", "agent"),
		Redact:               g.redact.String,
	})
	if err != nil {
		return err
	}
	g.agent = ag
	return nil
}

// buildLearner makes what learns after each turn in the background, and
// the GC pacer that follows the load.
func (g *Gateway) buildLearner(ctx context.Context) error {
	g.learn = newLearner(ctx, g.cfg, g.store, backgroundModel{g.mon.model}, g.skills, g.opts.LearningRunner, g.log)
	g.closers.push(g.learn.close)
	g.pacer = gcpace.New()
	g.pacer.OnQuiet(g.store.ReleaseIdle)
	g.closers.push(g.pacer.Stop)
	return nil
}

// onEvent observes every turn event, of chat turns and background tasks:
// metrics, the dashboard, logs and the learner.
func (g *Gateway) onEvent(in channels.Inbound, ev agent.Event) {
	g.mon.onEvent(in, ev)
	g.learn.onEvent(in, ev)
}

// buildRouter makes the background tasks, what a turn gets (assembly),
// the interceptors and the router, and feeds the router's figures to the
// metrics.
func (g *Gateway) buildRouter(context.Context) error {
	cfg, st, ag, mon, lrn, log := g.cfg, g.store, g.agent, g.mon, g.learn, g.log
	var shared router.Cluster // nil unless replicas share the store
	if g.replica != nil {
		shared = g.replica
	}
	tasks := delegate.New(delegate.Config{Agent: ag, Store: st, TurnTimeout: cfg.Agent.TurnTimeout, Location: g.loc, Logger: log,
		OnEvent: g.onEvent})
	watcher := g.skills
	asm := assembly.New(assembly.Config{
		Skills:   func(ctx context.Context) *skills.Registry { return lrn.skills(ctx, watcher.Current()) },
		Learning: cfg.Learning.Enabled, Memory: lrn.memory, Profiles: lrn.profile,
		Delegate: tasks, Logger: log,
	})
	rt, err := router.New(router.Config{
		Cluster: shared,
		Store:   st, Agent: ag,
		MaxConcurrentTurns: cfg.Agent.MaxConcurrentTurns,
		TurnTimeout:        cfg.Agent.TurnTimeout,
		ModelName:          cfg.LLM.Model,
		Prices:             pricesOf(cfg),
		Vision:             cfg.LLM.Vision,
		Transcribe:         transcriber(g.model, cfg.LLM.TranscriptionModel),
		Location:           g.loc,
		Logger:             log,
		MaxInputChars:      cfg.Channels.MaxInputChars,
		Replies: reply.Options{
			FilesRoot:    cfg.Tools.Files.Root,
			Preview:      channelSwitch(cfg, func(c *channels.Common) bool { return c.StreamPreview }),
			ToolProgress: channelSwitch(cfg, func(c *channels.Common) bool { return c.ShowToolProgress }),
			OnSend:       mon.onSend,
			Outbox:       st,
			OutboxConfig: reply.OutboxConfig{MaxAge: cfg.Channels.ReplyMaxAge,
				OnEvent: func(ev reply.OutboxEvent) { mon.metrics.Outbox(ev.Kind, ev.Channel) }},
			Redact:   g.redact.String,
			MaxChars: cfg.Channels.ReplyMaxChars,

			StillWorkingAfter: cfg.Agent.StillWorkingAfter,
		},
		Hooks: router.Hooks{
			OnEvent:     g.onEvent,
			Load:        g.pacer.Observe,
			Prepare:     asm.Message,
			PrepareJob:  asm.Job,
			StatusNotes: lrn.statusNotes(statusNotes(watcher, g.mcp, g.channelStatuses)),
		},
		ModelWait: router.ModelWait{MaxAge: cfg.Agent.ModelOutageMaxAge, Answered: mon.model.Answered, Down: modelDown(mon.model.Health)},
		Learning:  lrn.commands(),
		Interceptors: []router.Interceptor{
			approvals.New(approvals.Config{Store: st, Timeout: cfg.Agent.ApprovalTimeout,
				TurnTimeout: cfg.Agent.TurnTimeout, Logger: log}),
			plans.New(plans.Config{Store: st, Planner: ag, StepMaxSteps: cfg.Agent.PlanStepMaxSteps,
				FeedbackTimeout: cfg.Agent.PlanFeedbackTimeout, TurnTimeout: cfg.Agent.TurnTimeout, Logger: log}),
		},
		Tasks: tasks,
	})
	if err != nil {
		return err
	}
	g.router = rt
	mon.metrics.Queue(rt.QueueDepth, rt.Busy)
	mon.metrics.RepliesPending(rt.PendingReplies)
	mon.metrics.StoreTransactions(st.TxCounts)
	mon.metrics.ModelWaits(func() (int, map[string]uint64) {
		w := rt.ModelWaits()
		return w.Waiting, map[string]uint64{metrics.Held: w.Held, metrics.Answered: w.Answered, metrics.GivenUp: w.GivenUp}
	})
	return nil
}

// channelStatuses reports the chat channels while serving (none before).
func (g *Gateway) channelStatuses() []httpapi.ChannelStatus {
	if g.sup == nil {
		return nil
	}
	return g.sup.statuses()
}

// Close stops the background work and closes the store, last.
func (g *Gateway) Close() {
	if g.early != nil {
		g.early.cancel() // before the store closes
	}
	g.closers.run()
}

// lockStore keeps a second serve or chat off a SQLite store (issue 31):
// the second one ends here naming the first. PostgreSQL replicas share
// their store by design (the cluster's leases). A lock that cannot be
// taken at all (a read-only directory, no locks on the file system) is
// logged and served without.
func (g *Gateway) lockStore() error {
	if g.cfg.Store.Driver == config.StorePostgres || g.cfg.Store.Path == "" {
		return nil
	}
	_ = os.MkdirAll(filepath.Dir(g.cfg.Store.Path), 0o750) // store.Open reports a failure with its fix
	lock, err := store.LockInstance(g.cfg.Store.Path)
	if held := (*store.HeldError)(nil); errors.As(err, &held) {
		return err
	}
	if err != nil {
		g.log.Warn("serving without the instance lock: nothing stops a second process on this store", "err", err)
		return nil
	}
	log := g.log
	g.closers.push(func() { // pushed before the store's: released after it closes
		if err := lock.Close(); err != nil {
			log.Warn("release the instance lock", "err", err)
		}
	})
	return nil
}

// Router is the gateway's router (tests deliver messages through it).
func (g *Gateway) Router() *router.Router { return g.router }

// Store is the gateway's store.
func (g *Gateway) Store() *store.Store { return g.store }

// LearningRunner runs the learning jobs after turns.
func (g *Gateway) LearningRunner() *learning.Runner { return g.learn.runner }

// leave hands this replica's chats and roles to the others at once (a
// graceful stop; a crashed replica's pass after the lease TTL).
func (g *Gateway) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.replica.Stop(ctx); err != nil {
		g.log.Warn("leaving the replicas: the others take this one's chats after the lease TTL", "err", err)
	}
}
