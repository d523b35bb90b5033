package gateway

// What `serve` adds to the wired gateway to run as a long-lived service:
// the monitor that feeds metrics and the dashboard from turn events, the
// HTTP server, and the SIGHUP reload.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"switchboard/agent"
	"switchboard/channels"
	"switchboard/config"
	"switchboard/httpapi"
	"switchboard/llm"
	"switchboard/metrics"
	"switchboard/router"
	"switchboard/store"
)

// monitor observes the gateway: every turn event and send goes to the
// metrics, the dashboard's activity and the HTTP API channel.
type monitor struct {
	metrics  *metrics.Metrics
	activity *httpapi.Activity
	api      *httpapi.API
	model    *metrics.Model
	log      *slog.Logger
}

func newMonitor(cfg *config.Config, version, replica string, model *llm.Client, log *slog.Logger) *monitor {
	m := &monitor{metrics: metrics.NewReplica(version, replica), activity: httpapi.NewActivity(), log: log}
	m.model = m.metrics.ObserveModel(model, cfg.LLM.Model)
	m.api = httpapi.NewAPI(cfg.Agent.Name, func(err error) bool { return errors.Is(err, router.ErrShuttingDown) }, log)
	return m
}

// onEvent is the router's OnEvent hook.
func (m *monitor) onEvent(in channels.Inbound, ev agent.Event) {
	m.metrics.Observe(in, ev)
	m.activity.Observe(in, ev)
	m.api.Observe(in, ev)
	if ev.Kind == agent.EventToolEnd && m.log.Enabled(context.Background(), slog.LevelDebug) {
		m.log.Debug("tool call", "turn_id", ev.TurnID, "channel", in.Channel, "chat", in.ChatID,
			"tool", ev.Tool, "error", ev.IsError, "duration", ev.Duration)
	}
}

// onSend is the router's OnSend hook.
func (m *monitor) onSend(channel string, err error) { m.metrics.Sent(channel, err) }

// startHTTP listens on http.listen and serves health, metrics, the chat API
// and the dashboard in the background. It returns nil, nil when the HTTP
// server is disabled (an empty listen address).
func (g *Gateway) startHTTP(sup *supervisor) (*httpapi.Server, error) {
	cfg := g.cfg
	if cfg.HTTP.Listen == "" {
		return nil, nil
	}
	srv, err := httpapi.New(httpapi.Options{
		Listen: cfg.HTTP.Listen, Token: cfg.HTTP.Token,
		AgentName: cfg.Agent.Name, ModelName: cfg.LLM.Model, Version: g.opts.Version,
		Store: g.store, Metrics: g.mon.metrics.Handler(), API: g.mon.api, Activity: g.mon.activity,
		Channels: sup.statuses, Model: g.mon.model, Probe: g.model.Probe,
		Skills: g.skillsView, MCP: g.mcp.Status, Jobs: g.jobsView, Users: g.usersView,
		Queue:   func() (int, int) { return g.router.QueueDepth(), g.router.Busy() },
		Serving: g.serving.Load,
		Cluster: g.clusterStatus(),
		Logger:  g.log,
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return nil, fmt.Errorf("http.listen %s: %w", cfg.HTTP.Listen, err)
	}
	g.log.Info("http listening", "addr", ln.Addr().String(), "auth", cfg.HTTP.Token != "")
	go func() {
		if err := srv.Serve(ln); err != nil {
			g.log.Error("http server stopped", "err", err)
		}
	}()
	return srv, nil
}

// skillsView is the skill registry for the dashboard.
func (g *Gateway) skillsView() httpapi.Skills {
	reg := g.skills.Current()
	var v httpapi.Skills
	for _, s := range reg.Skills() {
		v.Loaded = append(v.Loaded, httpapi.Skill{Name: s.Name, Description: s.Description, File: s.File, Builtin: s.Builtin})
	}
	for _, p := range reg.Problems() {
		v.Problems = append(v.Problems, p.Error())
	}
	return v
}

// jobsView lists the scheduled jobs with their last runs, for the dashboard.
func (g *Gateway) jobsView(ctx context.Context) ([]httpapi.Job, error) {
	list, err := g.store.Schedules(ctx, store.ScheduleFilter{})
	if err != nil {
		return nil, err
	}
	out := make([]httpapi.Job, 0, len(list))
	for _, sc := range list {
		j := httpapi.Job{Name: fmt.Sprintf("#%d %s (%s, %s)", sc.ID, sc.Name, sc.Kind, sc.State), Schedule: sc.Spec,
			Chat: sc.Channel + " " + sc.ChatKey, LastError: sc.LastError}
		if sc.Timezone != "" {
			j.Schedule += " " + sc.Timezone
		}
		if sc.NextRunAt != nil {
			j.Next = *sc.NextRunAt
		}
		runs, err := g.store.ScheduleRuns(ctx, sc.ID, 1)
		if err != nil {
			return nil, err
		}
		if len(runs) > 0 {
			j.LastRun, j.LastOutcome = runs[0].StartedAt, runs[0].Outcome
			if runs[0].Error != "" {
				j.LastError = runs[0].Error
			}
		}
		out = append(out, j)
	}
	return out, nil
}

// usersShown bounds the people listed on the dashboard.
const usersShown = 50

// usersView lists the people the bot learned about, with their profiles
// and memories, for the dashboard.
func (g *Gateway) usersView(ctx context.Context) ([]httpapi.User, error) {
	keys, err := g.store.LearnedUsers(ctx, usersShown)
	if err != nil {
		return nil, err
	}
	out := make([]httpapi.User, 0, len(keys))
	for _, key := range keys {
		channel, id, _ := strings.Cut(key, ":")
		u := httpapi.User{Channel: channel, ID: id, Name: key}
		prof, err := g.store.Profile(ctx, key)
		if err != nil {
			return nil, err
		}
		for _, e := range prof {
			if e.Dimension == "name" {
				u.Name = e.Value
			}
			u.Profile = append(u.Profile, e.Dimension+": "+e.Value)
		}
		mems, err := g.store.Memories(ctx, store.Owners{User: key}, 20)
		if err != nil {
			return nil, err
		}
		for _, m := range mems {
			u.Memories = append(u.Memories, m.Text)
		}
		out = append(out, u)
	}
	return out, nil
}

// learningOutcomes are the learning runner's totals, for the metrics.
func (g *Gateway) learningOutcomes() map[string]uint64 {
	st := g.learn.runner.Stats()
	return map[string]uint64{metrics.OK: st.Succeeded, metrics.Error: st.Failed}
}
