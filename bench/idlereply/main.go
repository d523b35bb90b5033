// Command idlereply measures what an idle gateway costs and what its idle
// time costs the next user: `switchboard serve` as deployed (the binary
// copied, synced and dropped from the page cache, see gateway.Deploy), with
// the shipped defaults against the local Telegram fake and the fake model
// (answering at once), reads its memory (RSS, RssAnon, PSS) -idle after
// ready; then sends -warm messages one after another (the first is the
// first reply the process ever makes), waits -idle again, and times the
// first reply after that idle time against the warm ones' median; -cycles
// times, each idle time followed by the timed reply and five warm ones.
//
//	go run ./bench/idlereply                             # builds the binary (go build -trimpath -tags goolm)
//	go run ./bench/idlereply -bin /tmp/main/switchboard -runs 3
//
// Each run is a fresh process and database. Telegram's outbound pacing is
// off and the fake has no limits: one chat answered back to back is timed,
// not Telegram's per-chat limit. It needs Linux (/proc) and, without -bin,
// the Go toolchain.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/switchboard-gateway/switchboard/bench/internal/convo"
	"github.com/switchboard-gateway/switchboard/bench/internal/gateway"
	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

const tgToken = "7300000001:AAF-bench-Secret_0123456789abcdef"

func main() {
	bin := flag.String("bin", "", "the switchboard binary (empty: build this module's with go build -trimpath -tags goolm)")
	idle := flag.Duration("idle", 60*time.Second, "the idle time: after ready, and before the measured reply")
	warm := flag.Int("warm", 20, "messages sent one after another before the idle time")
	runs := flag.Int("runs", 3, "runs, each a fresh process")
	cycles := flag.Int("cycles", 3, "idle times in each run, each followed by the timed reply and 5 warm ones")
	flag.Parse()
	if *warm < 3 || *runs < 1 || *cycles < 1 || *idle <= 0 {
		fmt.Fprintln(os.Stderr, "idlereply: -warm must be at least 3, -runs and -cycles at least 1, -idle positive")
		os.Exit(2)
	}
	if err := run(context.Background(), *bin, *idle, *warm, *cycles, *runs, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "idlereply: %v\n", err)
		os.Exit(1)
	}
}

// result is one run.
type result struct {
	idle      gateway.Memory // idle after ready, nothing sent yet
	first     time.Duration  // the first reply the process made
	warm      time.Duration  // the median of the warm replies (all but the first)
	afterIdle time.Duration  // the median of the first replies after each idle time
	idleAgain gateway.Memory // before the first of them
}

func run(ctx context.Context, bin string, idle time.Duration, warm, cycles, runs int, out io.Writer) error {
	root, err := os.MkdirTemp("", "switchboard-idlereply-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	if bin == "" {
		fmt.Fprintln(out, "building switchboard (go build -trimpath -tags goolm)…")
		if bin, err = gateway.Build(root); err != nil {
			return err
		}
	}
	var all []result
	for i := range runs {
		res, err := once(ctx, bin, root, idle, warm, cycles)
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		all = append(all, res)
		fmt.Fprintf(out, "run %d: idle %s after ready: RSS %.1f / RssAnon %.1f / PSS %.1f MB; first reply ever %s, warm median %s; "+
			"after %s idle: PSS %.1f MB, first reply (median of the idle times) %s (%+.1f ms against warm)\n",
			i+1, idle, mb(res.idle.RSS), mb(res.idle.Anon), mb(res.idle.PSS), ms(res.first), ms(res.warm),
			idle, mb(res.idleAgain.PSS), ms(res.afterIdle), float64(res.afterIdle-res.warm)/1e6)
	}
	med := func(f func(result) float64) float64 {
		v := make([]float64, len(all))
		for i, r := range all {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	fmt.Fprintf(out, "\nmedian of %d runs: idle %s after ready RSS %.1f / RssAnon %.1f / PSS %.1f MB; warm reply %.1f ms; "+
		"first reply after %s idle %.1f ms (%+.1f ms against warm); first reply ever %.1f ms\n",
		runs, idle, med(func(r result) float64 { return mb(r.idle.RSS) }), med(func(r result) float64 { return mb(r.idle.Anon) }),
		med(func(r result) float64 { return mb(r.idle.PSS) }), med(func(r result) float64 { return msf(r.warm) }),
		idle, med(func(r result) float64 { return msf(r.afterIdle) }), med(func(r result) float64 { return msf(r.afterIdle - r.warm) }),
		med(func(r result) float64 { return msf(r.first) }))
	return nil
}

// once runs one fresh process through the idle, warm, idle, reply phases.
func once(ctx context.Context, bin, root string, idle time.Duration, warm, cycles int) (result, error) {
	var res result
	dir, err := os.MkdirTemp(root, "run-")
	if err != nil {
		return res, err
	}
	deployed, err := gateway.Deploy(bin, dir)
	if err != nil {
		return res, err
	}
	model := testkit.Start("127.0.0.1:0")
	defer model.Close()
	model.DiscardRequests()
	model.SetDefault(&testkit.Reply{Func: func(rec testkit.Recorded) testkit.Reply { return convo.Answer(convo.Classify(rec)) }})
	tg := tgfake.Start(tgToken)
	defer tg.Close()
	tg.SetLimits(tgfake.NoLimits)
	cfg := gateway.Shipped(1, dir, model.URL, tgToken, tg.URL)
	config.Section[*telegram.Config](cfg).Pacing = false
	path := filepath.Join(dir, "config.yaml")
	if err := cfgfile.WriteFile(path, cfg); err != nil {
		return res, err
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	proc, err := gateway.Start(startCtx, deployed, dir, path)
	cancel()
	if err != nil {
		return res, err
	}
	defer proc.Kill()
	if err := waitfor.Sleep(ctx, idle); err != nil {
		return res, err
	}
	if res.idle, err = proc.Memory(); err != nil {
		return res, err
	}
	n := 0
	say := func() (time.Duration, error) {
		n++
		start := time.Now()
		tg.PushText(1, 1, "alice", convo.UserText(n))
		c, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := tg.WaitCalls(c, "sendMessage", n); err != nil {
			return 0, fmt.Errorf("turn %d: %w", n, err)
		}
		return time.Since(start), nil
	}
	var times []time.Duration
	for range warm {
		d, err := say()
		if err != nil {
			return res, err
		}
		times = append(times, d)
	}
	res.first = times[0]
	warmTimes := slices.Clone(times[1:])
	var after []time.Duration
	for c := range cycles {
		if err := waitfor.Sleep(ctx, idle); err != nil {
			return res, err
		}
		if c == 0 {
			if res.idleAgain, err = proc.Memory(); err != nil {
				return res, err
			}
		}
		d, err := say()
		if err != nil {
			return res, err
		}
		after = append(after, d)
		// A few warm ones after it, so that the warm median is of the
		// same minutes of a shared machine as the replies after idle.
		for range 5 {
			d, err := say()
			if err != nil {
				return res, err
			}
			warmTimes = append(warmTimes, d)
		}
	}
	res.warm, res.afterIdle = median(warmTimes), median(after)
	return res, proc.Stop()
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func mb(kb int) float64 { return float64(kb) / 1024 }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", msf(d)) }

func msf(d time.Duration) float64 { return float64(d) / 1e6 }
