package main

import (
	"fmt"
	"github.com/switchboard-gateway/switchboard/bench/internal/report"
	"io"
	"slices"
	"strings"
	"time"
)

// writeReport prints the settings and the Markdown tables.
func writeReport(w io.Writer, o options, results []result, pgVersion, load string) {
	fmt.Fprintf(w, "## Replicas: %d chats at once, model latency %s\n\n", o.chats, report.Secs(o.latency))
	fmt.Fprintf(w, "%s; %s; PostgreSQL %s on 127.0.0.1 (each replica's pool: 16 connections, store/postgres.go); load average %s.\n",
		time.Now().Format("2006-01-02"), report.Machine(), pgVersion, load)
	fmt.Fprintf(w, "Each replica: agent.max_concurrent_turns %d, cluster.lease_ttl %s, poll_interval %s, Telegram webhook behind a round-robin HTTPS balancer; "+
		"warm-up burst of %d other chats before each measured one, not counted; every run on a fresh schema and fresh processes.\n\n",
		o.maxTurns, o.leaseTTL, o.poll, o.warmup)

	fmt.Fprintln(w, "| replicas | run | wall (first post → last answer) | answers/s | all updates accepted after | sendMessage p50 / p90 | gateway CPU (all replicas) | PostgreSQL CPU: their backends (all postgres processes) | bench process CPU (fakes, balancer) | machine busy | messages besides the answers | store: row writes / scans per answer | ids lost to rolled-back inserts |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		b := r.b
		var gw, pg time.Duration
		for _, s := range b.perReplica {
			gw += s.cpu
			pg += s.pgCPU
		}
		fmt.Fprintf(w, "| %d | %d | %s | %.0f | %s | %s / %s | %s | %s (%s) | %s | %.0f %% of %d cores | %d | %.1f / %.1f | %s |\n",
			r.replicas, r.run, report.Secs(b.wall), float64(b.chats)/b.wall.Seconds(), report.Secs(b.ingested),
			report.Secs(percentile(b.replies, 50)), report.Secs(percentile(b.replies, 90)),
			report.Secs(gw), report.Secs(pg), report.Secs(b.pgCPU), report.Secs(b.benchCPU), 100*b.machine, b.cores, len(b.notices),
			float64(b.store.writes)/float64(b.chats), float64(b.store.scans)/float64(b.chats), gaps(b.store))
	}
	fmt.Fprintln(w)
	texts := map[string]int{}
	for _, r := range results {
		for _, n := range r.b.notices {
			texts[n.text]++
		}
	}
	for t, k := range texts {
		fmt.Fprintf(w, "Besides the answers, %d× %q\n", k, t)
	}
	if len(texts) > 0 {
		fmt.Fprintln(w)
	}

	fmt.Fprintln(w, "| replicas | run | replica | messages sent | updates accepted | CPU | CPU per message | peak RSS | its PostgreSQL backends' CPU | busy backends, mean (waiting for a lock) |")
	fmt.Fprintln(w, "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		for _, s := range r.b.perReplica {
			peak := fmt.Sprintf("%.1f MB", float64(s.peakKB)/1024)
			if s.peakAll {
				peak += " (since start)"
			}
			per := "–"
			if s.answers > 0 {
				per = report.MS(s.cpu / time.Duration(s.answers))
			}
			fmt.Fprintf(w, "| %d | %d | %s | %d | %d | %s | %s | %s | %s | %.1f (%.1f) |\n",
				r.replicas, r.run, s.id, s.answers, s.accepted, report.Secs(s.cpu), per, peak, report.Secs(s.pgCPU), s.active, s.lockWait)
		}
	}
	fmt.Fprintln(w)

	if o.runs > 1 {
		fmt.Fprintln(w, "| replicas | runs | wall, median (min–max) | answers/s, median |")
		fmt.Fprintln(w, "|---:|---:|---:|---:|")
		for _, n := range o.replicas {
			var walls []time.Duration
			for _, r := range results {
				if r.replicas == n {
					walls = append(walls, r.b.wall)
				}
			}
			slices.Sort(walls)
			med := walls[len(walls)/2]
			if len(walls)%2 == 0 {
				med = (walls[len(walls)/2-1] + walls[len(walls)/2]) / 2
			}
			fmt.Fprintf(w, "| %d | %d | %s (%s–%s) | %.0f |\n", n, len(walls), report.Secs(med), report.Secs(walls[0]), report.Secs(walls[len(walls)-1]),
				float64(o.chats)/med.Seconds())
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "Messages sent: the replica's switchboard_messages_sent_total{channel=\"telegram\"} (/metrics) over the burst; updates accepted: POSTs it answered 200 via the balancer. "+
		"CPU: utime+stime from /proc/PID/stat over the burst; PostgreSQL CPU: the replicas' backends (by application_name), and in brackets all postgres processes on the machine, whoever they serve, less those that exited; busy backends: pg_stat_activity sampled every 100 ms. "+
		"Row writes and scans: pg_stat_user_tables of the schema, from just before the burst to after the replicas stopped; ids lost: MAX(id) - COUNT(*) of the table, over the same span (a serialization failure retried after its INSERT loses one).")
}

// gaps lists the tables with ids consumed by rolled-back inserts.
func gaps(st tableStats) string {
	var parts []string
	for _, t := range gapTables {
		if g := st.gaps[t]; g != 0 {
			parts = append(parts, fmt.Sprintf("%s %d", t, g))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
