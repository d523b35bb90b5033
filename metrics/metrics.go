// Package metrics keeps the gateway's Prometheus metrics: turns, steps, tool
// calls, model calls and tokens, queue depth, background jobs, sends and
// channel state. It is fed by the router's event hook and by small hooks
// around the model and the channels, and served in the Prometheus text
// format by Handler.
package metrics

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/llm"
)

// Outcomes used as label values.
const (
	OK    = "ok"
	Error = "error"
)

// Metrics holds the gateway's metrics in a registry of its own (no global
// state, so tests and several gateways in one process do not collide).
type Metrics struct {
	reg *prometheus.Registry
	r   prometheus.Registerer // reg, with the replica label when there is one

	turns           *prometheus.CounterVec
	turnSteps       *prometheus.HistogramVec
	turnDuration    *prometheus.HistogramVec
	toolCalls       *prometheus.CounterVec
	toolDuration    *prometheus.HistogramVec
	modelLatency    *prometheus.HistogramVec
	modelTokens     *prometheus.CounterVec
	jobs            *jobsCollector
	sends           *prometheus.CounterVec
	sendFailures    *prometheus.CounterVec
	channelRestarts *prometheus.CounterVec
	paced           *prometheus.CounterVec
	repliesQueued   *prometheus.CounterVec
	repliesLate     *prometheus.CounterVec
	repliesDropped  *prometheus.CounterVec
	deliveryStatus  *prometheus.CounterVec

	mu    sync.Mutex
	steps map[int64]int // running turn → the highest step seen
}

// New returns metrics registered in a new registry, with the Go runtime and
// process collectors and switchboard_build_info{version}.
func New(version string) *Metrics { return NewReplica(version, "") }

// NewReplica is New for one of several replicas sharing a store: every
// series carries the label replica="<id>" (none when replica is empty), so
// that one Prometheus can scrape them all.
func NewReplica(version, replica string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), steps: map[int64]int{}}
	var r prometheus.Registerer = m.reg
	if replica != "" {
		r = prometheus.WrapRegistererWith(prometheus.Labels{"replica": replica}, m.reg)
	}
	m.r = r
	f := func(c prometheus.Collector) { r.MustRegister(c) }
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "switchboard_build_info",
		Help: "Always 1; the version label says which build runs."}, []string{"version"})
	info.WithLabelValues(version).Set(1)
	f(info)

	m.turns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_turns_total",
		Help: "Agent turns finished, by channel and stop reason."}, []string{"channel", "stop_reason"})
	m.turnSteps = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "switchboard_turn_steps",
		Help:    "Steps (model calls that advanced the turn) per finished turn.",
		Buckets: []float64{1, 2, 3, 5, 8, 13, 21, 34, 50}}, []string{"channel"})
	m.turnDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "switchboard_turn_duration_seconds",
		Help:    "Wall-clock time of finished turns.",
		Buckets: []float64{0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}}, []string{"channel"})
	m.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_tool_calls_total",
		Help: "Tool calls, by tool and outcome (ok or error)."}, []string{"tool", "outcome"})
	m.toolDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "switchboard_tool_duration_seconds",
		Help: "Time of tool calls.", Buckets: prometheus.DefBuckets}, []string{"tool"})
	m.modelLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "switchboard_model_request_duration_seconds",
		Help:    "Time of model calls (retries and streaming included), by model and outcome.",
		Buckets: []float64{0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 180}}, []string{"model", "outcome"})
	m.modelTokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_model_tokens_total",
		Help: "Tokens reported by the model server, by model and kind (prompt, completion; cached, a part of prompt; reasoning, a part of completion)."}, []string{"model", "kind"})
	m.jobs = &jobsCollector{desc: prometheus.NewDesc("switchboard_background_jobs_total",
		"Background jobs finished (scheduled jobs, learning, ...), by job and outcome.", []string{"job", "outcome"}, nil),
		counts: map[[2]string]uint64{}, sources: map[string]func() map[string]uint64{}}
	m.sends = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_messages_sent_total",
		Help: "Messages sent to chats, by channel."}, []string{"channel"})
	m.sendFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_send_failures_total",
		Help: "Messages that could not be sent to a chat, by channel."}, []string{"channel"})
	m.channelRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_channel_restarts_total",
		Help: "Times a channel failed to start or dropped and was started again."}, []string{"channel"})
	m.paced = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_outbound_paced_total",
		Help: "Calls to chats held back by a channel's outbound pacing (its platform's rate limits), by channel and outcome: waited (a reply) or dropped (a preview, typing, a reaction)."},
		[]string{"channel", "outcome"})
	m.repliesQueued = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_replies_queued_total",
		Help: "Replies the platform did not take when written, kept in the outbox to deliver later, by channel."}, []string{"channel"})
	m.repliesLate = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_replies_delivered_late_total",
		Help: "Replies delivered from the outbox after the platform took them again, by channel."}, []string{"channel"})
	m.repliesDropped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_replies_dropped_total",
		Help: "Replies given up undelivered (older than channels.reply_max_age, or refused for good), by channel."}, []string{"channel"})
	m.deliveryStatus = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_delivery_status_total",
		Help: "Delivery statuses a platform reported for sent messages (WhatsApp: sent, delivered, read, failed), by channel and status."},
		[]string{"channel", "status"})
	for _, c := range []prometheus.Collector{m.turns, m.turnSteps, m.turnDuration, m.toolCalls, m.toolDuration,
		m.modelLatency, m.modelTokens, m.jobs, m.sends, m.sendFailures, m.channelRestarts, m.paced,
		m.repliesQueued, m.repliesLate, m.repliesDropped, m.deliveryStatus} {
		f(c)
	}
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.r})
}

