// Command soak runs `switchboard serve` as deployed under steady traffic
// for a given time and prints how its memory moves: N Telegram chats (the
// local fake, internal/tgfake, with Telegram's limits) each send one
// message every interval to the shipped defaults, the fake model answering
// each turn (bench/internal/convo). Every -sample it reads the process's
// RSS and PSS from /proc/PID/smaps_rollup and RssAnon from /proc/PID/status;
// at the end it prints the RssAnon slope after -after (least squares, MB/h),
// the peak RSS (VmHWM) and the memory a few seconds after the traffic stops.
//
//	go run ./bench/soak                                  # 20 chats × 1 message / 2 s for 60 min
//	go run ./bench/soak -duration 12m -after 2m          # a short check of the tool
//	go run ./bench/soak -bin /tmp/main/switchboard -csv soak.csv
//
// The binary is built with go build -trimpath -tags goolm (the Dockerfile's)
// unless -bin names one, then deployed (gateway.Deploy: copied, synced,
// dropped from the page cache). It needs Linux (/proc) and, without -bin,
// the Go toolchain.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-gateway/switchboard/bench/internal/convo"
	"github.com/switchboard-gateway/switchboard/bench/internal/gateway"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

const tgToken = "7300000001:AAF-bench-Secret_0123456789abcdef"

// options are the flags.
type options struct {
	bin      string
	chats    int
	interval time.Duration
	duration time.Duration
	sample   time.Duration
	after    time.Duration
	delay    time.Duration
	csv      string
	keep     bool
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "", "the switchboard binary (empty: build this module's with go build -trimpath -tags goolm)")
	flag.IntVar(&o.chats, "chats", 20, "Telegram chats, each its own user")
	flag.DurationVar(&o.interval, "interval", 2*time.Second, "each chat sends one message every interval (the chats staggered)")
	flag.DurationVar(&o.duration, "duration", 60*time.Minute, "how long the traffic runs")
	flag.DurationVar(&o.sample, "sample", 10*time.Second, "how often the memory is read")
	flag.DurationVar(&o.after, "after", 10*time.Minute, "the slope is fitted to the samples from this time on")
	flag.DurationVar(&o.delay, "delay", 50*time.Millisecond, "the fake model's time to answer")
	flag.StringVar(&o.csv, "csv", "", "also write every sample to this CSV file")
	flag.BoolVar(&o.keep, "keep", false, "keep the run's directory (config, database, serve.log)")
	flag.Parse()
	if o.chats < 1 || o.interval <= 0 || o.duration <= 0 || o.sample <= 0 || o.after < 0 || o.after >= o.duration {
		fmt.Fprintln(os.Stderr, "soak: -chats must be at least 1, -interval, -duration and -sample positive, and -after within -duration")
		os.Exit(2)
	}
	if err := run(context.Background(), o, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		os.Exit(1)
	}
}

// sample is the memory at one time, in kB.
type sample struct {
	at  time.Duration // since the traffic started
	mem gateway.Memory
}

