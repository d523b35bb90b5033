// Command channelmem measures what enabling a channel costs in memory: the
// idle memory (RSS, RssAnon, PSS) of `switchboard serve` as deployed (the
// binary copied, synced and dropped from the page cache, see
// gateway.Deploy), 10 s after ready, with different sets of channels
// enabled against the local fakes and the fake model:
//
//	go run ./bench/channelmem                      # builds the binary (go build -trimpath -tags goolm)
//	go run ./bench/channelmem -base /tmp/main/switchboard   # and an earlier build with the first set
//
// Each set runs -runs times, the sets taking turns (telegram, telegram+slack,
// telegram, …) so that a drift of the machine touches each alike; -base
// adds a row: the first set on another binary (say, main's, built with go
// build -trimpath), taking its turn with the others. The table gives each
// row's median and range, and its median PSS against the first row's. It
// needs Linux (/proc) and, without -bin, the Go toolchain.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-gateway/switchboard/bench/internal/gateway"
	breport "github.com/switchboard-gateway/switchboard/bench/internal/report"
	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

// settle is how long after ready the memory is read: past the GC pacer's
// quiet time, as bench/suite's row 2.
const settle = 10 * time.Second

func main() {
	bin := flag.String("bin", "", "the switchboard binary to measure (empty: build this module's)")
	sets := flag.String("sets", "telegram,telegram+slack,slack", "comma-separated sets of channels, each channels joined by +: telegram, discord, slack, whatsapp, email, matrix (email: the real servers of .ci/mailservers, named in the environment; matrix: a real dendrite, encryption on, so the binary needs -tags goolm)")
	runs := flag.Int("runs", 5, "runs of each set")
	base := flag.String("base", "", "another binary to measure with the first set, as the first row (say, main's)")
	flag.Parse()
	var list [][]string
	for _, s := range strings.Split(*sets, ",") {
		set := strings.Split(strings.TrimSpace(s), "+")
		for _, ch := range set {
			if !slices.Contains(channelNames, ch) {
				fmt.Fprintf(os.Stderr, "channelmem: -sets: unknown channel %q (known: %s)\n", ch, strings.Join(channelNames, ", "))
				os.Exit(2)
			}
		}
		list = append(list, set)
	}
	if *runs < 1 || len(list) == 0 {
		fmt.Fprintln(os.Stderr, "channelmem: -runs must be at least 1 and -sets name at least one set")
		os.Exit(2)
	}
	if err := run(*bin, *base, list, *runs, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "channelmem: %v\n", err)
		os.Exit(1)
	}
}

// row is a binary and the channels it runs with.
type row struct {
	label, bin string
	set        []string
}

func run(bin, base string, sets [][]string, runs int, out, progress io.Writer) error {
	root, err := os.MkdirTemp("", "switchboard-channelmem-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	if bin == "" {
		fmt.Fprintln(progress, "building switchboard (go build -trimpath -tags goolm)…")
		if bin, err = gateway.Build(root); err != nil {
			return err
		}
	}
	var rows []row
	if base != "" {
		rows = append(rows, row{strings.Join(sets[0], " + ") + ", base binary", base, sets[0]})
	}
	for _, set := range sets {
		rows = append(rows, row{strings.Join(set, " + "), bin, set})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(len(rows)*runs)*time.Minute)
	defer cancel()
	got := make([][]gateway.Memory, len(rows))
	for i := range runs {
		for j, r := range rows {
			fmt.Fprintf(progress, "run %d of %d: %s…\n", i+1, runs, r.label)
			m, err := measure(ctx, r.bin, root, r.set)
			if err != nil {
				return fmt.Errorf("%s: %w", r.label, err)
			}
			fmt.Fprintf(progress, "  %s\n", mem(m))
			got[j] = append(got[j], m)
		}
	}
	fmt.Fprintf(out, "Idle memory as deployed, %s after ready, median of %d runs (min–max); %s; load %s\n\n",
		breport.Secs(settle), runs, breport.Machine(), breport.LoadAverage())
	fmt.Fprintln(out, "| channels | binary | RSS MB | RssAnon MB | PSS MB | PSS vs first row |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|")
	base0 := median(got[0], func(m gateway.Memory) int { return m.PSS })
	for j, r := range rows {
		col := func(f func(gateway.Memory) int) string {
			vs := values(got[j], f)
			return fmt.Sprintf("%.1f (%.1f–%.1f)", mb(median(got[j], f)), mb(vs[0]), mb(vs[len(vs)-1]))
		}
		st, err := os.Stat(r.bin)
		if err != nil {
			return err
		}
		pss := median(got[j], func(m gateway.Memory) int { return m.PSS })
		fmt.Fprintf(out, "| %s | %d bytes | %s | %s | %s | %+.1f MB |\n", r.label, st.Size(),
			col(func(m gateway.Memory) int { return m.RSS }), col(func(m gateway.Memory) int { return m.Anon }),
			col(func(m gateway.Memory) int { return m.PSS }), mb(pss-base0))
	}
	return nil
}

// measure deploys bin afresh, starts it with the channels of set against
// new fakes, waits until every channel is connected and settle has passed
// since ready, and reads the process's memory.
func measure(ctx context.Context, bin, root string, set []string) (gateway.Memory, error) {
	var m gateway.Memory
	dir, err := os.MkdirTemp(root, "run-")
	if err != nil {
		return m, err
	}
	if bin, err = gateway.Deploy(bin, dir); err != nil {
		return m, err
	}
	r, err := startRig(ctx, bin, dir, set)
	if err != nil {
		return m, err
	}
	ready := time.Now()
	if err := r.connected(ctx); err != nil {
		r.kill()
		return m, err
	}
	if waitfor.Sleep(ctx, settle-time.Since(ready)) != nil {
		r.kill()
		return m, ctx.Err()
	}
	if m, err = r.proc.Memory(); err != nil {
		r.kill()
		return m, err
	}
	return m, r.stop()
}

func values(ms []gateway.Memory, f func(gateway.Memory) int) []int {
	vs := make([]int, len(ms))
	for i, m := range ms {
		vs[i] = f(m)
	}
	slices.Sort(vs)
	return vs
}

// median is the lower median.
func median(ms []gateway.Memory, f func(gateway.Memory) int) int {
	vs := values(ms, f)
	return vs[(len(vs)-1)/2]
}

func mb(kb int) float64 { return float64(kb) / 1024 }

func mem(m gateway.Memory) string {
	return fmt.Sprintf("RSS %.1f MB, RssAnon %.1f MB, PSS %.1f MB", mb(m.RSS), mb(m.Anon), mb(m.PSS))
}