// Registry returns the registry, for tests and extra collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Queue registers gauges read at scrape time: messages waiting in the
// router's queues and chats with a queued or running message. Call it once.
func (m *Metrics) Queue(depth, busy func() int) {
	m.r.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "switchboard_queue_depth",
			Help: "Messages waiting for their chat's running turn to finish."}, func() float64 { return float64(depth()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "switchboard_busy_chats",
			Help: "Chats with a queued or running message."}, func() float64 { return float64(busy()) }),
	)
}

// Observe records a turn event; it is the router's OnEvent hook.
func (m *Metrics) Observe(in channels.Inbound, ev agent.Event) {
	switch ev.Kind {
	case agent.EventUsage:
		m.step(ev.TurnID, ev.Step)
	case agent.EventToolEnd:
		m.step(ev.TurnID, ev.Step)
		outcome := OK
		if ev.IsError {
			outcome = Error
		}
		m.toolCalls.WithLabelValues(ev.Tool, outcome).Inc()
		if ev.Duration > 0 {
			m.toolDuration.WithLabelValues(ev.Tool).Observe(ev.Duration.Seconds())
		}
	case agent.EventDone:
		m.mu.Lock()
		steps := m.steps[ev.TurnID]
		delete(m.steps, ev.TurnID)
		m.mu.Unlock()
		m.turns.WithLabelValues(in.Channel, string(ev.StopReason)).Inc()
		m.turnSteps.WithLabelValues(in.Channel).Observe(float64(steps))
		if ev.Duration > 0 {
			m.turnDuration.WithLabelValues(in.Channel).Observe(ev.Duration.Seconds())
		}
	}
}

func (m *Metrics) step(turnID int64, step int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if step > m.steps[turnID] {
		m.steps[turnID] = step
	}
}

// Sent records the outcome of one send to a chat; it is the router's
// OnSend hook.
func (m *Metrics) Sent(channel string, err error) {
	if err != nil {
		m.sendFailures.WithLabelValues(channel).Inc()
		return
	}
	m.sends.WithLabelValues(channel).Inc()
}

// Outbox records what happened to a reply the platform did not take: kind
// is "queued", "delivered" (late) or "dropped" (reply.OutboxEvent).
func (m *Metrics) Outbox(kind, channel string) {
	switch kind {
	case "queued":
		m.repliesQueued.WithLabelValues(channel).Inc()
	case "delivered":
		m.repliesLate.WithLabelValues(channel).Inc()
	case "dropped":
		m.repliesDropped.WithLabelValues(channel).Inc()
	}
}

// RepliesPending registers switchboard_replies_pending, read at scrape
// time: replies waiting in the outbox. Call it once.
func (m *Metrics) RepliesPending(n func() int) {
	m.r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "switchboard_replies_pending",
		Help: "Replies waiting in the outbox for their platform to take them."}, func() float64 { return float64(n()) }))
}