func run(ctx context.Context, o options, out io.Writer) error {
	root, err := os.MkdirTemp("", "switchboard-soak-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintf(out, "run directory: %s\n", root)
	} else {
		defer os.RemoveAll(root)
	}
	bin := o.bin
	if bin == "" {
		fmt.Fprintln(out, "building switchboard (go build -trimpath -tags goolm)…")
		if bin, err = gateway.Build(root); err != nil {
			return err
		}
	}
	deployDir := filepath.Join(root, "deploy")
	if err := os.Mkdir(deployDir, 0o755); err != nil {
		return err
	}
	if bin, err = gateway.Deploy(bin, deployDir); err != nil {
		return err
	}

	model := testkit.Start("127.0.0.1:0")
	defer model.Close()
	model.DiscardRequests() // an hour of requests would be gigabytes here
	model.SetDefault(&testkit.Reply{Func: func(rec testkit.Recorded) testkit.Reply {
		r := convo.Answer(convo.Classify(rec))
		r.Delay = o.delay
		return r
	}})
	tg := tgfake.Start(tgToken)
	defer tg.Close()

	cfg := gateway.Shipped(o.chats, root, model.URL, tgToken, tg.URL)
	path := filepath.Join(root, "config.yaml")
	if err := cfgfile.WriteFile(path, cfg); err != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	proc, err := gateway.Start(startCtx, bin, root, path)
	cancel()
	if err != nil {
		return err
	}
	defer proc.Kill()
	if err := waitCtx(ctx, 10*time.Second, func(c context.Context) error { return tg.WaitCalls(c, "getUpdates", 1) }); err != nil {
		return fmt.Errorf("no long poll: %w", err)
	}
	fmt.Fprintf(out, "serve pid %d ready in %s; %d chats × 1 message / %s for %s, memory every %s\n",
		proc.Pid(), proc.Ready.Round(time.Millisecond), o.chats, o.interval, o.duration, o.sample)

	var csv *os.File
	if o.csv != "" {
		if csv, err = os.Create(o.csv); err != nil {
			return err
		}
		defer csv.Close()
		fmt.Fprintln(csv, "seconds,rss_kb,rss_anon_kb,pss_kb,sent,replies")
	}

	// The traffic: chat i sends at i·interval/chats past each interval.
	var sent atomic.Int64
	start := time.Now()
	trafficCtx, stopTraffic := context.WithTimeout(ctx, o.duration)
	defer stopTraffic()
	var wg sync.WaitGroup
	for i := range o.chats {
		id := int64(i + 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			offset := time.Duration(i) * o.interval / time.Duration(o.chats)
			for n := 1; ; n++ {
				next := start.Add(offset + time.Duration(n-1)*o.interval)
				t := time.NewTimer(time.Until(next))
				select {
				case <-trafficCtx.Done():
					t.Stop()
					return
				case <-t.C:
				}
				tg.PushText(id, id, "soak"+strconv.FormatInt(id, 10), convo.UserText(n))
				sent.Add(1)
			}
		}()
	}

	var samples []sample
	read := func() error {
		m, err := proc.Memory()
		if err != nil {
			return err
		}
		s := sample{at: time.Since(start), mem: m}
		samples = append(samples, s)
		replies := tg.Calls("sendMessage")
		fmt.Fprintf(out, "%7.1f min  RSS %6.1f MB  RssAnon %6.1f MB  PSS %6.1f MB  sent %6d  replies %6d\n",
			s.at.Minutes(), mb(m.RSS), mb(m.Anon), mb(m.PSS), sent.Load(), replies)
		if csv != nil {
			fmt.Fprintf(csv, "%.1f,%d,%d,%d,%d,%d\n", s.at.Seconds(), m.RSS, m.Anon, m.PSS, sent.Load(), replies)
		}
		return nil
	}
	tick := time.NewTicker(o.sample)
	for done := false; !done; {
		select {
		case <-trafficCtx.Done():
			done = true
		case <-tick.C:
			if err := read(); err != nil {
				tick.Stop()
				return err
			}
		}
	}
	tick.Stop()
	wg.Wait()
	total := sent.Load()
	// Every message answered: a reply each (sendMessage; a longer answer
	// would be split, these are not).
	replyErr := waitCtx(ctx, 2*time.Minute, func(c context.Context) error { return tg.WaitCalls(c, "sendMessage", int(total)) })
	peak, err := proc.StatusKB("VmHWM")
	if err != nil {
		return err
	}
	last := samples[len(samples)-1]
	// After the traffic: the memory once the gateway has been quiet a while.
	quietAt := time.Now()
	if err := waitfor.Sleep(ctx, 10*time.Second); err != nil {
		return err
	}
	quiet, err := proc.Memory()
	if err != nil {
		return err
	}
	if err := proc.Stop(); err != nil {
		return err
	}

	slope, n := slopeAfter(samples, o.after)
	fmt.Fprintf(out, "\nmessages sent %d, replies %d (%s)\n", total, tg.Calls("sendMessage"), replyState(replyErr))
	if first := firstAfter(samples, o.after); first != nil {
		fmt.Fprintf(out, "RssAnon at %s: %.1f MB; at the end (%s): %.1f MB\n", first.at.Round(time.Second), mb(first.mem.Anon), last.at.Round(time.Second), mb(last.mem.Anon))
	}
	fmt.Fprintf(out, "RssAnon slope after %s: %+.2f MB/h (%d samples)\n", o.after, slope, n)
	fmt.Fprintf(out, "peak RSS (VmHWM): %.1f MB\n", mb(peak))
	fmt.Fprintf(out, "%s after the traffic: RSS %.1f MB, RssAnon %.1f MB, PSS %.1f MB\n",
		time.Since(quietAt).Round(time.Second), mb(quiet.RSS), mb(quiet.Anon), mb(quiet.PSS))
	return replyErr
}

func replyState(err error) string {
	if err != nil {
		return "NOT all answered: " + err.Error()
	}
	return "all answered"
}

func waitCtx(ctx context.Context, d time.Duration, f func(context.Context) error) error {
	c, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return f(c)
}

func mb(kb int) float64 { return float64(kb) / 1024 }

func firstAfter(s []sample, after time.Duration) *sample {
	for i := range s {
		if s[i].at >= after {
			return &s[i]
		}
	}
	return nil
}

// slopeAfter fits RssAnon = a + b·t by least squares to the samples at or
// after after and returns b in MB per hour, with the number of samples.
func slopeAfter(s []sample, after time.Duration) (float64, int) {
	var n, sx, sy, sxx, sxy float64
	for _, p := range s {
		if p.at < after {
			continue
		}
		x, y := p.at.Hours(), mb(p.mem.Anon)
		n++
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	d := n*sxx - sx*sx
	if n < 2 || d == 0 {
		return 0, int(n)
	}
	return (n*sxy - sx*sy) / d, int(n)
}
