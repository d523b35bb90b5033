package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"switchboard/agent"
	"switchboard/approvals"
	"switchboard/channels"
	"switchboard/channels/console"
	"switchboard/channels/openai"
	"switchboard/cluster"
	"switchboard/config"
	"switchboard/delegate"
	"switchboard/internal/gcpace"
	"switchboard/internal/logging"
	"switchboard/llm"
	"switchboard/mcpclient"
	"switchboard/plans"
	"switchboard/profile"
	"switchboard/router"
	"switchboard/schedule"
	"switchboard/skills"
	"switchboard/store"
)

// app is the wired gateway.
type app struct {
	cfg    *config.Config
	log    *slog.Logger
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
}

// storeOptions are more options for the store build opens. Tests use them
// to serve on a database that cannot take writes, as a full disk or a
// read-only file leaves it (store.WithMaxPages, store.WithReadOnly).
var storeOptions []store.Option

// build opens the store and wires model, agent and router.
func build(ctx context.Context, cfg *config.Config, log *slog.Logger) (*app, error) {
	loc, err := time.LoadLocation(cfg.Agent.Timezone)
	if err != nil {
		return nil, fmt.Errorf("agent.timezone: %w", err)
	}
	model, err := llm.New(llm.Config{
		BaseURL: cfg.LLM.BaseURL, APIKey: cfg.LLM.APIKey, Model: cfg.LLM.Model,
		FallbackModels: cfg.LLM.FallbackModels, MaxRetries: cfg.LLM.MaxRetries,
		RequestTimeout: cfg.LLM.RequestTimeout, Logger: log.With("component", "llm"),
	})
	if err != nil {
		return nil, err
	}
	rid := replicaID(cfg)
	if rid != "" {
		log = log.With("replica", rid)
	}
	mon := newMonitor(cfg, rid, model, log)
	st, err := store.OpenDriver(ctx, cfg.Store.Driver, cfg.Store.Source(), storeOptions...)
	if err != nil {
		return nil, err
	}
	replica, err := newReplica(cfg, rid, st, log)
	if err != nil {
		st.Close()
		return nil, err
	}
	sched, err := schedule.New(schedule.Config{Store: st, Jobs: cfg.Schedule.Jobs, Location: loc, MissedGrace: cfg.Schedule.MissedGrace,
		MaxFailures: cfg.Schedule.MaxFailures, Logger: log.With("component", "schedule"),
		OnRun:   func(r schedule.Report) { mon.metrics.JobDone("schedule", r.Outcome) },
		ZoneFor: profile.New(profile.Config{Store: st, Logger: log}).ZoneFor}) // the zone users told the bot
	if err != nil {
		st.Close()
		return nil, err
	}
	mcp, mcpErrs := mcpclient.Connect(ctx, cfg.MCP.Servers, log.With("component", "mcp"))
	for _, err := range mcpErrs {
		log.Error("MCP server skipped", "err", err)
	}
	cmd := cfg.Tools.Command
	watcher := skills.NewWatcher(os.DirFS(cfg.Skills.Dir), skills.Builtin(), skills.Env{
		Model: mon.model,
		Command: skills.CommandPolicy{Enabled: cmd.Enabled, Workspace: cmd.Workspace,
			Timeout: cmd.Timeout, MaxOutputChars: cmd.MaxOutputChars},
	}, log.With("component", "skills"))
	ag, err := agent.New(agent.Config{
		Model: mon.model, Store: st,
		Sources:              []agent.Source{agent.Builtin(nil, loc), agent.ChannelContext(), webTools(cfg), fileTools(cfg, watcher.Current), mcp.Source(), sched.Source()},
		Identity:             agent.Identity{Name: cfg.Agent.Name, Instructions: cfg.Agent.SystemPrompt},
		Location:             loc,
		ContextWindow:        cfg.LLM.ContextWindow,
		MaxSteps:             cfg.Agent.MaxSteps,
		ToolResultMaxChars:   cfg.Agent.ToolResultMaxChars,
		MaxOutputTokens:      cfg.LLM.MaxOutputTokens,
		TurnTokenBudget:      cfg.Agent.TurnTokenBudget,
		UserDailyTokenBudget: cfg.Agent.UserDailyTokenBudget,
		Logger:               log.With("component", "agent"),
	})
	if err != nil {
		st.Close()
		mcp.Close()
		return nil, err
	}
	lrn := newLearner(ctx, cfg, st, mon.model, watcher, log)
	var shared router.Cluster // nil unless replicas share the store
	if replica != nil {
		shared = replica
		sched.MaxSleep(4 * cfg.Cluster.PollInterval) // jobs made on other replicas
	}
	pacer := gcpace.New()
	tasks := delegate.New(delegate.Config{Agent: ag, Store: st, TurnTimeout: cfg.Agent.TurnTimeout, Location: loc, Logger: log,
		OnEvent: func(in channels.Inbound, ev agent.Event) {
			mon.onEvent(in, ev)
			lrn.onEvent(in, ev)
		}})
	rt, err := router.New(router.Config{
		Cluster: shared,
		Store:   st, Agent: ag,
		MaxConcurrentTurns: cfg.Agent.MaxConcurrentTurns,
		TurnTimeout:        cfg.Agent.TurnTimeout,
		ModelName:          cfg.LLM.Model,
		Vision:             cfg.LLM.Vision,
		FilesRoot:          cfg.Tools.Files.Root,
		Preview:            map[string]bool{"telegram": cfg.Channels.Telegram.StreamPreview, "discord": cfg.Channels.Discord.StreamPreview},
		Transcribe:         transcriber(model, cfg.LLM.TranscriptionModel),
		Location:           loc,
		Logger:             log,
		OnEvent: func(in channels.Inbound, ev agent.Event) {
			mon.onEvent(in, ev)
			lrn.onEvent(in, ev)
		},
		Learning: lrn.commands(),
		OnSend:   mon.onSend,
		Load:     pacer.Observe,
		Prepare: func(ctx context.Context, in channels.Inbound) router.Prepared {
			reg := lrn.skills(ctx, watcher.Current())
			turn := reg.ForTurn(in.Channel, string(in.ChatType), in.Text)
			cmdSkill, _, isCmd := turn.Command()
			p := router.Prepared{Sources: []agent.Source{turn}, Sections: turn.Sections(),
				MaxSteps: turn.MaxSteps(), Catalogue: reg.Catalogue(0), Plan: isCmd && cmdSkill.Mode == "plan"}
			lrn.prepare(ctx, in, reg, turn, &p)
			return p
		},
		Interceptors: []router.Interceptor{
			approvals.New(approvals.Config{Store: st, Timeout: cfg.Agent.ApprovalTimeout,
				TurnTimeout: cfg.Agent.TurnTimeout, Logger: log}),
			plans.New(plans.Config{Store: st, Planner: ag, StepMaxSteps: cfg.Agent.PlanStepMaxSteps,
				FeedbackTimeout: cfg.Agent.PlanFeedbackTimeout, TurnTimeout: cfg.Agent.TurnTimeout, Logger: log}),
		},
		Tasks:       tasks,
		TurnSources: func(in channels.Inbound) []agent.Source { return []agent.Source{tasks.Source(in)} },
		StatusNotes: func() []string {
			var notes []string
			for _, p := range watcher.Current().Problems() {
				notes = append(notes, "Skill problem: "+p.Error())
			}
			for _, m := range mcp.Status() {
				if !m.Connected {
					notes = append(notes, fmt.Sprintf("MCP server %s is not connected: %s", m.Name, m.LastError))
				}
			}
			return notes
		},
	})
	if err != nil {
		pacer.Stop()
		lrn.close()
		st.Close()
		mcp.Close()
		return nil, err
	}
	mon.metrics.Queue(rt.QueueDepth, rt.Busy)
	return &app{cfg: cfg, log: log, store: st, skills: watcher, mcp: mcp, model: model, agent: ag, router: rt, sched: sched, mon: mon, learn: lrn,
		pacer: pacer, replica: replica}, nil
}

