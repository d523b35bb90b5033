package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"switchboard/agent"
	"switchboard/channels"
	"switchboard/channels/console"
	"switchboard/config"
	"switchboard/internal/logging"
	"switchboard/llm"
	"switchboard/mcpclient"
	"switchboard/router"
	"switchboard/skills"
	"switchboard/store"
)

// shutdownGrace is how long running turns may finish after SIGTERM before
// they are cancelled (their messages stay pending and resume on restart).
const shutdownGrace = 20 * time.Second

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
}

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
	st, err := store.Open(ctx, cfg.Store.Path)
	if err != nil {
		return nil, err
	}
	mcp, mcpErrs := mcpclient.Connect(ctx, cfg.MCP.Servers, log.With("component", "mcp"))
	for _, err := range mcpErrs {
		log.Error("MCP server skipped", "err", err)
	}
	cmd := cfg.Tools.Command
	watcher := skills.NewWatcher(os.DirFS(cfg.Skills.Dir), skills.Builtin(), skills.Env{
		Model: model,
		Command: skills.CommandPolicy{Enabled: cmd.Enabled, Workspace: cmd.Workspace,
			Timeout: cmd.Timeout, MaxOutputChars: cmd.MaxOutputChars},
	}, log.With("component", "skills"))
	ag, err := agent.New(agent.Config{
		Model: model, Store: st,
		Sources:              []agent.Source{agent.Builtin(nil, loc), agent.ChannelContext(), mcp.Source()},
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
	rt, err := router.New(router.Config{
		Store: st, Agent: ag,
		MaxConcurrentTurns: cfg.Agent.MaxConcurrentTurns,
		TurnTimeout:        cfg.Agent.TurnTimeout,
		ModelName:          cfg.LLM.Model,
		Vision:             cfg.LLM.Vision,
		Location:           loc,
		Logger:             log,
		Prepare: func(_ context.Context, in channels.Inbound) router.Prepared {
			reg := watcher.Current()
			turn := reg.ForTurn(in.Channel, string(in.ChatType), in.Text)
			return router.Prepared{Sources: []agent.Source{turn}, Sections: turn.Sections(),
				MaxSteps: turn.MaxSteps(), Catalogue: reg.Catalogue(0)}
		},
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
		st.Close()
		mcp.Close()
		return nil, err
	}
	return &app{cfg: cfg, log: log, store: st, skills: watcher, mcp: mcp, model: model, agent: ag, router: rt}, nil
}

func (a *app) close() {
	if err := a.mcp.Close(); err != nil {
		a.log.Warn("close MCP servers", "err", err)
	}
	if err := a.store.Close(); err != nil {
		a.log.Error("close store", "err", err)
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
	if err := a.router.Start(ctx); err != nil {
		fmt.Fprintf(stderr, "switchboard: %v\n", err)
		return exitFail
	}
	if color {
		fmt.Fprintf(stdout, "Switchboard chat with %s (model %s). /help for commands, Ctrl-D to quit.\n", cfg.Agent.Name, cfg.LLM.Model)
	}
	runErr := con.Run(ctx, a.router)
	// End of input: let the last message be answered, unless interrupted.
	drainCtx, cancel := context.WithTimeout(ctx, cfg.Agent.TurnTimeout)
	defer cancel()
	_ = a.router.Drain(drainCtx)
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer scancel()
	_ = a.router.Shutdown(sctx)
	if runErr != nil {
		fmt.Fprintf(stderr, "switchboard: %v\n", runErr)
		return exitFail
	}
	return exitOK
}

// serve runs every enabled channel until ctx ends, then shuts down
// gracefully: no new messages, running turns get shutdownGrace to finish.
func serve(ctx context.Context, cfg *config.Config, stderr io.Writer) int {
	log, err := newLogger(cfg, stderr, "")
	if err != nil {
		fmt.Fprintf(stderr, "switchboard: %v\n", err)
		return exitConfig
	}
	for _, w := range cfg.Warnings() {
		log.Warn(w)
	}
	a, err := build(ctx, cfg, log)
	if err != nil {
		log.Error("start", "err", err)
		return exitFail
	}
	defer a.close()
	if !cfg.Channels.Telegram.Enabled && !cfg.Channels.Discord.Enabled {
		log.Error("no channel is enabled: set channels.telegram.enabled or channels.discord.enabled, or talk in the terminal with `switchboard chat`")
		return exitConfig
	}
	chans, errs := enabledChannels(ctx, cfg, log)
	for _, err := range errs {
		log.Error("channel not started", "err", err)
	}
	if len(chans) == 0 {
		log.Error("no channel could start; see the errors above")
		return exitFail
	}
	for _, c := range chans {
		a.router.AddChannel(c.ch, c.access)
	}
	if err := a.router.Start(ctx); err != nil {
		log.Error("start router", "err", err)
		return exitFail
	}
	errc := make(chan error, len(chans))
	for _, c := range chans {
		go func() {
			l := log.With("channel", c.ch.Name())
			l.Info("channel started")
			err := c.ch.Run(ctx, a.router)
			if err != nil && ctx.Err() == nil {
				l.Error("channel stopped", "err", err)
			}
			errc <- err
		}()
	}
	log.Info("switchboard serving", "version", version, "model", cfg.LLM.Model, "channels", len(chans))
	<-ctx.Done()
	log.Info("shutting down", "grace", shutdownGrace)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := a.router.Shutdown(sctx); err != nil {
		log.Warn("turns still running at the deadline were cancelled; they resume on restart", "err", err)
	}
	for range chans {
		<-errc
	}
	return exitOK
}

type channelEntry struct {
	ch     channels.Channel
	access router.Access
}

// check prints what would run, with secrets redacted.
func check(cfg *config.Config, out io.Writer) int {
	r := cfg.Redacted()
	fmt.Fprintf(out, "configuration OK\n")
	fmt.Fprintf(out, "model:    %s at %s (context %d tokens", r.LLM.Model, r.LLM.BaseURL, r.LLM.ContextWindow)
	if len(r.LLM.FallbackModels) > 0 {
		fmt.Fprintf(out, ", fallbacks %v", r.LLM.FallbackModels)
	}
	fmt.Fprintf(out, ")\nstore:    %s\n", r.Store.Path)
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
