package gateway

// The monitor: what feeds the metrics and the dashboard's activity from
// turn events and sends. It holds the chat API channel, which the HTTP
// server mounts; the router feeds it its own turns (channels.TurnWatcher).

import (
	"context"
	"errors"
	"log/slog"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/chatapi"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/httpapi"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/metrics"
	"github.com/switchboard-gateway/switchboard/router"
)

// monitor observes the gateway: every turn event and send goes to the
// metrics and the dashboard's activity.
type monitor struct {
	metrics  *metrics.Metrics
	activity *httpapi.Activity
	api      *chatapi.API
	model    *metrics.Model
	log      *slog.Logger
}

func newMonitor(cfg *config.Config, version, replica string, model *llm.Client, log *slog.Logger) *monitor {
	m := &monitor{metrics: metrics.NewReplica(version, replica), activity: httpapi.NewActivity(), log: log}
	m.model = m.metrics.ObserveModel(model, cfg.LLM.Model)
	m.api = chatapi.New(cfg.Agent.Name, func(err error) bool { return errors.Is(err, router.ErrShuttingDown) }, log)
	m.api.SetMaxInputChars(cfg.Channels.MaxInputChars)
	return m
}

// onEvent is the router's OnEvent hook.
func (m *monitor) onEvent(in channels.Inbound, ev agent.Event) {
	m.metrics.Observe(in, ev)
	m.activity.Observe(in, ev)
	if ev.Kind == agent.EventToolEnd && m.log.Enabled(context.Background(), slog.LevelDebug) {
		m.log.Debug("tool call", "turn_id", ev.TurnID, "channel", in.Channel, "chat", in.ChatID,
			"tool", ev.Tool, "is_error", ev.IsError, "duration", ev.Duration)
	}
}

// onSend is the router's OnSend hook.
func (m *monitor) onSend(channel string, err error) { m.metrics.Sent(channel, err) }

// learningOutcomes are the learning runner's totals, for the metrics.
func (g *Gateway) learningOutcomes() map[string]uint64 {
	st := g.learn.runner.Stats()
	return map[string]uint64{metrics.OK: st.Succeeded, metrics.Error: st.Failed}
}
