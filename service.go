package main

// What `serve` adds to the wired gateway to run as a long-lived service:
// the monitor that feeds metrics and the dashboard from turn events, the
// HTTP server, and the SIGHUP reload.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strings"

	"switchboard/agent"
	"switchboard/channels"
	"switchboard/channels/openai"
	"switchboard/config"
	"switchboard/httpapi"
	"switchboard/internal/logging"
	"switchboard/llm"
	"switchboard/metrics"
	"switchboard/router"
	"switchboard/store"
)

// monitor observes the gateway: every turn event and send goes to the
// metrics, the dashboard's activity and the chat API channel.
type monitor struct {
	metrics  *metrics.Metrics
	activity *httpapi.Activity
	api      *openai.API
	model    *metrics.Model
	log      *slog.Logger
}

func newMonitor(cfg *config.Config, replica string, model *llm.Client, log *slog.Logger) *monitor {
	m := &monitor{metrics: metrics.NewReplica(version, replica), activity: httpapi.NewActivity(), log: log}
	m.model = m.metrics.ObserveModel(model, cfg.LLM.Model)
	m.api = openai.New(cfg.Agent.Name, func(err error) bool { return errors.Is(err, router.ErrShuttingDown) }, log)
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
func (a *app) startHTTP(sup *supervisor) (*httpapi.Server, error) {
	cfg := a.cfg
	if cfg.HTTP.Listen == "" {
		return nil, nil
	}
	srv, err := httpapi.New(httpapi.Options{
		Listen: cfg.HTTP.Listen, Token: cfg.HTTP.Token,
		AgentName: cfg.Agent.Name, ModelName: cfg.LLM.Model, Version: version,
		Store: a.store, Metrics: a.mon.metrics.Handler(), API: a.mon.api, Activity: a.mon.activity,
		Channels: sup.statuses, Model: a.mon.model, Probe: a.model.Probe,
		Skills: a.skillsView, MCP: a.mcp.Status, Jobs: a.jobsView, Users: a.usersView,
		Queue:   func() (int, int) { return a.router.QueueDepth(), a.router.Busy() },
		Serving: a.serving.Load,
		Cluster: a.clusterStatus(),
		Logger:  a.log,
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return nil, fmt.Errorf("http.listen %s: %w", cfg.HTTP.Listen, err)
	}
	a.log.Info("http listening", "addr", ln.Addr().String(), "auth", cfg.HTTP.Token != "")
	go func() {
		if err := srv.Serve(ln); err != nil {
			a.log.Error("http server stopped", "err", err)
		}
	}()
	return srv, nil
}

// skillsView is the skill registry for the dashboard.
func (a *app) skillsView() httpapi.Skills {
	reg := a.skills.Current()
	var v httpapi.Skills
	for _, s := range reg.Skills() {
		v.Loaded = append(v.Loaded, httpapi.Skill{Name: s.Name, Description: s.Description, File: s.File, Builtin: s.Builtin})
	}
	for _, p := range reg.Problems() {
		v.Problems = append(v.Problems, p.Error())
	}
	return v
}

// reload re-reads the configuration on SIGHUP and applies what can change
// safely while serving: the log level, the channels' allowlists and the
// skills. Everything else needs a restart, and the log says which keys.
func (a *app) reload(path string, level *slog.LevelVar, sup *supervisor) {
	cfg, err := loadConfig(path)
	if err != nil {
		a.log.Error("reload: the configuration has errors; keeping the running one", "err", err)
		return
	}
	if lv, err := logging.ParseLevel(cfg.Log.Level); err == nil && lv != level.Level() {
		level.Set(lv)
		a.log.Info("reload: log level changed", "level", cfg.Log.Level)
	}
	for _, name := range []string{"telegram", "discord"} {
		old, now := channelAccess(a.cfg, name), channelAccess(cfg, name)
		if !reflect.DeepEqual(old, now) {
			sup.setAccess(name, now)
			a.log.Info("reload: access rules changed", "channel", name)
		}
	}
	reg := a.skills.Current()
	a.log.Info("reload: skills reloaded", "skills", len(reg.Skills()), "problems", len(reg.Problems()))
	if keys := restartKeys(a.cfg, cfg); len(keys) > 0 {
		a.log.Warn("reload: these settings changed but only take effect after a restart", "keys", keys)
	}
	applied := *a.cfg
	applied.Log.Level = cfg.Log.Level
	applied.Channels.Telegram.AllowUsers, applied.Channels.Telegram.Pairing = cfg.Channels.Telegram.AllowUsers, cfg.Channels.Telegram.Pairing
	applied.Channels.Discord.AllowUsers = cfg.Channels.Discord.AllowUsers
	applied.Channels.Discord.AllowGuilds, applied.Channels.Discord.AllowChannels = cfg.Channels.Discord.AllowGuilds, cfg.Channels.Discord.AllowChannels
	a.cfg = &applied
}

// restartKeys names the top-level sections (and the channel sections)
// whose settings differ in a way a reload does not apply.
func restartKeys(old, now *config.Config) []string {
	o, n := *old, *now
	// What reload applies is not a difference.
	n.Log.Level = o.Log.Level
	n.Channels.Telegram.AllowUsers, n.Channels.Telegram.Pairing = o.Channels.Telegram.AllowUsers, o.Channels.Telegram.Pairing
	n.Channels.Discord.AllowUsers, n.Channels.Discord.AllowGuilds, n.Channels.Discord.AllowChannels =
		o.Channels.Discord.AllowUsers, o.Channels.Discord.AllowGuilds, o.Channels.Discord.AllowChannels
	var keys []string
	ov, nv := reflect.ValueOf(o), reflect.ValueOf(n)
	t := ov.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		if !f.IsExported() || tag == "" || tag == "-" {
			continue
		}
		if tag == "channels" {
			ct := f.Type
			for j := range ct.NumField() {
				if !reflect.DeepEqual(ov.Field(i).Field(j).Interface(), nv.Field(i).Field(j).Interface()) {
					keys = append(keys, "channels."+ct.Field(j).Tag.Get("yaml"))
				}
			}
			continue
		}
		if !reflect.DeepEqual(ov.Field(i).Interface(), nv.Field(i).Interface()) {
			keys = append(keys, tag)
		}
	}
	return keys
}

// jobsView lists the scheduled jobs with their last runs, for the dashboard.
func (a *app) jobsView(ctx context.Context) ([]httpapi.Job, error) {
	list, err := a.store.Schedules(ctx, store.ScheduleFilter{})
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
		runs, err := a.store.ScheduleRuns(ctx, sc.ID, 1)
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
func (a *app) usersView(ctx context.Context) ([]httpapi.User, error) {
	keys, err := a.store.LearnedUsers(ctx, usersShown)
	if err != nil {
		return nil, err
	}
	out := make([]httpapi.User, 0, len(keys))
	for _, key := range keys {
		channel, id, _ := strings.Cut(key, ":")
		u := httpapi.User{Channel: channel, ID: id, Name: key}
		prof, err := a.store.Profile(ctx, key)
		if err != nil {
			return nil, err
		}
		for _, e := range prof {
			if e.Dimension == "name" {
				u.Name = e.Value
			}
			u.Profile = append(u.Profile, e.Dimension+": "+e.Value)
		}
		mems, err := a.store.Memories(ctx, store.Owners{User: key}, 20)
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
func (a *app) learningOutcomes() map[string]uint64 {
	st := a.learn.runner.Stats()
	return map[string]uint64{metrics.OK: st.Succeeded, metrics.Error: st.Failed}
}
