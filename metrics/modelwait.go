package metrics

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of a message that waited for the model (ModelWaits).
const (
	Held     = "held"
	Answered = "answered"
	GivenUp  = "given_up"
)

// ModelWaits registers the messages held while the model was unavailable,
// read at scrape time from stats: switchboard_model_waiting_messages, the
// messages waiting now, and switchboard_model_waits_total by outcome
// (held, answered, given_up). Call it once.
func (m *Metrics) ModelWaits(stats func() (waiting int, totals map[string]uint64)) {
	m.r.MustRegister(modelWaitCollector{stats: stats,
		waiting: prometheus.NewDesc("switchboard_model_waiting_messages",
			"Messages waiting for the model to be available again (held, not yet answered or given up).", nil, nil),
		totals: prometheus.NewDesc("switchboard_model_waits_total",
			"Messages held because the model was unavailable, then answered, or given up after the maximum age, by outcome.",
			[]string{"outcome"}, nil)})
}

type modelWaitCollector struct {
	stats           func() (int, map[string]uint64)
	waiting, totals *prometheus.Desc
}

func (c modelWaitCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.waiting
	ch <- c.totals
}

func (c modelWaitCollector) Collect(ch chan<- prometheus.Metric) {
	waiting, totals := c.stats()
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(waiting))
	for _, o := range []string{Held, Answered, GivenUp} {
		ch <- prometheus.MustNewConstMetric(c.totals, prometheus.CounterValue, float64(totals[o]), o)
	}
}
