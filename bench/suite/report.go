package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-gateway/switchboard/bench/internal/gateway"
	breport "github.com/switchboard-gateway/switchboard/bench/internal/report"
)

// report is everything measured, printed as a Markdown table.
type report struct {
	opts     options
	settings settings
	date     time.Time
	machine  string

	startup  startupResult
	load     string // /proc/loadavg when the suite started
	overhead overheadResult
	bursts   []burstResult
	tokens   tokenResult
	memory   []memoryResult // as built, then as deployed
}

// row is one line of the table; target "" means there is none.
type row struct {
	n, what, result, target string
	ok                      bool
}

func (r row) mark() string {
	switch {
	case r.target == "":
		return ""
	case r.ok:
		return "✓"
	default:
		return "✗"
	}
}

func (rep report) rows() []row {
	var rows []row
	ready := slices.Clone(rep.startup.ready)
	slices.Sort(ready)
	if med := percentile(ready, 50); len(ready) > 0 {
		rows = append(rows, row{"1", fmt.Sprintf("start to ready (`/readyz` 200), fresh database; median of %d (min–max)", len(ready)),
			fmt.Sprintf("%s (%s–%s)", breport.MS(med), breport.MS(ready[0]), breport.MS(ready[len(ready)-1])), "< " + breport.MS(targetReady), med < targetReady})
	}
	for _, m := range rep.memory {
		r := row{"2", fmt.Sprintf("idle memory %s, %s after ready: RSS / RssAnon / PSS", m.how(), breport.Secs(settle)), mem(m.idle), "", false}
		if m.deployed {
			r.target, r.ok = fmt.Sprintf("PSS ≤ %.0f MB", targetPSSMB), mb(m.idle.PSS) <= targetPSSMB
		} else {
			r.target, r.ok = fmt.Sprintf("RSS ≤ %.0f MB", targetIdleMB), mb(m.idle.RSS) <= targetIdleMB
		}
		rows = append(rows, r)
	}

	lat := slices.Clone(rep.overhead.times)
	slices.Sort(lat)
	if p99 := percentile(lat, 99); len(lat) > 0 {
		rows = append(rows, row{"3", fmt.Sprintf("gateway overhead per message, p50 / p99 / max (%d messages one after another, model answers at once)", len(lat)),
			fmt.Sprintf("%s / %s / %s", breport.MS(percentile(lat, 50)), breport.MS(p99), breport.MS(lat[len(lat)-1])), "p99 < " + breport.MS(targetP99), p99 < targetP99})
	}

	var peak *burstResult
	for i, b := range rep.bursts {
		replies := slices.Clone(b.replies)
		slices.Sort(replies)
		what := fmt.Sprintf("%d chat(s) at once, model latency %s: wall time, throughput (reply time p50)", b.chats, breport.Secs(rep.opts.latency))
		wall := breport.Secs(b.wall)
		if n := len(b.walls); n > 1 {
			what = fmt.Sprintf("%d chat(s) at once, model latency %s: wall time, median of %d runs (min–max); throughput and reply time p50 of that run",
				b.chats, breport.Secs(rep.opts.latency), n)
			wall += fmt.Sprintf(" (%s–%s)", breport.Secs(b.walls[0]), breport.Secs(b.walls[n-1]))
		}
		r := row{"4", what,
			fmt.Sprintf("%s, %.0f msg/s (%s)", wall, float64(b.chats)/b.wall.Seconds(), breport.Secs(percentile(replies, 50))), "", false}
		if b.chats == targetBurstChat && rep.opts.latency == time.Second {
			r.target, r.ok = "≤ "+breport.Secs(targetBurstWall), b.wall <= targetBurstWall
		}
		rows = append(rows, r)
		if peak == nil || b.chats > peak.chats {
			peak = &rep.bursts[i]
		}
	}
	if peak != nil {
		var others []string
		for _, b := range rep.bursts {
			if b.chats != peak.chats {
				others = append(others, fmt.Sprintf("%d: %.1f MB", b.chats, mb(b.medianPeakKB())))
			}
		}
		what := fmt.Sprintf("peak RSS (VmHWM) with %d chats at once", peak.chats)
		result := fmt.Sprintf("%.1f MB", mb(peak.medianPeakKB()))
		if n := len(peak.peaks); n > 1 {
			what += fmt.Sprintf(", median of %d runs (min–max)", n)
			result += fmt.Sprintf(" (%.1f–%.1f MB)", mb(peak.peaks[0]), mb(peak.peaks[n-1]))
		}
		if len(others) > 0 {
			what += " (" + strings.Join(others, ", ") + ")"
		}
		r := row{"5", what, result, "", false}
		if peak.chats == targetBurstChat {
			r.target, r.ok = fmt.Sprintf("≤ %.0f MB", targetPeakMB), mb(peak.medianPeakKB()) <= targetPeakMB
		}
		rows = append(rows, r)
	}

	t := rep.tokens
	if n := len(t.actual); n > 0 {
		ratio := float64(t.actual[n-1]) / float64(t.naive[n-1])
		rows = append(rows, row{"6", fmt.Sprintf("prompt tokens of the request at turn %d vs the naive full-history request", n),
			fmt.Sprintf("%d vs %d (%.0f %%)", t.actual[n-1], t.naive[n-1], 100*ratio), fmt.Sprintf("≤ %.0f %%", 100*targetTokens), ratio <= targetTokens})
	}
	for _, m := range rep.memory {
		grew := mb(m.after.Anon - m.idle.Anon)
		rows = append(rows, row{"7", fmt.Sprintf("memory %s after a conversation of %d turns (default context window): RSS / RssAnon / PSS at the last reply; %s later; RssAnon then above idle",
			m.how(), m.turns, breport.Secs(settleAfter)),
			fmt.Sprintf("%s; %s; %+.1f MB", mem(m.end), mem(m.after), grew), fmt.Sprintf("≤ +%.0f MB", targetAnonMB), grew <= targetAnonMB})
	}
	return rows
}

