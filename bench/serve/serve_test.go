// Package serve measures `switchboard serve` as a process: the time from
// its start to a passing /readyz, and its resident memory once idle, with
// Telegram and Discord enabled against the local fakes and the fake model.
//
//	go test ./bench/serve -run '^$' -bench . -benchtime 5x
//
// It builds the binary first (go build), as it is deployed. Targets: ready
// in under 150 ms, idle RSS at most 20 MB.
package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"switchboard/internal/discordfake"
	"switchboard/internal/testkit"
	"switchboard/internal/tgfake"
)

const tgToken = "7300000001:AAF-bench-Secret_0123456789abcdef"

// buildBinary builds switchboard into dir and returns its path.
func buildBinary(b *testing.B, dir string) string {
	b.Helper()
	bin := filepath.Join(dir, "switchboard")
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(goTool, "build", "-trimpath", "-o", bin, "switchboard")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// rssKB reads a field of /proc/PID/status, in kB.
func rssKB(pid int, field string) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

func BenchmarkServe(b *testing.B) {
	bin := buildBinary(b, b.TempDir())
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
	body := fmt.Sprintf(`llm:
  base_url: %q
  api_key: sk-bench
  model: fake-model
store:
  path: %q
skills:
  dir: %q
learning:
  enabled: false
http:
  listen: 127.0.0.1:0
log:
  format: json
channels:
  telegram:
    enabled: true
    token: %q
    api_endpoint: %q
    poll_timeout: 1s
    allow_users: ["1"]
  discord:
    enabled: true
    token: %q
    api_base: %q
    gateway_url: %q
    allow_users: ["310000000000000001"]
`, model.URL, filepath.Join(dir, "switchboard.db"), filepath.Join(dir, "skills"), tgToken, tg.URL, dc.Token, dc.APIBase(), dc.GatewayURL())
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--config", cfg)
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	identifies := dc.Identifies()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	// The address is in the log; the rest of the log is kept for errors.
	addr := make(chan string, 1)
	logTail := &lockedLog{}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "http listening" {
				addr <- line.Addr
			}
			logTail.add(sc.Text())
		}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-ctx.Done():
		b.Fatalf("serve did not listen")
	}
	// Readiness is what is measured, so it is polled.
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := client.Get(base + "/readyz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ready = time.Since(start)
				break
			}
		}
		select {
		case <-ctx.Done():
			b.Fatalf("serve never got ready:\n%s", logTail.String())
		case <-tick.C:
		}
	}
	readyRSS, err = rssKB(cmd.Process.Pid, "VmRSS")
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
	idleRSS, err = rssKB(cmd.Process.Pid, "VmRSS")
	if err != nil {
		b.Fatal(err)
	}
	peakRSS, err = rssKB(cmd.Process.Pid, "VmHWM")
	if err != nil {
		b.Fatal(err)
	}
	if os.Getenv("BENCH_VERBOSE") != "" { // where the memory is: anonymous, or pages of the binary
		for _, f := range []string{"RssAnon", "RssFile", "RssShmem"} {
			kb, _ := rssKB(cmd.Process.Pid, f)
			b.Logf("%s: %d kB", f, kb)
		}
		if smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", cmd.Process.Pid)); err == nil {
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
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		b.Fatalf("serve exited with %v:\n%s", err, logTail.String())
	}
	return ready, readyRSS, idleRSS, peakRSS
}

// lockedLog keeps the first 64 KiB of serve's log for error messages.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 1<<16 {
		l.b.WriteString(line + "\n")
	}
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