func (a *app) close() {
	a.pacer.Stop()
	a.learn.close()
	if err := a.mcp.Close(); err != nil {
		a.log.Warn("close MCP servers", "err", err)
	}
	if err := a.store.Close(); err != nil {
		a.log.Error("close store", "err", err)
	}
}

// leave hands this replica's chats and roles to the others at once (a
// graceful stop; a crashed replica's pass after the lease TTL).
func (a *app) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.replica.Stop(ctx); err != nil {
		a.log.Warn("leaving the replicas: the others take this one's chats after the lease TTL", "err", err)
	}
}

// newLogger builds the process logger with every configured secret redacted.
func newLogger(cfg *config.Config, w io.Writer, minLevel string) (*slog.Logger, error) {
	level := cfg.Log.Level
	if minLevel != "" && levelRank(level) < levelRank(minLevel) {
		level = minLevel
	}
	return logging.New(w, level, cfg.Log.Format, cfg.Secrets())
}

func levelRank(l string) int {
	switch l {
	case "debug":
		return 0
	case "info":
		return 1
	case "warn":
		return 2
	}
	return 3
}

// chat runs a terminal conversation through the same router and loop as
// every other channel. It ends at end of input or on interrupt.
func chat(ctx context.Context, cfg *config.Config, stdin io.Reader, stdout, stderr io.Writer) int {
	// Logs would garble the conversation: only warnings and errors, on stderr.
	log, err := newLogger(cfg, stderr, "warn")
	if err != nil {
		fmt.Fprintf(stderr, "switchboard: %v\n", err)
		return exitConfig
	}
	a, err := build(ctx, cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard: %v\n", err)
		return exitFail
	}
	defer a.close()
	color := false
	if f, ok := stdout.(*os.File); ok {
		color = console.IsTerminal(f)
	}
	con := console.New(console.Options{In: stdin, Out: stdout, User: cfg.Channels.Console.User, Color: color})
	a.router.AddChannel(con, router.Access{AllowAll: true}) // the local operator
	if a.replica != nil {
		if err := a.replica.Start(ctx); err != nil {
			fmt.Fprintf(stderr, "switchboard: %v\n", err)
			return exitFail
		}
		defer a.leave()
	}
	if err := a.router.Start(ctx); err != nil {
		fmt.Fprintf(stderr, "switchboard: %v\n", err)
		return exitFail
	}
	stopWaiting := a.startScheduler(ctx)
	if color {
		fmt.Fprintf(stdout, "Switchboard chat with %s (model %s). /help for commands, Ctrl-D to quit.\n", cfg.Agent.Name, cfg.LLM.Model)
	}
	runErr := con.Run(ctx, a.router)
	// End of input: let the last message be answered, unless interrupted.
	drainCtx, cancel := context.WithTimeout(ctx, cfg.Agent.TurnTimeout)
	defer cancel()
	stopWaiting()
	_ = a.sched.Stop(drainCtx)
	_ = a.router.Drain(drainCtx)
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer scancel()
	_ = a.router.Shutdown(sctx)
	if runErr != nil {
		fmt.Fprintf(stderr, "switchboard: %v\n", runErr)
		return exitFail
	}
	return exitOK
}