// StoreTransactions registers switchboard_store_transactions_total and
// switchboard_store_commits_total, read at scrape time from counts (the
// store's TxCounts). Call it once.
func (m *Metrics) StoreTransactions(counts func() (transactions, commits uint64)) {
	m.r.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "switchboard_store_transactions_total",
			Help: "Store transactions the gateway asked for (on SQLite, concurrent ones share a commit)."},
			func() float64 { n, _ := counts(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "switchboard_store_commits_total",
			Help: "Transactions the database ran (or began): one per group commit on SQLite."},
			func() float64 { _, n := counts(); return float64(n) }),
	)
}

// JobDone records a finished background job (outcome OK or Error, or a
// word of the job's own such as "skipped").
func (m *Metrics) JobDone(job, outcome string) {
	m.jobs.mu.Lock()
	defer m.jobs.mu.Unlock()
	m.jobs.counts[[2]string{job, outcome}]++
}

// JobSource reports the outcomes of a kind of background job that keeps
// its own counters (totals by outcome since the start), read at scrape time.
func (m *Metrics) JobSource(job string, totals func() map[string]uint64) {
	m.jobs.mu.Lock()
	defer m.jobs.mu.Unlock()
	m.jobs.sources[job] = totals
}

// jobsCollector serves switchboard_background_jobs_total from JobDone
// counts and JobSource totals.
type jobsCollector struct {
	desc    *prometheus.Desc
	mu      sync.Mutex
	counts  map[[2]string]uint64
	sources map[string]func() map[string]uint64
}

func (c *jobsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *jobsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	counts := make(map[[2]string]uint64, len(c.counts))
	for k, v := range c.counts {
		counts[k] = v
	}
	sources := make(map[string]func() map[string]uint64, len(c.sources))
	for k, f := range c.sources {
		sources[k] = f
	}
	c.mu.Unlock()
	for job, f := range sources {
		for outcome, n := range f() {
			counts[[2]string{job, outcome}] += n
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), k[0], k[1])
	}
}

// Channels registers switchboard_channel_up{channel}, read at scrape time
// from up: 1 for a connected channel, 0 for one starting or waiting to
// retry. Call it once.
func (m *Metrics) Channels(up func() map[string]bool) {
	m.r.MustRegister(channelCollector{
		desc: prometheus.NewDesc("switchboard_channel_up",
			"1 while a channel is connected, 0 while it starts or waits to retry.", []string{"channel"}, nil),
		up: up,
	})
}

type channelCollector struct {
	desc *prometheus.Desc
	up   func() map[string]bool
}

func (c channelCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c channelCollector) Collect(ch chan<- prometheus.Metric) {
	for name, up := range c.up() {
		v := 0.0
		if up {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, name)
	}
}

// ChannelRestarted counts a restart of a channel after a failure.
func (m *Metrics) ChannelRestarted(channel string) {
	m.channelRestarts.WithLabelValues(channel).Inc()
}

// Paced counts a call to a chat that a channel's outbound pacing held
// back: outcome "waited" or "dropped".
func (m *Metrics) Paced(channel, outcome string) {
	m.paced.WithLabelValues(channel, outcome).Inc()
}

// DeliveryStatus counts a delivery status a platform reported for a sent
// message; statuses other than sent, delivered, read and failed count as
// "other".
func (m *Metrics) DeliveryStatus(channel, status string) {
	switch status {
	case "sent", "delivered", "read", "failed":
	default:
		status = "other"
	}
	m.deliveryStatus.WithLabelValues(channel, status).Inc()
}

// Completer is a chat model (agent.Model and skills.Model).
type Completer interface {
	Complete(ctx context.Context, req llm.Request, onDelta func(llm.Delta)) (llm.Response, error)
}

// ModelHealth is what the observed model calls say about the model server.
type ModelHealth struct {
	LastOK      time.Time // the last successful call; zero if none yet
	LastFailure time.Time // the last failed call; zero if none yet
	LastError   string    // the error of that call (redacted by the client)
	// Unavailable counts the calls in a row, up to the last, that failed
	// because the model server was unavailable (llm.Unavailable: not
	// reached, a 5xx, a broken stream, after the client's retries). A
	// call that succeeds, or that the server refused, ends the run; a
	// probe (Succeeded) does not: it does not ask for a completion.
	Unavailable int
	// InFlight counts the calls running now; Quiet is when the model last
	// showed life to them: the start of the oldest, or since then the
	// last call that ended or streamed a fragment (zero without calls in
	// flight). /readyz fails when it is too long ago: the server hangs.
	InFlight int
	Quiet    time.Time
}

