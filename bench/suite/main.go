// Command suite is the reproducible benchmark of Switchboard as a process:
// it builds the real binary (go build -trimpath -tags goolm), runs `serve` against local
// fakes of the Telegram Bot API, Discord and an OpenAI-compatible model
// with a configurable latency, and prints a Markdown table with the targets:
//
//	go run ./bench/suite
//
// Rows: process start to ready; idle memory (RSS, RssAnon, PSS) of the
// binary as built and as deployed; per-message gateway overhead p50/p99;
// wall time and throughput of N chats at once with a fixed model latency;
// peak RSS under that load; prompt tokens at the last turn of a long
// conversation against the naive full-history request; memory after a
// long conversation and 30 s later. The README's
// "Benchmarks" section explains each row. Progress goes to stderr, the
// table to stdout. It needs Linux (/proc) and the Go toolchain.
package main

import (
	"context"
	"flag"
	"fmt"
	breport "github.com/switchboard-gateway/switchboard/bench/internal/report"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-gateway/switchboard/bench/internal/gateway"
)

// Targets of issue 10 and bench/serve.
const (
	targetReady     = 150 * time.Millisecond // bench/serve
	targetIdleMB    = 20.0                   // bench/serve
	targetP99       = 10 * time.Millisecond
	targetBurstWall = 2500 * time.Millisecond // for targetBurstChats at once
	targetBurstChat = 1000
	targetPeakMB    = 150.0
	targetTokens    = 0.40
	targetPSSMB     = 24.0 // idle, as deployed (issue 22)
	targetAnonMB    = 5.0  // RssAnon settleAfter a conversation, above idle (issue 22)
)

type options struct {
	starts   int
	warm     int
	messages int
	chats    []int
	repeat   int
	latency  time.Duration
	turns    int
	window   int
	memTurns int
	memOnly  bool
	keep     bool
	verbose  bool
}

func main() {
	var o options
	var chats string
	flag.IntVar(&o.starts, "starts", 5, "process starts measured for row 1")
	flag.IntVar(&o.warm, "warm", 20, "messages sent before row 3's measured ones")
	flag.IntVar(&o.messages, "messages", 300, "messages measured for row 3")
	flag.StringVar(&chats, "chats", "1,100,1000", "comma-separated numbers of chats sending at once (rows 4, 5)")
	flag.IntVar(&o.repeat, "repeat", 3, "runs of each burst (rows 4 and 5 show the median and the range)")
	flag.DurationVar(&o.latency, "latency", time.Second, "model latency for rows 4 and 5")
	flag.IntVar(&o.turns, "turns", 100, "turns of the conversation of row 6")
	flag.IntVar(&o.window, "context-window", 8192, "llm.context_window of every run but row 7's")
	flag.IntVar(&o.memTurns, "memory-turns", 1000, "turns of the conversation of row 7")
	flag.BoolVar(&o.memOnly, "memory-only", false, "measure rows 2 and 7 only")
	flag.BoolVar(&o.keep, "keep", false, "keep each run's directory (config, database, serve.log)")
	flag.BoolVar(&o.verbose, "v", false, "print the timeline of each burst to stderr")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the suite itself (the fakes) to this file")
	flag.Parse()
	for _, f := range strings.Split(chats, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "suite: -chats: %q is not a positive number\n", f)
			os.Exit(2)
		}
		o.chats = append(o.chats, n)
	}
	if o.starts < 1 || o.messages < 1 || o.turns < 1 || o.repeat < 1 || o.memTurns < 1 {
		fmt.Fprintln(os.Stderr, "suite: -starts, -messages, -turns, -repeat and -memory-turns must be at least 1")
		os.Exit(2)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "suite: -cpuprofile: %v\n", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	// The fakes run in this process, on the machine's cores, and their
	// work is in every measured time; at Go's default target their
	// collections came every few messages of row 3, as often as the heap's
	// 4 MB minimum allowed.
	debug.SetGCPercent(400)
	if err := run(o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "suite: %v\n", err)
		os.Exit(1)
	}
}

func run(o options, out, progress io.Writer) error {
	root, err := os.MkdirTemp("", "switchboard-bench-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintf(progress, "runs kept in %s\n", root)
	} else {
		defer os.RemoveAll(root)
	}
	fmt.Fprintln(progress, "building switchboard (go build -trimpath -tags goolm)…")
	bin, err := gateway.Build(root)
	if err != nil {
		return err
	}
	s := settings{ContextWindow: o.window, MaxConcurrentTurns: 1000, Users: 1}
	for _, n := range o.chats {
		s.Users = max(s.Users, n)
	}
	s.MaxConcurrentTurns = max(s.MaxConcurrentTurns, s.Users)
	rep := report{opts: o, settings: s, date: time.Now(), machine: breport.Machine(), load: breport.LoadAverage()}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	if o.memOnly {
		if err := measureMemories(ctx, bin, root, s, o, &rep, progress); err != nil {
			return err
		}
		rep.write(out)
		return nil
	}
	fmt.Fprintf(progress, "row 1: %d starts…\n", o.starts)
	st, r, err := measureStartup(ctx, bin, root, s, o.starts)
	if err != nil {
		return fmt.Errorf("start-up: %w", err)
	}
	rep.startup = st
	fmt.Fprintf(progress, "row 3: %d messages one after another…\n", o.warm+o.messages)
	rep.overhead, err = measureOverhead(ctx, r, o.warm, o.messages)
	if err != nil {
		r.kill()
		return fmt.Errorf("overhead: %w", err)
	}
	if err := r.stop(); err != nil {
		return err
	}
	for _, n := range o.chats {
		fmt.Fprintf(progress, "rows 4-5: %d chats at once, model latency %s, %d runs…\n", n, o.latency, o.repeat)
		var runs []burstResult
		for range o.repeat {
			b, err := measureBurst(ctx, bin, root, s, n, o.latency)
			if err != nil {
				return fmt.Errorf("burst: %w", err)
			}
			runs = append(runs, b)
			if o.verbose {
				fmt.Fprintf(progress, "  wall %s, peak %.1f MB; gateway CPU %s; pushed in %s; model requests arrived (k-th: time) %s; replies %s\n",
					breport.Secs(b.wall), mb(b.peakKB), breport.MS(b.cpu), breport.MS(b.pushed), breport.Timeline(b.modelAt), breport.Timeline(b.replies))
			}
		}
		rep.bursts = append(rep.bursts, medianRun(runs))
	}
	fmt.Fprintf(progress, "row 6: a conversation of %d turns…\n", o.turns)
	rep.tokens, err = measureTokens(ctx, bin, root, s, o.turns)
	if err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	if err := measureMemories(ctx, bin, root, s, o, &rep, progress); err != nil {
		return err
	}
	rep.load += " (start), " + breport.LoadAverage() + " (end)"
	rep.write(out)
	return nil
}

// measureMemories is rows 2 and 7: the binary as built, then as deployed.
func measureMemories(ctx context.Context, bin, root string, s settings, o options, rep *report, progress io.Writer) error {
	for _, deployed := range []bool{false, true} {
		fmt.Fprintf(progress, "rows 2, 7: memory %s: idle, a conversation of %d turns, %s later…\n",
			memoryResult{deployed: deployed}.how(), o.memTurns, breport.Secs(settleAfter))
		m, err := measureMemory(ctx, bin, root, s, o.memTurns, deployed)
		if err != nil {
			return fmt.Errorf("memory %s: %w", m.how(), err)
		}
		rep.memory = append(rep.memory, m)
	}
	return nil
}
