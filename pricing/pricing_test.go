package pricing

import (
	"testing"

	"github.com/switchboard-gateway/switchboard/llm"
)

func TestCost(t *testing.T) {
	tab := New(map[string]Price{
		"gpt-x":  {Input: 2, Cached: 0.5, Output: 8},
		"free-x": {},
	}, "USD")
	tests := []struct {
		name   string
		model  string
		u      llm.Usage
		want   float64
		wantOK bool
	}{
		{"fresh prompt and completion", "gpt-x", llm.Usage{PromptTokens: 1_000_000, CompletionTokens: 500_000}, 2 + 4, true},
		{"cached part at its own price", "gpt-x", llm.Usage{PromptTokens: 1_000_000, CachedTokens: 750_000, CompletionTokens: 0},
			0.25*2 + 0.75*0.5, true},
		{"reasoning is a part of completion", "gpt-x", llm.Usage{CompletionTokens: 1000, ReasoningTokens: 900}, 0.008, true},
		{"cached beyond the prompt counts as the prompt", "gpt-x", llm.Usage{PromptTokens: 100, CachedTokens: 500}, 100 * 0.5 / 1e6, true},
		{"a free model", "free-x", llm.Usage{PromptTokens: 5000}, 0, true},
		{"an unpriced model", "other", llm.Usage{PromptTokens: 5000}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tab.Cost(tt.model, tt.u)
			if ok != tt.wantOK || (got-tt.want) > 1e-12 || (tt.want-got) > 1e-12 {
				t.Errorf("Cost(%s, %+v) = %v, %v; want %v, %v", tt.model, tt.u, got, ok, tt.want, tt.wantOK)
			}
		})
	}
	var none *Table
	if _, ok := none.Cost("gpt-x", llm.Usage{PromptTokens: 1}); ok || none.Priced() || New(nil, "USD") != nil {
		t.Error("no prices should price nothing")
	}
	for amount, want := range map[float64]string{0.0042: "0.0042 USD", 12.345: "12.35 USD", 0: "0.00 USD"} {
		if got := tab.Format(amount); got != want {
			t.Errorf("Format(%v) = %q, want %q", amount, got, want)
		}
	}
}
