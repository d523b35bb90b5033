package httpapi

import (
	"context"
	"fmt"
	"time"
)

// Chart geometry, in SVG user units.
const (
	chartW, chartH   = 760, 220
	chartLeft        = 52 // room for the y-axis labels
	chartTop         = 12
	chartBottom      = 28 // room for the x-axis labels
	chartPlotH       = chartH - chartTop - chartBottom
	chartMinBarWidth = 2
)

// chart is the token-usage bar chart, laid out in Go and drawn by the
// template as inline SVG (no script, no external library).
type chart struct {
	Width, Height int
	Left, Top     int
	PlotW, PlotH  int
	Base          int // the y of the x axis
	Bars          []bar
	YLabels       []axisLabel
	XLabels       []axisLabel
	Total         int
	Prompt        int
	Completion    int
	Turns         int
	Cached        int    // prompt tokens served from the provider's cache
	Reasoning     int    // completion tokens spent on reasoning
	Span          string // "24 hours" or "14 days"
	Bucket        string // "hour" or "day"
}

type bar struct {
	X, W                 int
	PromptY, PromptH     int
	CompleteY, CompleteH int
	Label                string
	Prompt, Completion   int
	Turns                int
}

type axisLabel struct {
	X, Y int
	Text string
	Alt  bool // every other x label: left out where the chart is narrow
}

// usageChart builds the chart of the last 24 hours by hour, or of the last
// 14 days by day (rng "14d"), in UTC; empty buckets are drawn empty.
func (s *Server) usageChart(ctx context.Context, rng string) (chart, error) {
	n, bucket, span, unit, format := 24, time.Hour, "24 hours", "hour", "15:04"
	if rng == "14d" {
		n, bucket, span, unit, format = 14, 24*time.Hour, "14 days", "day", "Jan 2"
	}
	now := s.opts.Now().UTC()
	end := now.Truncate(bucket).Add(bucket) // the end of the current bucket
	start := end.Add(-time.Duration(n) * bucket)
	points, err := s.opts.Store.UsageSeries(ctx, start, bucket)
	if err != nil {
		return chart{}, err
	}
	type sums struct{ prompt, completion, turns int }
	by := make([]sums, n)
	c := chart{Width: chartW, Height: chartH, Left: chartLeft, Top: chartTop, PlotW: chartW - chartLeft - 8,
		PlotH: chartPlotH, Span: span, Bucket: unit}
	for _, p := range points {
		i := int(p.Start.Sub(start) / bucket)
		if i < 0 || i >= n {
			continue
		}
		by[i].prompt += p.Usage.PromptTokens
		by[i].completion += p.Usage.CompletionTokens
		by[i].turns += p.Turns
		c.Prompt += p.Usage.PromptTokens
		c.Completion += p.Usage.CompletionTokens
		c.Total += p.Usage.TotalTokens
		c.Turns += p.Turns
		c.Cached += p.Usage.CachedTokens
		c.Reasoning += p.Usage.ReasoningTokens
	}
	peak := 0
	for _, b := range by {
		peak = max(peak, b.prompt+b.completion)
	}
	scale := niceCeil(peak)
	slot := c.PlotW / n
	w := max(slot-3, chartMinBarWidth)
	base := chartTop + chartPlotH
	c.Base = base
	every := max(n/8, 1)
	for i, b := range by {
		x := chartLeft + i*slot + (slot-w)/2
		ph := b.prompt * chartPlotH / scale
		ch := b.completion * chartPlotH / scale
		t := start.Add(time.Duration(i) * bucket)
		c.Bars = append(c.Bars, bar{X: x, W: w, PromptY: base - ph, PromptH: ph, CompleteY: base - ph - ch, CompleteH: ch,
			Label: t.Format(format), Prompt: b.prompt, Completion: b.completion, Turns: b.turns})
		if i%every == 0 {
			c.XLabels = append(c.XLabels, axisLabel{X: x + w/2, Y: chartH - 8, Text: t.Format(format), Alt: len(c.XLabels)%2 == 1})
		}
	}
	for _, f := range []int{0, 2, 4} {
		v := scale * f / 4
		c.YLabels = append(c.YLabels, axisLabel{X: chartLeft - 6, Y: base - chartPlotH*f/4 + 4, Text: numText(v)})
	}
	return c, nil
}

// CachedShare is the percent of the prompt tokens served from the cache.
func (c chart) CachedShare() int {
	if c.Prompt == 0 {
		return 0
	}
	return c.Cached * 100 / c.Prompt
}

// niceCeil rounds n up to 1, 2 or 5 times a power of ten (at least 10), so
// the axis reads well.
func niceCeil(n int) int {
	if n <= 10 {
		return 10
	}
	p := 1
	for p*10 <= n {
		p *= 10
	}
	for _, m := range []int{1, 2, 5, 10} {
		if m*p >= n {
			return m * p
		}
	}
	return 10 * p
}

func (b bar) String() string {
	return fmt.Sprintf("%s: %d prompt + %d completion tokens in %d turns", b.Label, b.Prompt, b.Completion, b.Turns)
}
