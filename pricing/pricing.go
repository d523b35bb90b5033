// Package pricing turns token counts into an estimated cost with the
// operator's price table (llm.prices): per model, the price of a million
// prompt tokens, of a million prompt tokens served from the provider's
// cache, and of a million completion tokens (reasoning included).
package pricing

import (
	"fmt"
	"math"

	"github.com/switchboard-gateway/switchboard/llm"
)

// Price is what a million tokens of each kind cost on one model.
type Price struct {
	Input  float64 // prompt tokens not served from the cache
	Cached float64 // prompt tokens served from the cache
	Output float64 // completion tokens, reasoning included
}

// Table holds the prices of the models the operator priced. The nil
// *Table prices nothing.
type Table struct {
	prices   map[string]Price
	currency string
}

// New returns the table, or nil when prices is empty (no costs are shown).
func New(prices map[string]Price, currency string) *Table {
	if len(prices) == 0 {
		return nil
	}
	return &Table{prices: prices, currency: currency}
}

// Currency is what the prices are in (the configuration's llm.currency).
func (t *Table) Currency() string {
	if t == nil {
		return ""
	}
	return t.currency
}

// Priced reports whether there are prices at all.
func (t *Table) Priced() bool { return t != nil }

// Cost is the estimated cost of u on model; ok is false when the model has
// no price.
func (t *Table) Cost(model string, u llm.Usage) (cost float64, ok bool) {
	if t == nil {
		return 0, false
	}
	p, ok := t.prices[model]
	if !ok {
		return 0, false
	}
	cached := min(u.CachedTokens, u.PromptTokens)
	fresh := u.PromptTokens - cached
	return (float64(fresh)*p.Input + float64(cached)*p.Cached + float64(u.CompletionTokens)*p.Output) / 1e6, true
}

// Format writes an amount with the table's currency and enough digits to
// tell small amounts apart: "0.0042 USD", "12.35 USD".
func (t *Table) Format(amount float64) string {
	digits := 2
	if a := math.Abs(amount); a > 0 && a < 1 {
		digits = 4
	}
	s := fmt.Sprintf("%.*f", digits, amount)
	if c := t.Currency(); c != "" {
		s += " " + c
	}
	return s
}
