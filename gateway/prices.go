package gateway

import (
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/pricing"
)

// pricesOf is the price table of llm.prices; nil when none is set.
func pricesOf(cfg *config.Config) *pricing.Table {
	prices := make(map[string]pricing.Price, len(cfg.LLM.Prices))
	for name, p := range cfg.LLM.Prices {
		prices[name] = pricing.Price{Input: p.Input, Cached: p.Cached, Output: p.Output}
	}
	return pricing.New(prices, cfg.LLM.Currency)
}
