package httpapi

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/switchboard-gateway/switchboard/llm"
)

// costDays is the span of the cost chart, by UTC day.
const costDays = 14

// costChart is the estimated cost by day (llm.prices), drawn like the
// token chart, and the cost of each model over the span.
type costChart struct {
	Width, Height int
	Left, Top     int
	Base          int
	Bars          []costBar
	YLabels       []axisLabel
	XLabels       []axisLabel
	Total         string // formatted, with the currency
	Models        []modelCost
	Unpriced      []string // models that answered turns but have no price
}

type costBar struct {
	X, Y, W, H int
	Label      string
	Cost       string
}

func (b costBar) String() string { return b.Label + ": " + b.Cost }

// modelCost is what one model's turns used and cost over the span.
type modelCost struct {
	Model string
	Turns int
	Usage llm.Usage
	Share int // percent of its prompt tokens served from the cache
	Cost  string
}

// costData builds the cost chart of the last 14 days; nil when no prices
// are configured.
func (s *Server) costData(ctx context.Context) (*costChart, error) {
	prices := s.opts.Prices
	if !prices.Priced() {
		return nil, nil
	}
	end := s.opts.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 1)
	start := end.AddDate(0, 0, -costDays)
	rows, err := s.opts.Store.UsageByDay(ctx, start)
	if err != nil {
		return nil, err
	}
	days := make([]float64, costDays)
	total := 0.0
	models := map[string]*modelCost{}
	costs := map[string]float64{}
	unpriced := map[string]bool{}
	for _, r := range rows {
		i := int(r.Day.Sub(start) / (24 * time.Hour))
		if i < 0 || i >= costDays {
			continue
		}
		m := models[r.Model]
		if m == nil {
			m = &modelCost{Model: r.Model}
			models[r.Model] = m
		}
		m.Turns += r.Turns
		m.Usage = m.Usage.Add(r.Usage)
		cost, ok := prices.Cost(r.Model, r.Usage)
		if !ok {
			unpriced[r.Model] = true
			continue
		}
		days[i] += cost
		costs[r.Model] += cost
		total += cost
	}
	c := &costChart{Width: chartW, Height: chartH, Left: chartLeft, Top: chartTop, Base: chartTop + chartPlotH,
		Total: prices.Format(total)}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range models {
			if !yield(k) {
				return
			}
		}
	}) {
		m := models[name]
		if m.Usage.PromptTokens > 0 {
			m.Share = m.Usage.CachedTokens * 100 / m.Usage.PromptTokens
		}
		if unpriced[name] {
			m.Cost = "not priced"
			c.Unpriced = append(c.Unpriced, orUnknown(name))
		} else {
			m.Cost = prices.Format(costs[name])
		}
		m.Model = orUnknown(name)
		c.Models = append(c.Models, *m)
	}
	scale := niceCeilFloat(slices.Max(days))
	slot := (chartW - chartLeft - 8) / costDays
	w := max(slot-3, chartMinBarWidth)
	for i, d := range days {
		x := chartLeft + i*slot + (slot-w)/2
		h := int(math.Round(d / scale * chartPlotH))
		day := start.AddDate(0, 0, i)
		c.Bars = append(c.Bars, costBar{X: x, Y: c.Base - h, W: w, H: h, Label: day.Format("Jan 2"), Cost: prices.Format(d)})
		if i%2 == 0 {
			c.XLabels = append(c.XLabels, axisLabel{X: x + w/2, Y: chartH - 8, Text: day.Format("Jan 2"), Alt: len(c.XLabels)%2 == 1})
		}
	}
	for _, f := range []int{0, 2, 4} {
		c.YLabels = append(c.YLabels, axisLabel{X: chartLeft - 6, Y: c.Base - chartPlotH*f/4 + 4,
			Text: fmt.Sprintf("%.4g", scale*float64(f)/4)})
	}
	return c, nil
}

// orUnknown names the model of turns that recorded none (no model call).
func orUnknown(model string) string {
	if model == "" {
		return "(none)"
	}
	return model
}

// niceCeilFloat rounds a cost up to 1, 2 or 5 times a power of ten, so the
// axis reads well; at least 0.01.
func niceCeilFloat(v float64) float64 {
	if v <= 0.01 {
		return 0.01
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}