// serve runs every enabled channel and the HTTP server until ctx ends
// (SIGINT, SIGTERM), reloading what it safely can on SIGHUP. Each channel
// runs on its own: one that fails to start or drops is retried with a capped
// backoff while the others serve. Then it shuts down gracefully: no new
// messages, running turns get shutdown_timeout to finish (the rest are
// checkpointed and resume after a restart), background work is drained, and
// the store is closed.
func serve(ctx context.Context, cfg *config.Config, cfgPath string, stderr io.Writer) int {
	var level slog.LevelVar
	lv, err := logging.ParseLevel(cfg.Log.Level)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard: %v\n", err)
		return exitConfig
	}
	level.Set(lv)
	log, err := logging.NewLeveled(stderr, &level, cfg.Log.Format, cfg.Secrets())
	if err != nil {
		fmt.Fprintf(stderr, "switchboard: %v\n", err)
		return exitConfig
	}
	for _, w := range cfg.Warnings() {
		log.Warn(w)
	}
	// From the start, so that a SIGHUP while starting waits for the reload
	// instead of ending the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if !cfg.Channels.Telegram.Enabled && !cfg.Channels.Discord.Enabled && cfg.HTTP.Listen == "" {
		log.Error("no channel is enabled: set channels.telegram.enabled or channels.discord.enabled, set http.listen for the OpenAI-compatible API, or talk in the terminal with `switchboard chat`")
		return exitConfig
	}
	a, err := build(ctx, cfg, log)
	if err != nil {
		log.Error("start", "err", err)
		return exitFail
	}
	defer a.close() // last: the store closes after everything that writes to it

	sup := newSupervisor(a.router, log)
	sup.onRestart = a.mon.metrics.ChannelRestarted
	a.mon.metrics.JobSource("learning", a.learningOutcomes)
	a.mon.metrics.Channels(sup.up)
	var roles roleHolder // nil unless replicas share the store
	if a.replica != nil {
		roles = a.replica
	}
	specs := channelSpecs(cfg, log, a.store, roles)
	srv, err := a.startHTTP(sup)
	if err != nil {
		log.Error("start the HTTP server", "err", err)
		return exitFail
	}
	if srv != nil {
		// The chat API authenticates with http.token, so whoever gets in
		// may talk to the agent.
		specs = append(specs, channelSpec{name: openai.ChannelName, access: router.Access{AllowAll: true},
			build: func(context.Context) (channels.Channel, error) { return a.mon.api, nil }})
	}
	if a.replica != nil {
		// Before any chat is taken: a lease lives by its owner's heartbeat.
		if err := a.replica.Start(ctx); err != nil {
			log.Error("join the replicas on the store", "err", err)
			if srv != nil {
				hctx, hcancel := context.WithTimeout(context.WithoutCancel(ctx), httpShutdownGrace)
				defer hcancel()
				_ = srv.Shutdown(hctx)
			}
			return exitFail
		}
		defer a.leave() // after the router and channels have stopped
	}
	run := make(chan struct{})
	chctx, stopChannels := context.WithCancel(ctx) // channels end with ctx, or if the router cannot start
	defer stopChannels()
	sup.start(chctx, specs, run)
	if testHookRouterStart != nil {
		testHookRouterStart()
	}
	if err := a.router.Start(ctx); err != nil {
		// Asked to stop while starting (the router's reads end with ctx):
		// not a failure.
		stopping := ctx.Err() != nil
		if stopping {
			log.Info("stopped while starting")
		} else {
			log.Error("start router", "err", err)
		}
		// As at a shutdown: the router (its workers, and the turns of any
		// message Start resumed), then the channels and the HTTP server.
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
		defer scancel()
		_ = a.router.Shutdown(sctx)
		stopChannels()
		close(run)
		sup.stopped()
		if srv != nil {
			hctx, hcancel := context.WithTimeout(context.WithoutCancel(ctx), httpShutdownGrace)
			defer hcancel()
			_ = srv.Shutdown(hctx)
		}
		if stopping {
			return exitOK
		}
		return exitFail
	}
	a.serving.Store(true)
	close(run)
	stopWaiting := a.startScheduler(ctx)
	log.Info("switchboard serving", "version", version, "model", cfg.LLM.Model, "channels", len(specs))
	for ctx.Err() == nil {
		select {
		case <-hup:
			log.Info("SIGHUP: reloading the configuration")
			a.reload(cfgPath, &level, sup)
		case <-ctx.Done():
		}
	}

	timeout := cfg.ShutdownTimeout
	log.Info("shutting down", "timeout", timeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if srv != nil {
		srv.Drain() // /readyz fails from now on
	}
	stopWaiting()
	if err := a.sched.Stop(sctx); err != nil {
		log.Warn("scheduled runs cut short resume after a restart", "err", err)
	}
	if err := a.router.Shutdown(sctx); err != nil {
		log.Warn("turns still running at the deadline were checkpointed; they resume after a restart", "err", err)
	}
	sup.stopped() // channels end with ctx; their sends are done once the router is
	if srv != nil {
		hctx, hcancel := context.WithTimeout(context.WithoutCancel(ctx), httpShutdownGrace)
		defer hcancel()
		if err := srv.Shutdown(hctx); err != nil {
			log.Warn("http server", "err", err)
		}
	}
	log.Info("stopped")
	return exitOK
}

