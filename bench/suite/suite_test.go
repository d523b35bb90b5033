package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/bench/internal/gateway"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// The suite itself runs with `go run ./bench/suite`; these tests cover the
// arithmetic and the fake model's script, which decide the table's marks.

func TestPercentile(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	var hundred []time.Duration
	for i := 1; i <= 100; i++ {
		hundred = append(hundred, ms(i))
	}
	tests := []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{nil, 50, 0},
		{[]time.Duration{ms(7)}, 99, ms(7)},
		{hundred, 50, ms(50)},
		{hundred, 99, ms(99)},
		{hundred, 100, ms(100)},
		{hundred[:10], 99, ms(10)}, // nearest rank: ceil(9.9) = 10th
		{hundred[:3], 50, ms(2)},
	}
	for _, tt := range tests {
		if got := percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("percentile(%d values, %v) = %v, want %v", len(tt.sorted), tt.p, got, tt.want)
		}
	}
}

func TestModelScript(t *testing.T) {
	for _, n := range []int{1, 42, 100} {
		got, ok := turnNumber(userText(n))
		if !ok || got != n {
			t.Errorf("turnNumber(userText(%d)) = %d, %v", n, got, ok)
		}
	}
	if _, ok := turnNumber("You said: (turn 3) x"); ok {
		t.Error("turnNumber accepted a message that does not start with the marker")
	}
	if userText(5) != userText(5) || assistantText(5) == assistantText(6) {
		t.Error("the texts must be the same for the same turn and differ between turns")
	}
	if n := len(strings.Fields(summaryText)); n != 301 {
		t.Errorf("the summary has %d words, want 300 after its label", n)
	}

	reply := answer(0).Func
	sys := llm.Message{Role: llm.RoleSystem, Content: "You are Switchboard."}
	tests := []struct {
		name string
		rec  testkit.Recorded
		want string
	}{
		{"turn", testkit.Recorded{Messages: []llm.Message{sys, {Role: llm.RoleUser, Content: userText(7)}}}, assistantText(7)},
		{"echo", testkit.Recorded{Messages: []llm.Message{sys, {Role: llm.RoleUser, Content: "hello from chat 3"}}}, "You said: hello from chat 3"},
		{"summary", testkit.Recorded{Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: summaryPrefix + " Write a concise summary"},
			{Role: llm.RoleUser, Content: "[user] " + userText(1)},
		}}, summaryText},
	}
	for _, tt := range tests {
		if got := reply(tt.rec).Text; got != tt.want {
			t.Errorf("%s: reply %.40q, want %.40q", tt.name, got, tt.want)
		}
	}
}

func TestMarks(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	rep := report{
		opts:     options{latency: time.Second},
		startup:  startupResult{ready: []time.Duration{ms(90), ms(200), ms(100)}},
		overhead: overheadResult{times: []time.Duration{ms(3), ms(4), ms(12)}, cpu: ms(3)},
		bursts: []burstResult{
			{chats: 1, wall: ms(1010), replies: []time.Duration{ms(1010)}, modelAt: []time.Duration{ms(5)}, peakKB: 30000},
			{chats: 1000, wall: ms(2400), replies: []time.Duration{ms(2400)}, modelAt: []time.Duration{ms(1200)}, peakKB: 160000},
		},
		tokens: tokenResult{actual: []int{100, 300}, naive: []int{100, 1000}},
		memory: []memoryResult{
			{turns: 1000, idle: gateway.Memory{RSS: 19000, Anon: 5000, PSS: 18000}, after: gateway.Memory{Anon: 9000}},
			{deployed: true, turns: 1000, idle: gateway.Memory{RSS: 25000, Anon: 5000, PSS: 24000}, after: gateway.Memory{Anon: 10000}},
		},
	}
	want := map[string]string{
		"1":             "✓", // median 100 ms < 150 ms
		"2 as built":    "✓", // RSS 19000 kB = 19.5 MB ≤ 20 MB
		"2 as deployed": "✗", // PSS 24000 kB = 24.6 MB > 24 MB
		"7 as built":    "✓", // RssAnon +4000 kB = 4.1 MB
		"7 as deployed": "✗", // +5000 kB = 5.1 MB
		"3":             "✗", // p99 of three is the largest, 12 ms
		"4":             "✓", // 1000 chats in 2.4 s; 1 chat has no target
		"5":             "✗", // 160000 kB = 163.8 MB
		"6":             "✓", // 30 %
	}
	for _, r := range rep.rows() {
		if r.n == "4" && strings.HasPrefix(r.what, "1 chat") {
			if r.mark() != "" {
				t.Errorf("row 4 with one chat has mark %q, want none", r.mark())
			}
			continue
		}
		key := r.n
		if r.n == "2" || r.n == "7" {
			key += map[bool]string{true: " as deployed", false: " as built"}[strings.Contains(r.what, "as deployed")]
		}
		if got := r.mark(); got != want[key] {
			t.Errorf("row %s (%s = %s): mark %q, want %q", key, r.what, r.result, got, want[key])
		}
		delete(want, key)
	}
	if len(want) > 0 {
		t.Errorf("rows missing: %v", want)
	}
	var out bytes.Buffer
	rep.write(&out)
	if !strings.Contains(out.String(), "| 6 | prompt tokens of the request at turn 2 vs the naive full-history request | 300 vs 1000 (30 %) |") {
		t.Errorf("table lacks row 6 as expected:\n%s", out.String())
	}
}

// Repeated bursts: rows 4 and 5 judge the median run and show the range.
func TestMedianRun(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	runs := []burstResult{
		{chats: 1000, wall: ms(2700), peakKB: 140000},
		{chats: 1000, wall: ms(2200), peakKB: 150000},
		{chats: 1000, wall: ms(2300), peakKB: 145000},
	}
	m := medianRun(runs)
	if m.wall != ms(2300) || m.peakKB != 145000 || m.medianPeakKB() != 145000 {
		t.Errorf("median run: wall %s, peak %d kB (median %d); want 2.3 s and 145000", m.wall, m.peakKB, m.medianPeakKB())
	}
	rep := report{opts: options{latency: time.Second}, bursts: []burstResult{m},
		startup:  startupResult{ready: []time.Duration{ms(90)}},
		overhead: overheadResult{times: []time.Duration{ms(3)}},
		tokens:   tokenResult{actual: []int{100}, naive: []int{100}}}
	for _, r := range rep.rows() {
		switch r.n {
		case "4":
			if r.mark() != "✓" || !strings.Contains(r.result, "2.30 s (2.20 s–2.70 s)") || !strings.Contains(r.what, "median of 3 runs") {
				t.Errorf("row 4: %q %q, want the median 2.30 s with its range, ✓", r.result, r.mark())
			}
		case "5":
			if r.mark() != "✓" || !strings.Contains(r.result, "(143.4–153.6 MB)") {
				t.Errorf("row 5: %q %q, want the median 148.5 MB with its range, ✓", r.result, r.mark())
			}
		}
	}
}