// Model wraps a chat model so that every call is timed and counted, its
// tokens are added up by model, and the last success and failure are kept
// for readiness checks.
type Model struct {
	next  Completer
	m     *Metrics
	model string
	now   func() time.Time

	mu       sync.Mutex
	health   ModelHealth
	answered chan struct{} // closed at the next successful call; nil until asked for
	// flight are the start times of the calls in flight, by call; alive is
	// the last time a call ended or streamed a fragment.
	flight map[uint64]time.Time
	nextID uint64
	alive  time.Time
}

// ObserveModel wraps next; defaultModel labels failed calls that do not name
// their model.
func (m *Metrics) ObserveModel(next Completer, defaultModel string) *Model {
	return &Model{next: next, m: m, model: defaultModel, now: time.Now}
}

// Complete calls the wrapped model and records the call. A call cancelled
// by its caller (a /stop, a shutdown) is neither a success nor a failure.
func (o *Model) Complete(ctx context.Context, req llm.Request, onDelta func(llm.Delta)) (llm.Response, error) {
	start := o.now()
	done := o.begin(start)
	defer done()
	lively := onDelta
	if onDelta != nil { // nil stays nil: the client streams nothing then
		lively = func(d llm.Delta) {
			o.lively()
			onDelta(d)
		}
	}
	resp, err := o.next.Complete(ctx, req, lively)
	end := o.now()
	if err != nil && ctx.Err() != nil {
		return resp, err
	}
	model, outcome := resp.Model, OK
	if err != nil {
		outcome = Error
		var le *llm.Error
		if errors.As(err, &le) {
			model = le.Model
		}
	}
	if model == "" {
		model = o.model
	}
	o.m.modelLatency.WithLabelValues(model, outcome).Observe(end.Sub(start).Seconds())
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.health.LastFailure, o.health.LastError = end, err.Error()
		if llm.Unavailable(err) {
			o.health.Unavailable++
		} else {
			o.health.Unavailable = 0
		}
		return resp, err
	}
	o.health.LastOK, o.health.Unavailable = end, 0
	if o.answered != nil {
		close(o.answered)
		o.answered = nil
	}
	o.m.modelTokens.WithLabelValues(model, "prompt").Add(float64(resp.Usage.PromptTokens))
	o.m.modelTokens.WithLabelValues(model, "completion").Add(float64(resp.Usage.CompletionTokens))
	o.m.modelTokens.WithLabelValues(model, "cached").Add(float64(resp.Usage.CachedTokens))
	o.m.modelTokens.WithLabelValues(model, "reasoning").Add(float64(resp.Usage.ReasoningTokens))
	return resp, nil
}

// Health returns what the calls so far say about the model server.
func (o *Model) Health() ModelHealth {
	o.mu.Lock()
	defer o.mu.Unlock()
	h := o.health
	h.InFlight = len(o.flight)
	for _, t := range o.flight {
		if h.Quiet.IsZero() || t.Before(h.Quiet) {
			h.Quiet = t
		}
	}
	if h.InFlight > 0 && o.alive.After(h.Quiet) {
		h.Quiet = o.alive
	}
	return h
}

// begin counts a call in flight from start; the func it returns ends it.
func (o *Model) begin(start time.Time) func() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.flight == nil {
		o.flight = map[uint64]time.Time{}
	}
	o.nextID++
	id := o.nextID
	o.flight[id] = start
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		delete(o.flight, id)
		o.alive = o.now()
	}
}

// lively notes that a call in flight streamed a fragment.
func (o *Model) lively() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.alive = o.now()
}

// Answered returns a channel closed when a call next succeeds (the
// router's messages waiting for the model wake on it).
func (o *Model) Answered() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.answered == nil {
		o.answered = make(chan struct{})
	}
	return o.answered
}

// Succeeded records a successful contact with the model server made
// outside Complete (a readiness probe).
func (o *Model) Succeeded() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.health.LastOK = o.now()
}

// Failed records a failed contact made outside Complete.
func (o *Model) Failed(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.health.LastFailure, o.health.LastError = o.now(), err.Error()
}
