package gateway

// The HTTP server of `serve`: health, readiness, metrics, the chat API and
// the dashboard, with the dashboard's views of the gateway.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/switchboard-gateway/switchboard/httpapi"
	"github.com/switchboard-gateway/switchboard/store"
)

// startHTTP listens on http.listen and serves health, metrics, the chat API
// and the dashboard in the background. It returns nil, nil when the HTTP
// server is disabled (an empty listen address). hook finds the handler of
// a chat channel that takes its events by HTTP (channels.HTTPHandler).
func (g *Gateway) startHTTP(sup *supervisor, hook func(path string) http.Handler) (*httpapi.Server, error) {
	cfg := g.cfg
	if cfg.HTTP.Listen == "" {
		return nil, nil
	}
	srv, err := httpapi.New(httpapi.Options{
		Listen: cfg.HTTP.Listen, Token: cfg.HTTP.Token, PublicHosts: cfg.HTTP.PublicHosts,
		AgentName: cfg.Agent.Name, ModelName: cfg.LLM.Model, Version: g.opts.Version,
		Store: g.store, Metrics: g.mon.metrics.Handler(), Gatherer: g.mon.metrics.Registry(),
		API: g.mon.api, Activity: g.mon.activity,
		Channels: sup.statuses, Model: g.mon.model, Probe: g.model.Probe, ModelStall: 2 * g.cfg.LLM.StreamIdleTimeout,
		Skills: g.skillsView, MCP: g.mcp.Status, Jobs: g.jobsView, Users: g.usersView,
		Queue:       func() (int, int) { return g.router.QueueDepth(), g.router.Busy() },
		Serving:     g.serving.Load,
		Cluster:     g.clusterStatus(),
		Logger:      g.log,
		Redact:      g.redact.String,
		ChannelHook: hook,
		Prices:      pricesOf(cfg),
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return nil, fmt.Errorf("http.listen %s: %w", cfg.HTTP.Listen, err)
	}
	g.log.Info("http listening", "addr", ln.Addr().String(), "auth", cfg.HTTP.Token != "",
		"dashboard", httpapi.DashboardURL(ln.Addr().String()))
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
	for _, w := range reg.Withheld() {
		v.Problems = append(v.Problems, withheldNote(w))
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
