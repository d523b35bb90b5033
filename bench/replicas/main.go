// Command replicas benchmarks Switchboard as several replicas on one
// PostgreSQL store: N chats each send one message at once, the model takes
// a fixed latency per request, and the wall time until every chat has its
// answer is measured with 1 replica and with 3:
//
//	go run ./bench/replicas -pg 'postgres://postgres@127.0.0.1:54329/postgres?sslmode=disable'
//
// (or SWITCHBOARD_TEST_PG_DSN instead of -pg). For each replica count it
// creates a fresh schema on the server, builds the real binary once (go
// build -trimpath -tags goolm), starts that many `switchboard serve`
// processes on the schema with Telegram in webhook mode (distinct
// cluster.replica_id and webhook ports) behind a round-robin HTTPS load
// balancer that retries another replica on an error, and the fake Bot API
// and model in this process. A warm-up burst (other chats) is sent and not
// counted; then the measured burst: one update per chat, all posted at once,
// as Telegram delivers a backlog. Measured: wall time from the first post to
// the last answer, throughput, each replica's CPU time (/proc/PID/stat),
// peak RSS (VmHWM, reset before the burst), answers (its /metrics, labelled
// with the replica) and updates accepted, and the CPU of PostgreSQL.
// Progress goes to stderr, the Markdown tables to stdout. Schemas and
// processes are removed at the end, also after Ctrl-C. Linux only (/proc);
// 127.0.0.1 only.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"github.com/switchboard-gateway/switchboard/bench/internal/report"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/switchboard-gateway/switchboard/bench/internal/gateway"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

type options struct {
	dsn      string
	replicas []int
	runs     int
	chats    int
	warmup   int
	latency  time.Duration
	maxTurns int
	leaseTTL time.Duration
	poll     time.Duration
	timeout  time.Duration
	settle   time.Duration
	keep     bool
	verbose  bool
}

func main() {
	var o options
	var replicas string
	flag.StringVar(&o.dsn, "pg", "", "PostgreSQL server DSN (schemas are created and dropped there); empty: $"+testkit.PostgresEnv)
	flag.StringVar(&replicas, "replicas", "1,3", "comma-separated replica counts to measure")
	flag.IntVar(&o.runs, "runs", 1, "measured bursts per replica count, each on a fresh schema and fresh processes")
	flag.IntVar(&o.chats, "chats", 1000, "chats sending one message each, at once")
	flag.IntVar(&o.warmup, "warmup", -1, "chats of the uncounted warm-up burst before each measured one (-1: as many as -chats)")
	flag.DurationVar(&o.latency, "latency", time.Second, "the fake model's latency per request")
	flag.IntVar(&o.maxTurns, "max-turns", 1000, "agent.max_concurrent_turns of each replica")
	flag.DurationVar(&o.leaseTTL, "lease-ttl", 15*time.Second, "cluster.lease_ttl")
	flag.DurationVar(&o.poll, "poll", 250*time.Millisecond, "cluster.poll_interval")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "limit of one burst")
	flag.DurationVar(&o.settle, "settle", 11*time.Second, "pause between the warm-up and the measured burst")
	flag.BoolVar(&o.keep, "keep", false, "keep the run directories (configs, serve.log of each replica)")
	flag.BoolVar(&o.verbose, "v", false, "print each burst's timeline to stderr")
	flag.Parse()
	for _, f := range strings.Split(replicas, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "replicas: -replicas: %q is not a positive number\n", f)
			os.Exit(2)
		}
		o.replicas = append(o.replicas, n)
	}
	if o.warmup < 0 {
		o.warmup = o.chats
	}
	if o.chats < 1 || o.runs < 1 || o.maxTurns < 1 {
		fmt.Fprintln(os.Stderr, "replicas: -chats, -runs and -max-turns must be at least 1")
		os.Exit(2)
	}
	if o.dsn == "" {
		o.dsn = os.Getenv(testkit.PostgresEnv)
	}
	if o.dsn == "" {
		fmt.Fprintf(os.Stderr, "replicas: no PostgreSQL server: pass -pg 'postgres://user@127.0.0.1:5432/db?sslmode=disable' or set %s\n", testkit.PostgresEnv)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var cl cleanups
	err := run(ctx, o, &cl, os.Stdout, os.Stderr)
	interrupted := ctx.Err() != nil
	stop() // a second Ctrl-C during the clean-up ends the program at once
	if interrupted {
		fmt.Fprintln(os.Stderr, "interrupted: stopping the replicas and dropping the schemas…")
	}
	cl.run()
	if err != nil {
		fmt.Fprintf(os.Stderr, "replicas: %v\n", err)
		os.Exit(1)
	}
}

// result is one measured burst of one scenario.
type result struct {
	replicas, run int
	b             burst
}