// testHookRouterStart, if set, runs just before serve starts the router.
var testHookRouterStart func()

// httpShutdownGrace bounds the wait for open HTTP requests after the router
// has stopped: their turns are finished or checkpointed by then.
const httpShutdownGrace = 5 * time.Second

// check prints what would run, with secrets redacted.
func check(cfg *config.Config, out io.Writer) int {
	r := cfg.Redacted()
	fmt.Fprintf(out, "configuration OK\n")
	fmt.Fprintf(out, "model:    %s at %s (context %d tokens", r.LLM.Model, r.LLM.BaseURL, r.LLM.ContextWindow)
	if len(r.LLM.FallbackModels) > 0 {
		fmt.Fprintf(out, ", fallbacks %v", r.LLM.FallbackModels)
	}
	fmt.Fprintf(out, ")\nstore:    %s %s\n", r.Store.Driver, r.Store.Source())
	if id := replicaID(cfg); id != "" {
		fmt.Fprintf(out, "cluster:  replica %s, leases for %s, polling every %s (replicas on this database share its chats)\n",
			id, cfg.Cluster.LeaseTTL, cfg.Cluster.PollInterval)
	}
	fmt.Fprintf(out, "agent:    %s, max %d steps, %d concurrent turns, zone %s\n", r.Agent.Name, r.Agent.MaxSteps, r.Agent.MaxConcurrentTurns, r.Agent.Timezone)
	fmt.Fprintf(out, "channels: console (switchboard chat)")
	if r.Channels.Telegram.Enabled {
		fmt.Fprintf(out, ", telegram (%d allowed users)", len(r.Channels.Telegram.AllowUsers))
	}
	if r.Channels.Discord.Enabled {
		fmt.Fprintf(out, ", discord (%d allowed users)", len(r.Channels.Discord.AllowUsers))
	}
	fmt.Fprintln(out)
	cmd := cfg.Tools.Command
	reg := skills.Load(os.DirFS(cfg.Skills.Dir), skills.Builtin(), skills.Env{Command: skills.CommandPolicy{
		Enabled: cmd.Enabled, Workspace: cmd.Workspace, Timeout: cmd.Timeout, MaxOutputChars: cmd.MaxOutputChars}})
	var names []string
	for _, s := range reg.Skills() {
		names = append(names, s.Name)
	}
	fmt.Fprintf(out, "skills:   %d from %s and built in: %s\n", len(names), cfg.Skills.Dir, strings.Join(names, ", "))
	if cmd.Enabled {
		fmt.Fprintf(out, "commands: enabled, confined to %s\n", cmd.Workspace)
	}
	for _, m := range r.MCP.Servers {
		where := m.URL
		if where == "" {
			where = strings.Join(m.Command, " ")
		}
		fmt.Fprintf(out, "mcp:      %s (%s)\n", m.Name, where)
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(out, "warning:  %s\n", w)
	}
	if probs := reg.Problems(); len(probs) > 0 {
		for _, p := range probs {
			fmt.Fprintf(out, "error:    %s\n", p)
		}
		fmt.Fprintf(out, "%d skill problem(s): those skills are skipped until fixed\n", len(probs))
		return exitConfig
	}
	return exitOK
}

// transcriber returns the voice transcription hook, or nil when no
// transcription model is configured.
func transcriber(model *llm.Client, name string) func(context.Context, string, []byte) (string, error) {
	if name == "" {
		return nil
	}
	return func(ctx context.Context, file string, audio []byte) (string, error) {
		return model.Transcribe(ctx, name, file, audio)
	}
}
