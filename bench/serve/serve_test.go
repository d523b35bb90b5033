// Package serve measures `switchboard serve` as a process: the time from
// its start to a passing /readyz, and its resident memory once idle, with
// Telegram and Discord enabled against the local fakes and the fake model.
//
//	go test ./bench/serve -run '^$' -bench . -benchtime 5x
//
// It builds the binary first (go build), as it is deployed. Targets: ready
// in under 150 ms, idle RSS at most 20 MB. The whole benchmark suite, with
// these two among its rows, is `go run ./bench/suite`.
package serve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/bench/internal/gateway"
	"github.com/switchboard-gateway/switchboard/internal/discordfake"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
)

const tgToken = "7300000001:AAF-bench-Secret_0123456789abcdef"

func BenchmarkServe(b *testing.B) {
	bin, err := gateway.Build(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	tg := tgfake.New(b, tgToken)
	dc := discordfake.New(b)
	model := testkit.NewFakeLLM(b)
	var readyMS, readyMB, idleMB, peakMB float64
	for i := 0; i < b.N; i++ {
		r, rr, idle, peak := runOnce(b, bin, tg, dc, model)
		readyMS += float64(r.Microseconds()) / 1000
		readyMB += float64(rr) / 1024
		idleMB += float64(idle) / 1024
		peakMB += float64(peak) / 1024
	}
	n := float64(b.N)
	b.ReportMetric(readyMS/n, "ms-to-ready")
	b.ReportMetric(readyMB/n, "MB-rss-at-ready")
	b.ReportMetric(idleMB/n, "MB-idle-rss")
	b.ReportMetric(peakMB/n, "MB-peak-rss")
}

// runOnce starts serve on a fresh database, waits for /readyz, lets it idle
// for two long polls, reads its memory, and stops it with SIGTERM.
func runOnce(b *testing.B, bin string, tg *tgfake.Fake, dc *discordfake.Fake, model *testkit.FakeLLM) (ready time.Duration, readyRSS, idleRSS, peakRSS int) {
	b.Helper()
	dir := b.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	// The suite's configuration, with the default concurrency and one user.
	settings := gateway.Config(gateway.Settings{ContextWindow: 8192, MaxConcurrentTurns: 4, Users: 1},
		dir, model.URL, tgToken, tg.URL, dc)
	if err := cfgfile.WriteFile(cfg, settings); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	identifies := dc.Identifies()
	p, err := gateway.Start(ctx, bin, dir, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Kill()
	ready = p.Ready
	readyRSS, err = p.StatusKB("VmRSS")
	if err != nil {
		b.Fatal(err)
	}
	// Idle: the Discord session is up, and Telegram has long-polled three
	// more times (1 s each) with nothing to do.
	if err := dc.WaitFor(ctx, func() bool { return dc.Identifies() > identifies }); err != nil {
		b.Fatal(err)
	}
	if err := tg.WaitCalls(ctx, "getUpdates", tg.Calls("getUpdates")+3); err != nil {
		b.Fatal(err)
	}
	idleRSS, err = p.StatusKB("VmRSS")
	if err != nil {
		b.Fatal(err)
	}
	peakRSS, err = p.StatusKB("VmHWM")
	if err != nil {
		b.Fatal(err)
	}
	if os.Getenv("BENCH_VERBOSE") != "" { // where the memory is: anonymous, or pages of the binary
		for _, f := range []string{"RssAnon", "RssFile", "RssShmem"} {
			kb, _ := p.StatusKB(f)
			b.Logf("%s: %d kB", f, kb)
		}
		if smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", p.Pid())); err == nil {
			var head string
			for _, line := range strings.Split(string(smaps), "\n") {
				if f := strings.Fields(line); len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
					head = line
				}
				if rest, ok := strings.CutPrefix(line, "Rss:"); ok {
					if kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB")); kb >= 256 {
						b.Logf("%6d kB  %s", kb, head)
					}
				}
			}
		}
	}
	if err := p.Stop(); err != nil {
		b.Fatal(err)
	}
	return ready, readyRSS, idleRSS, peakRSS
}
