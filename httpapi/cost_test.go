package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/pricing"
)

// euroPrices price the stack's model in euros.
var euroPrices = pricing.New(map[string]pricing.Price{"fake-model": {Input: 2, Cached: 0.5, Output: 8}}, "EUR")

// With prices, the overview shows the estimated cost by day and of each
// model, from the tokens the model server reported, cached ones at their
// own price; the token chart tells the cached share. Without prices, no
// cost is shown.
func TestDashboardCost(t *testing.T) {
	s := newStack(t, func(o *Options) { o.Prices = euroPrices })
	s.fake.Push(testkit.Reply{Text: "Cached, mostly.",
		Usage: &llm.Usage{PromptTokens: 40000, CachedTokens: 30000, CompletionTokens: 1000, ReasoningTokens: 400, TotalTokens: 41000}})
	s.chat("ada", "How much was that?")

	code, page := s.do("GET", "/", "", nil)
	if code != http.StatusOK {
		t.Fatalf("overview: %d", code)
	}
	// 10,000 × 2 + 30,000 × 0.5 + 1,000 × 8 per million: 0.043.
	for _, want := range []string{
		`id="cost-chart"`, "0.0430 EUR in all", `data-cost="0.0430 EUR"`,
		`<tr data-model="fake-model"><td>fake-model</td><td>1</td><td>40k</td><td>75%</td><td>1000</td><td>400</td><td>0.0430 EUR</td></tr>`,
		`<span id="cached-share">75% of them cached</span>`, "400 reasoning",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("overview lacks %q", want)
		}
	}

	// The turn's page: its tokens of each kind, by step, and its cost.
	code, page = s.do("GET", "/turns/1", "", nil)
	for _, want := range []string{
		"41000 (40000 prompt, 30000 of them cached; 1000 completion, 400 of them reasoning), about 0.0430 EUR",
		`<tr><td>1</td><td>40000</td><td>30000</td><td>1000</td><td>400</td></tr>`,
	} {
		if code != http.StatusOK || !strings.Contains(page, want) {
			t.Errorf("turn page (%d) lacks %q", code, want)
		}
	}

	plain := newStack(t, nil)
	plain.fake.Push(testkit.Reply{Text: "Free.", Usage: &llm.Usage{PromptTokens: 10, CompletionTokens: 1, TotalTokens: 11}})
	plain.chat("bob", "And now?")
	if _, page := plain.do("GET", "/", "", nil); strings.Contains(page, `id="cost"`) || !strings.Contains(page, "0% of them cached") {
		t.Errorf("overview without prices shows a cost, or no cached share")
	}
}