func run(ctx context.Context, o options, cl *cleanups, out, progress io.Writer) error {
	admin, err := sql.Open("pgx", o.dsn)
	if err != nil {
		return err
	}
	cl.add(func() { admin.Close() })
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = admin.PingContext(pctx)
	cancel()
	if err != nil {
		return fmt.Errorf("PostgreSQL: %w", err)
	}
	var pgVersion string
	_ = admin.QueryRowContext(ctx, "SHOW server_version").Scan(&pgVersion)
	var maxConns int
	_ = admin.QueryRowContext(ctx, "SELECT setting::int FROM pg_settings WHERE name = 'max_connections'").Scan(&maxConns)
	for _, n := range o.replicas {
		if need := n*16 + 10; maxConns > 0 && need > maxConns {
			return fmt.Errorf("%d replicas may open %d connections (16 each): the server allows %d", n, n*16, maxConns)
		}
	}

	root, err := os.MkdirTemp("", "switchboard-replicas-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintf(progress, "runs kept in %s\n", root)
	} else {
		cl.add(func() { os.RemoveAll(root) })
	}
	fmt.Fprintln(progress, "building switchboard (go build -trimpath -tags goolm)…")
	bin, err := gateway.Build(root)
	if err != nil {
		return err
	}
	load0 := report.LoadAverage()
	var results []result
	for _, n := range o.replicas {
		for k := 1; k <= o.runs; k++ {
			b, err := scenario(ctx, o, bin, filepath.Join(root, fmt.Sprintf("r%d-run%d", n, k)), admin, n, k, progress)
			if err != nil {
				if ctx.Err() != nil {
					return errors.Join(err, ctx.Err())
				}
				return fmt.Errorf("%d replica(s), run %d: %w", n, k, err)
			}
			results = append(results, result{n, k, b})
		}
	}
	writeReport(out, o, results, pgVersion, load0+" (start), "+report.LoadAverage()+" (end)")
	return nil
}

// scenario starts n replicas on a fresh schema, sends the warm-up burst
// and the measured one, and stops everything.
func scenario(ctx context.Context, o options, bin, dir string, admin *sql.DB, n, k int, progress io.Writer) (burst, error) {
	var cl cleanups // this scenario's: processes, fakes, schema
	defer cl.run()
	fmt.Fprintf(progress, "%d replica(s), run %d: starting…\n", n, k)
	c, err := startCluster(ctx, o, bin, dir, admin, n, o.chats+o.warmup, &cl, progress)
	if err != nil {
		return burst{}, err
	}
	client := c.lb.senderClient()
	defer client.CloseIdleConnections()
	if o.warmup > 0 {
		fmt.Fprintf(progress, "  warm-up: %d chats at once (not counted)…\n", o.warmup)
		w, err := runBurst(ctx, c, admin, client, o.chats+1, o.warmup, o.timeout)
		if err != nil {
			return burst{}, fmt.Errorf("warm-up: %w", err)
		}
		fmt.Fprintf(progress, "  warm-up: %s, %d messages besides the answers\n", report.MS(w.wall), len(w.notices))
	}
	// Quiet, so that the warm-up's statistics reach pg_stat_user_tables
	// (an idle backend reports them within 10 s) and the load settles.
	if o.settle > 0 {
		fmt.Fprintf(progress, "  settling for %s…\n", o.settle)
		select {
		case <-ctx.Done():
			return burst{}, ctx.Err()
		case <-time.After(o.settle):
		}
	}
	st0, err := readTableStats(ctx, admin, c.sc)
	if err != nil {
		return burst{}, err
	}
	fmt.Fprintf(progress, "  measured: %d chats at once, model latency %s…\n", o.chats, o.latency)
	b, err := runBurst(ctx, c, admin, client, 1, o.chats, o.timeout)
	if err != nil {
		return b, err
	}
	fmt.Fprintf(progress, "  measured: %s, %.0f answers/s\n", report.MS(b.wall), float64(b.chats)/b.wall.Seconds())
	if o.verbose {
		fmt.Fprintf(progress, "  updates accepted by %s (%d re-posts, %d balancer retries); model requests (k-th: time) %s; answers %s\n",
			report.MS(b.ingested), b.posts, b.lbRetry, report.Timeline(b.modelAt), report.Timeline(b.replies))
	}
	fmt.Fprintf(progress, "  stopping…\n")
	var stopping sync.WaitGroup
	for _, r := range c.replicas {
		stopping.Go(func() {
			if err := r.stop(); err != nil {
				fmt.Fprintf(progress, "stop %s: %v\n", r.id, firstLines(err.Error(), 20))
			}
		})
	}
	stopping.Wait()
	st1, err := readTableStats(ctx, admin, c.sc) // the backends reported them on exit
	if err != nil {
		return b, err
	}
	b.store = st1.minus(st0)
	return b, nil
}
