package router

import (
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/pricing"
	"github.com/switchboard-gateway/switchboard/store"
)

// /status shows the conversation's tokens with the share of its prompt
// served from the cache, and a cost with prices; /usage shows operators
// everyone's tokens by day and user, and nobody else.
func TestStatusTokensAndUsage(t *testing.T) {
	prices := pricing.New(map[string]pricing.Price{"m": {Input: 2, Cached: 0.5, Output: 8}}, "USD")
	e := newEnvWith(t, Access{Users: []string{"*"}, Admins: []string{"op"}}, func(c *Config) {
		c.MaxConcurrentTurns, c.ModelName, c.Prices = 4, "m", prices
	})
	turn := func(chatKey, user string, u llm.Usage) {
		t.Helper()
		chat, _ := e.st.EnsureChat(e.ctx, "fake", chatKey, "dm", "")
		id, _, err := e.st.BeginTurn(e.ctx, store.TurnStart{ChatID: chat.ID, UserID: user, Channel: "fake", Kind: "user"},
			[]llm.Message{{Role: llm.RoleUser, Content: "hello"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.st.CommitStep(e.ctx, id, 1, nil, u); err != nil {
			t.Fatal(err)
		}
		if err := e.st.FinishTurn(e.ctx, id, store.TurnEnd{StopReason: "end_turn", Status: store.TurnCompleted, Model: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	ask := func(chatKey, user, text string) string {
		t.Helper()
		n := len(e.ch.Texts())
		e.deliver(t, msg(chatKey, user, text))
		e.waitSent(t, 1)
		return e.ch.Texts()[n]
	}
	turn("c1", "ada", llm.Usage{PromptTokens: 2000, CompletionTokens: 100, TotalTokens: 2100, ReasoningTokens: 20})
	turn("c1", "ada", llm.Usage{PromptTokens: 2100, CachedTokens: 2048, CompletionTokens: 50, TotalTokens: 2150})
	turn("c2", "bob", llm.Usage{PromptTokens: 1000, CompletionTokens: 10, TotalTokens: 1010})

	// 4,100 prompt tokens, 2,048 cached (49.9 %): 2,052 × 2 + 2,048 × 0.5 + 150 × 8 per million.
	want := "Tokens: 4,250 tokens (4,100 prompt, 49% of them cached; 150 completion, 20 reasoning), about 0.0063 USD"
	if got := ask("c1", "ada", "/status"); !strings.Contains(got, want) {
		t.Errorf("/status = %q, want a line %q", got, want)
	}
	if got := ask("c1", "ada", "/usage"); !strings.HasPrefix(got, "Only the operator") {
		t.Errorf("/usage of a user = %q, want a refusal", got)
	}
	got := ask("c3", "op", "/usage")
	for _, want := range []string{
		"Usage of the last 7 days (UTC): 5,260 tokens (5,100 prompt, 40% of them cached; 160 completion, 20 reasoning) in 3 turns, about 0.0084 USD",
		"  fake ada: 4,250 tokens, 2 turns, 49% cached, 0.0063 USD\n  fake bob: 1,010 tokens, 1 turn, 0% cached, 0.0021 USD",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("/usage = %q, want %q", got, want)
		}
	}
	if got := ask("c3", "op", "/usage 400"); !strings.HasPrefix(got, "Usage: /usage [days]") {
		t.Errorf("/usage 400 = %q, want the command's usage", got)
	}
}
