package httpapi

// The dashboard's readable metrics page: the gateway's own series and a
// few of the process's, from the same registry /metrics serves to
// Prometheus, as tables with their help text.

import (
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// keyProcessMetrics are the runtime and process series worth a glance;
// the rest of them stay on /metrics.
var keyProcessMetrics = map[string]bool{
	"go_goroutines":                 true,
	"process_resident_memory_bytes": true,
	"process_cpu_seconds_total":     true,
	"process_open_fds":              true,
}

// metricFamily is one metric with its series, for the page.
type metricFamily struct {
	Name, Help, Kind string
	Histogram        bool // series show count, sum and mean
	Series           []metricSeries
}

type metricSeries struct {
	Labels string // `a="x", b="y"`; empty for a metric without labels
	Value  string // counters and gauges
	Count  string // histograms and summaries: observations,
	Sum    string // their sum
	Mean   string // and their mean
}

func (s *Server) metricsPage(_ http.ResponseWriter, r *http.Request) (string, any, error) {
	data := map[string]any{"Title": "Metrics", "Head": s.head(r), "Raw": s.opts.Metrics != nil}
	if s.opts.Gatherer == nil {
		return "metrics.html", data, nil
	}
	mfs, err := s.opts.Gatherer.Gather()
	if err != nil && len(mfs) == 0 {
		return "", nil, fmt.Errorf("httpapi: gather metrics: %w", err)
	}
	if err != nil {
		s.log.Warn("dashboard metrics: some collectors failed", "err", err)
	}
	var own, process []metricFamily
	for _, mf := range mfs {
		name := mf.GetName()
		switch {
		case strings.HasPrefix(name, "switchboard_"):
			own = append(own, readable(mf))
		case keyProcessMetrics[name]:
			process = append(process, readable(mf))
		}
	}
	data["Own"], data["Process"] = own, process
	return "metrics.html", data, nil
}

// readable turns a gathered family into table rows.
func readable(mf *dto.MetricFamily) metricFamily {
	f := metricFamily{Name: mf.GetName(), Help: mf.GetHelp()}
	unit := ""
	if strings.HasSuffix(f.Name, "_bytes") {
		unit = "bytes"
	} else if strings.HasSuffix(f.Name, "_seconds") || strings.HasSuffix(f.Name, "_seconds_total") {
		unit = "s"
	}
	switch mf.GetType() {
	case dto.MetricType_COUNTER:
		f.Kind = "counter"
	case dto.MetricType_GAUGE:
		f.Kind = "gauge"
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		f.Kind, f.Histogram = "histogram", true
	case dto.MetricType_SUMMARY:
		f.Kind, f.Histogram = "summary", true
	default:
		f.Kind = "untyped"
	}
	for _, m := range mf.GetMetric() {
		row := metricSeries{Labels: labelText(m.GetLabel())}
		switch {
		case m.Counter != nil:
			row.Value = valueText(m.GetCounter().GetValue(), unit)
		case m.Gauge != nil:
			row.Value = valueText(m.GetGauge().GetValue(), unit)
		case m.Histogram != nil:
			h := m.GetHistogram()
			row.Count, row.Sum, row.Mean = meanRow(float64(h.GetSampleCount()), h.GetSampleSum(), unit)
		case m.Summary != nil:
			sm := m.GetSummary()
			row.Count, row.Sum, row.Mean = meanRow(float64(sm.GetSampleCount()), sm.GetSampleSum(), unit)
		case m.Untyped != nil:
			row.Value = valueText(m.GetUntyped().GetValue(), unit)
		}
		f.Series = append(f.Series, row)
	}
	sort.SliceStable(f.Series, func(i, j int) bool { return f.Series[i].Labels < f.Series[j].Labels })
	return f
}

func meanRow(count, sum float64, unit string) (string, string, string) {
	mean := "–"
	if count > 0 {
		mean = valueText(sum/count, unit)
	}
	return valueText(count, ""), valueText(sum, unit), mean
}

// labelText writes labels as Prometheus does, without the braces.
func labelText(labels []*dto.LabelPair) string {
	parts := make([]string, 0, len(labels))
	for _, l := range labels {
		parts = append(parts, l.GetName()+"="+strconv.Quote(l.GetValue()))
	}
	return strings.Join(parts, ", ")
}

// valueText writes a value for people: whole numbers as they are, others
// with three decimals at most, bytes in KiB, MiB or GiB, seconds with "s"
// (under a second in milliseconds).
func valueText(v float64, unit string) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	if unit == "bytes" {
		for _, u := range []struct {
			size float64
			name string
		}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
			if math.Abs(v) >= u.size {
				return strconv.FormatFloat(v/u.size, 'f', 1, 64) + " " + u.name
			}
		}
		return strconv.FormatFloat(v, 'f', 0, 64) + " B"
	}
	if unit == "s" && v != 0 && math.Abs(v) < 1 {
		return trimZeros(strconv.FormatFloat(v*1000, 'f', 1, 64)) + " ms"
	}
	var text string
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		text = strconv.FormatFloat(v, 'f', 0, 64)
	} else {
		text = trimZeros(strconv.FormatFloat(v, 'f', 3, 64))
	}
	if unit == "s" {
		return text + " s"
	}
	return text
}

// trimZeros drops a decimal number's trailing zeros (and its point).
func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	return strings.TrimRight(strings.TrimRight(s, "0"), ".")
}
