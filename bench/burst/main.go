// Command burst measures what a burst of Telegram users feels with the
// shipped defaults: it builds the real binary, runs `serve` with
// config.Default() (only the fakes, the database and the allow list
// wired), and has N private chats each send one message at the same moment
// to the Telegram fake (internal/tgfake, with whatever limits it enforces)
// while the fake model takes a fixed latency per request:
//
//	go run ./bench/burst [-users 50] [-latency 2s] [-runs 3]
//
// Three phases, each a fresh process per run:
//   - burst: the model answers all at once after -latency; the figures
//     are the time until every user has their answer (the wall), and each
//     user's time to their answer, median and max;
//   - stream: the model's first token comes after -latency and the rest
//     streams over -stream (fragments -gap apart); the figure is the time
//     from a user's first token to the first text they see in Telegram (a
//     draft, a preview, or the reply itself when nothing previews), for
//     the N users at once (the outbound pacing shares the bot's 30
//     messages a second among them) and for one user alone.
//
// A user's answer is visible when the fake took a sendMessage or
// editMessageText (or a sendMessageDraft) for their chat carrying it; the
// recorder in front of the fake timestamps each call as it is answered,
// and counts the calls the fake refused with 429. Progress goes to stderr,
// the Markdown table to stdout. It needs Linux (/proc) and the Go
// toolchain.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-gateway/switchboard/bench/internal/gateway"
	breport "github.com/switchboard-gateway/switchboard/bench/internal/report"
)

// Targets of issue 21.
const (
	targetWall      = 3 * time.Second        // 50 users, 2 s model, pacing included
	targetFirstText = 300 * time.Millisecond // first token → first visible text, plus the pacing in force
)

type options struct {
	users   int
	latency time.Duration
	stream  time.Duration
	gap     time.Duration
	runs    int
	verbose bool
}

func main() {
	var o options
	flag.IntVar(&o.users, "users", 50, "private chats sending one message each at the same moment")
	flag.DurationVar(&o.latency, "latency", 2*time.Second, "the model's time to its first token")
	flag.DurationVar(&o.stream, "stream", 2*time.Second, "stream phase: how long the rest of an answer streams")
	flag.DurationVar(&o.gap, "gap", 50*time.Millisecond, "stream phase: time between two fragments of an answer")
	flag.IntVar(&o.runs, "runs", 3, "runs of each phase (the table shows the run of median wall time)")
	flag.BoolVar(&o.verbose, "v", false, "print every run to stderr")
	flag.Parse()
	if o.users < 1 || o.runs < 1 || o.gap <= 0 {
		fmt.Fprintln(os.Stderr, "burst: -users and -runs must be at least 1, -gap positive")
		os.Exit(2)
	}
	if err := run(o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "burst: %v\n", err)
		os.Exit(1)
	}
}

func run(o options, out, progress io.Writer) error {
	root, err := os.MkdirTemp("", "switchboard-burst-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	fmt.Fprintln(progress, "building switchboard (go build -trimpath -tags goolm)…")
	bin, err := gateway.Build(root)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	load := breport.LoadAverage()
	fragments := max(int(o.stream/o.gap), 1)
	phases := []struct {
		name  string
		users int
		m     *model
	}{
		{"burst", o.users, &model{first: o.latency}},
		{"stream", o.users, &model{first: o.latency, gap: o.gap, tail: tail(fragments)}},
		{"stream, one user", 1, &model{first: o.latency, gap: o.gap, tail: tail(fragments)}},
	}
	var results []burstResult
	for _, ph := range phases {
		fmt.Fprintf(progress, "%s: %d users at once, first token after %s, %d runs…\n", ph.name, ph.users, o.latency, o.runs)
		var runs []burstResult
		for range o.runs {
			b, err := measureBurst(ctx, bin, root, ph.users, ph.m)
			if err != nil {
				return fmt.Errorf("%s: %w", ph.name, err)
			}
			if o.verbose {
				fmt.Fprintf(progress, "  wall %s; CPU %s; answered %s; first text %s; 429s %d; calls %v\n", breport.Secs(b.wall), breport.MS(b.cpu),
					breport.Timeline(b.answered), breport.Timeline(b.firstText), b.tooMany, b.calls)
			}
			runs = append(runs, b)
		}
		slices.SortFunc(runs, func(a, b burstResult) int { return cmp.Compare(a.wall, b.wall) })
		results = append(results, runs[len(runs)/2])
	}
	write(out, o, results, load)
	return nil
}

// tail is what follows "You said: …" in a streamed answer: n fragments of
// one short word each (the fake splits text at spaces).
func tail(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, " w%d", i)
	}
	return b.String()
}

func write(out io.Writer, o options, results []burstResult, load string) {
	burst, stream, alone := results[0], results[1], results[2]
	fmt.Fprintf(out, "Switchboard burst benchmark, %s; %s; load average %s (start), %s (end)\n\n",
		time.Now().UTC().Format("2006-01-02"), breport.Machine(), load, breport.LoadAverage())
	fmt.Fprintf(out, "Shipped defaults; %d Telegram users each send one message at the same moment; the model's first token after %s. The run of median wall time of %d.\n\n",
		o.users, o.latency, o.runs)
	fmt.Fprintln(out, "| what | result | target |")
	fmt.Fprintln(out, "| --- | --- | --- |")
	mark := func(ok bool) string {
		if ok {
			return " ✓"
		}
		return " ✗"
	}
	fmt.Fprintf(out, "| all %d answered (model answers at once) | %s | ≤ %s%s |\n", o.users, breport.Secs(burst.wall), breport.Secs(targetWall), mark(burst.wall <= targetWall))
	fmt.Fprintf(out, "| a user's time to their answer, median / max | %s / %s | |\n",
		breport.Secs(median(burst.answered)), breport.Secs(burst.answered[len(burst.answered)-1]))
	fmt.Fprintf(out, "| answers refused by Telegram (429) | %d | 0%s |\n", burst.tooMany, mark(burst.tooMany == 0))
	fmt.Fprintf(out, "| gateway CPU time during the burst | %s (%.0f %% of one core over the wall) | |\n", breport.MS(burst.cpu),
		100*burst.cpu.Seconds()/burst.wall.Seconds())
	mem := float64(burst.peakKB-burst.idleKB) / 1024
	fmt.Fprintf(out, "| memory: idle RSS → peak RSS (VmHWM); per user's turn | %.1f MB → %.1f MB; %.2f MB | |\n",
		float64(burst.idleKB)/1024, float64(burst.peakKB)/1024, mem/float64(o.users))
	ft := alone.firstText
	fmt.Fprintf(out, "| one user, streamed answer (%s): first token → first visible text | %s | ≤ %s%s |\n",
		o.stream, breport.MS(ft[0]), breport.MS(targetFirstText), mark(ft[0] <= targetFirstText))
	ft = stream.firstText
	fmt.Fprintf(out, "| %d users, streamed answers: first token → first visible text, median / max | %s / %s | ≤ %s + pacing |\n",
		o.users, breport.MS(median(ft)), breport.MS(ft[len(ft)-1]), breport.MS(targetFirstText))
	fmt.Fprintf(out, "| streamed answers: all %d answered; 429s | %s; %d | |\n", o.users, breport.Secs(stream.wall), stream.tooMany)
	fmt.Fprintf(out, "\nBot API calls during the burst: %s; during the streamed one: %s.\n", calls(burst.calls), calls(stream.calls))
}

func median(ts []time.Duration) time.Duration {
	if len(ts) == 0 {
		return 0
	}
	return ts[len(ts)/2]
}

func calls(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
