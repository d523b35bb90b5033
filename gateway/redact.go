package gateway

import (
	"context"
	"os"
	"slices"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/redact"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// secretsOf is what the gateway hides from tool results, replies and the
// dashboard: the values of secret-bearing environment variables (named in
// the marker: OPENAI_API_KEY, a skill's WEATHER_API_KEY, …) and every secret
// the configuration holds (config.Config.Secrets: keys, tokens, webhook
// secrets, passwords in URLs and DSNs, MCP credentials).
func secretsOf(cfg *config.Config) []redact.Secret {
	var granted []string // variables granted to skills: their keys, whatever their names
	for _, g := range cfg.Skills.Grants {
		granted = append(granted, g.Env...)
	}
	return append(redact.FromEnv(os.Environ(), granted...), redact.Values(cfg.Secrets())...)
}

// redactingStore is the agent's store with the secrets replaced in what
// the loop writes besides tool results (which the agent redacts where they
// are made): the user's message (a pasted token), a model's text and
// tool-call arguments (a model that repeats a key it was told), summaries
// and a failed turn's error.
type redactingStore struct {
	*store.Store
	redact func(string) string
}

func (s redactingStore) CommitStep(ctx context.Context, turnID int64, step int, msgs []store.StepMessage, usage llm.Usage) ([]int64, error) {
	out := make([]store.StepMessage, len(msgs))
	for i, m := range msgs {
		m.Content = s.redact(m.Content)
		if len(m.ToolCalls) > 0 {
			m.ToolCalls = slices.Clone(m.ToolCalls)
			for j := range m.ToolCalls {
				m.ToolCalls[j].Arguments = s.redact(m.ToolCalls[j].Arguments)
			}
		}
		out[i] = m
	}
	return s.Store.CommitStep(ctx, turnID, step, out, usage)
}

func (s redactingStore) BeginTurn(ctx context.Context, t store.TurnStart, first []llm.Message) (int64, []int64, error) {
	out := make([]llm.Message, len(first))
	for i, m := range first {
		m.Content = s.redact(m.Content)
		out[i] = m
	}
	return s.Store.BeginTurn(ctx, t, out)
}

func (s redactingStore) SaveSummary(ctx context.Context, sessionID, upToMessageID int64, text string) error {
	return s.Store.SaveSummary(ctx, sessionID, upToMessageID, s.redact(text))
}

func (s redactingStore) FinishTurn(ctx context.Context, turnID int64, e store.TurnEnd) error {
	e.Error = s.redact(e.Error)
	return s.Store.FinishTurn(ctx, turnID, e)
}

var _ agent.Store = redactingStore{}