func (m memoryResult) how() string {
	if m.deployed {
		return "as deployed"
	}
	return "as built"
}

// mem prints RSS / RssAnon / PSS.
func mem(m gateway.Memory) string {
	return fmt.Sprintf("%.1f / %.1f / %.1f MB", mb(m.RSS), mb(m.Anon), mb(m.PSS))
}

// medianPeakKB is the median VmHWM of the runs, or the one run's.
func (b burstResult) medianPeakKB() int {
	if len(b.peaks) == 0 {
		return b.peakKB
	}
	return b.peaks[len(b.peaks)/2]
}

func (rep report) write(w io.Writer) {
	fmt.Fprintf(w, "Switchboard benchmark suite, %s; %s; load average %s\n\n", rep.date.Format("2006-01-02"), rep.machine, rep.load)
	fmt.Fprintln(w, "| # | measurement | result | target | |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range rep.rows() {
		target := r.target
		if target == "" {
			target = "—"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.n, r.what, r.result, target, r.mark())
	}
	fmt.Fprintln(w)
	for _, n := range rep.notes() {
		fmt.Fprintln(w, "- "+n)
	}
}

func (rep report) notes() []string {
	s, t := rep.settings, rep.tokens
	notes := []string{
		fmt.Sprintf("Config of every run (as an operator sets it): `llm.context_window: %d`, `agent.max_concurrent_turns: %d` "+
			"(the default 64 would run 1000 chats in 16 rounds of the model's latency), `learning.enabled: false`, Telegram (`poll_timeout: 1s`, `pacing: false` against a fake Bot API without rate limits, "+
			"`allow_users` listing user ids 1–%d, one private chat each) and Discord enabled, `log.format: json` at level info, a fresh database per process.",
			s.ContextWindow, s.MaxConcurrentTurns, s.Users),
		"Times are taken at the fakes: from the update's arrival at the fake Telegram to the arrival of the reply's `sendMessage` there; " +
			"they include the long poll, the inbox write, the model request over loopback HTTP (streamed), the transcript writes and the send. " +
			"The fakes run in the suite's process on the same cores. MB = 10⁶ bytes.",
	}
	if n := len(rep.overhead.times); n > 0 {
		third := max(n/3, 1)
		first, last := slices.Clone(rep.overhead.times[:third]), slices.Clone(rep.overhead.times[n-third:])
		slices.Sort(first)
		slices.Sort(last)
		notes = append(notes, fmt.Sprintf("Row 3: the gateway used %s of CPU per message. The chat's history grows with every message "+
			"(%d warm-up messages came first): p50 / p99 of the first %d measured messages %s / %s, of the last %d %s / %s.",
			breport.MS(rep.overhead.cpu/time.Duration(n)), rep.opts.warm, third, breport.MS(percentile(first, 50)), breport.MS(percentile(first, 99)),
			third, breport.MS(percentile(last, 50)), breport.MS(percentile(last, 99))))
	}
	for _, b := range rep.bursts {
		last := time.Duration(0)
		if len(b.modelAt) > 0 {
			last = b.modelAt[len(b.modelAt)-1]
		}
		note := fmt.Sprintf("Row 4, %d chat(s)", b.chats)
		if len(b.walls) > 1 {
			note += ", the run of median wall time"
		}
		note += fmt.Sprintf(": the last model request arrived %s after the first message, the last reply %s",
			breport.Secs(last), breport.Secs(b.wall))
		if b.chats >= 100 { // /proc counts CPU time in 10 ms ticks
			note += fmt.Sprintf("; the gateway used %s of CPU (%s per message), the fakes %s", breport.Secs(b.cpu), breport.MS(b.cpu/time.Duration(b.chats)), breport.Secs(b.fakesCPU))
		}
		notes = append(notes, note+".")
	}
	if n := len(t.actual); n > 0 {
		lo, hi := n-20, n
		lo = max(lo, 0)
		maxRatio, sum, naiveSum := 0.0, 0, 0
		for i := lo; i < hi; i++ {
			maxRatio = max(maxRatio, float64(t.actual[i])/float64(t.naive[i]))
		}
		for i := range n {
			sum += t.actual[i]
			naiveSum += t.naive[i]
		}
		fold := "no compaction happened"
		if t.firstFold > 0 {
			fold = fmt.Sprintf("the first request with a summary was turn %d", t.firstFold)
		}
		notes = append(notes, fmt.Sprintf("Row 6: one chat, %d turns, each a ~240-byte user message and a ~800-byte answer; "+
			"compaction's summary requests are answered with 300 words (the most its prompt allows); %s; %d summary requests. "+
			"Tokens are agent.EstimateTokens (about 4 bytes a token plus framing, tool schemas included) of the request the fake model received; "+
			"the naive request is the system prompt of turn 1 plus every earlier message, rebuilt from the recorded requests and checked equal "+
			"to the real ones for the %d turns before compaction. Highest ratio in the last %d turns: %.0f %%. Over all %d turns: %d prompt tokens "+
			"plus %d in summary requests, against %d naive (%.0f %%).",
			n, fold, t.summaries, t.checked, hi-lo, 100*maxRatio, n, sum, t.summaryTok, naiveSum, 100*float64(sum+t.summaryTok)/float64(naiveSum)))
	}
	if len(rep.memory) > 0 {
		notes = append(notes, "Rows 2 and 7: RSS and PSS from /proc/PID/smaps_rollup, RssAnon from /proc/PID/status. As built: the binary just linked by "+
			"`go build`, every page of it in the page cache (on some kernels in large folios that a process maps whole); as deployed: a copy of it "+
			"written, synced and dropped from the page cache (posix_fadvise DONTNEED, checked with mincore) before the start, as after a deploy or a "+
			"reboot. Each is a fresh process; row 7's conversation is row 6's (~240-byte messages, ~800-byte answers, the model answering at once) "+
			"at the default `llm.context_window`, and its last figure is RssAnon "+breport.Secs(settleAfter)+" after the last reply minus RssAnon idle.")
		for _, m := range rep.memory {
			if n := len(m.replies); n > 1 {
				rest := slices.Clone(m.replies[1:])
				slices.Sort(rest)
				notes = append(notes, fmt.Sprintf("Row 7 %s: the first reply, after %s idle, took %s; the others %s (p50), %s (p99).",
					m.how(), breport.Secs(settle), breport.MS(m.replies[0]), breport.MS(percentile(rest, 50)), breport.MS(percentile(rest, 99))))
			}
		}
	}
	return notes
}

// percentile is the nearest-rank p-th percentile of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// mb converts kB (KiB, as /proc reports) to MB.
func mb(kb int) float64 { return float64(kb) * 1024 / 1e6 }
