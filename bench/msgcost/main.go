// Command msgcost measures what a message costs: the CPU time `switchboard
// serve` spends per message with Telegram's outbound pacing on (the
// default) and off, next to a floor bot on the same three libraries
// (floorbot/), and the time from exec to the first long poll of each (and
// to switchboard's "switchboard serving", when a message is answered),
// with a third program for the starts: the floor bot built with every
// package switchboard imports, whose initialisers run before its main as
// switchboard's do (floorbot/libs.go), the floor of a start on
// switchboard's libraries:
//
//	go run ./bench/msgcost [-chats 20] [-rounds 15] [-runs 3] [-starts 5] [-deployed]
//
// Each run starts a fresh process on a fresh database with the shipped
// defaults (learning off: its model calls would mix in), against the fake
// Bot API (its flood limits off, so pacing off is not answered 429) and the
// fake model, answering at once. In a round every chat sends one message
// and the round ends when every reply has arrived: a user waits for the
// answer before writing again, and with pacing on the replies wait for
// their chat's slot (Telegram's one message a second). Two warm-up rounds
// are not measured. CPU time is utime+stime from /proc/PID/stat (not wall
// time: the machine may be shared); the modes alternate, run by run, so
// that other load spreads over both. The process's idle CPU (the long
// polls) over the same wall time is shown apart. The store's transactions
// and commits per message come from /metrics.
//
// Progress goes to stderr, the Markdown table to stdout. Linux only.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/switchboard-gateway/switchboard/bench/internal/gateway"
	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
)

const tgToken = "7300000001:AAF-bench-Secret_0123456789abcdef"

// answer is the model's reply to every message: a short answer.
const answer = "Noted. Here is a short answer of a couple of sentences, as a chat model gives to a quick question."

type options struct {
	chats, rounds, warmup, runs, starts int
	idle                                time.Duration
	profile, bin                        string
	keep, deployed                      bool
}

func main() {
	var o options
	flag.IntVar(&o.chats, "chats", 20, "private chats, each sending one message a round")
	flag.IntVar(&o.rounds, "rounds", 15, "measured rounds")
	flag.IntVar(&o.warmup, "warmup", 2, "unmeasured rounds first")
	flag.IntVar(&o.runs, "runs", 3, "runs of each mode (fresh process each)")
	flag.IntVar(&o.starts, "starts", 5, "starts of each program for start-to-first-poll (0: skip)")
	flag.DurationVar(&o.idle, "idle", 3*time.Second, "idle CPU measured over this long before the rounds")
	flag.StringVar(&o.profile, "cpuprofile", "", "write the gateway's CPU profile of each run to this prefix (SWITCHBOARD_CPUPROFILE)")
	flag.StringVar(&o.bin, "bin", "", "measure this switchboard binary instead of building one (another commit's, for a before/after)")
	flag.BoolVar(&o.keep, "keep", false, "keep each run's directory (config, database, serve.log)")
	flag.BoolVar(&o.deployed, "deployed", false, "start the programs as deployed (copied, then dropped from the page cache) rather than as just built")
	flag.Parse()
	if o.chats < 1 || o.rounds < 1 || o.runs < 1 {
		fmt.Fprintln(os.Stderr, "msgcost: -chats, -rounds and -runs must be at least 1")
		os.Exit(2)
	}
	if err := run(o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "msgcost: %v\n", err)
		os.Exit(1)
	}
}

// mode is one program and configuration measured.
type mode struct {
	name   string
	floor  bool // the floor bot, not switchboard
	pacing bool
}

var modes = []mode{{name: "switchboard, pacing on (default)", pacing: true}, {name: "switchboard, pacing off"}, {name: "floor bot", floor: true}}

// result is one run of one mode.
type result struct {
	msgs        int
	cpu, idle   time.Duration // CPU over the rounds; idle CPU per second
	wall        time.Duration
	tx, commits float64 // store transactions and commits over the rounds
	anonKB      int     // RssAnon after the rounds
}

func (r result) perMsg() time.Duration { return r.cpu / time.Duration(r.msgs) }

// net is the CPU per message less what the process spends idle over the
// rounds' wall time.
func (r result) net() time.Duration {
	idle := time.Duration(float64(r.idle) * r.wall.Seconds())
	return max(r.cpu-idle, 0) / time.Duration(r.msgs)
}

func run(o options, out, progress io.Writer) error {
	root, err := os.MkdirTemp("", "switchboard-msgcost-")
	if err != nil {
		return err
	}
	if !o.keep {
		defer os.RemoveAll(root)
	}
	fmt.Fprintln(progress, "building switchboard and the floor bots…")
	bin := o.bin
	if bin == "" {
		if bin, err = gateway.Build(root); err != nil {
			return err
		}
	}
	const floorPkg = "github.com/switchboard-gateway/switchboard/bench/msgcost/floorbot"
	floor, err := gateway.BuildPackage(root, "floorbot", floorPkg)
	if err != nil {
		return err
	}
	var libsFloor string
	if o.starts > 0 {
		if libsFloor, err = gateway.BuildPackage(root, "floorbot-libs", floorPkg, gateway.Tags, "switchboardlibs"); err != nil {
			return err
		}
	}
	res := make([][]result, len(modes))
	for i := range o.runs {
		for m, md := range modes {
			r, err := measure(o, md, bin, floor, root, i)
			if err != nil {
				return fmt.Errorf("%s, run %d: %w", md.name, i+1, err)
			}
			fmt.Fprintf(progress, "%s, run %d: %d messages, %.2f ms CPU a message (%.2f ms net of idle), %.1f transactions and %.1f commits a message, wall %s, RssAnon %.1f MB\n",
				md.name, i+1, r.msgs, ms(r.perMsg()), ms(r.net()), r.tx/float64(r.msgs), r.commits/float64(r.msgs), r.wall.Round(time.Millisecond), float64(r.anonKB)/1024)
			res[m] = append(res[m], r)
		}
	}
	if o.deployed && o.starts > 0 {
		// Read from disk at the first start, then from the page cache as
		// the kernel read it in: a service restarted after a deploy.
		dir := filepath.Join(root, "deployed")
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		if bin, err = gateway.Deploy(bin, dir); err != nil {
			return err
		}
		if floor, err = gateway.Deploy(floor, dir); err != nil {
			return err
		}
		if libsFloor, err = gateway.Deploy(libsFloor, dir); err != nil {
			return err
		}
	}
	paths := [len(starters)]string{bin, floor, libsFloor} // in starters' order
	var starts, startCPU, ready [len(starters)][]time.Duration
	for i := range o.starts {
		for k, s := range starters {
			d, c, r, err := firstPoll(paths[k], root, k > 0)
			if err != nil {
				return fmt.Errorf("%s, start %d: %w", s.name, i+1, err)
			}
			starts[k] = append(starts[k], d)
			startCPU[k] = append(startCPU[k], c)
			ready[k] = append(ready[k], r)
		}
	}
	report(out, o, res, starts, startCPU, ready)
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// measure runs one mode once.
func measure(o options, md mode, bin, floor, root string, run int) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tg := tgfake.Start(tgToken)
	defer tg.Close()
	tg.SetLimits(tgfake.NoLimits)
	model := testkit.Start("127.0.0.1:0")
	defer model.Close()
	model.SetDefault(&testkit.Reply{Text: answer})
	dir, err := os.MkdirTemp(root, "run-")
	if err != nil {
		return result{}, err
	}
	var pid int
	var metricsURL string
	if md.floor {
		cmd := exec.Command(floor, "-api", tg.URL, "-token", tgToken, "-model", model.URL, "-db", filepath.Join(dir, "floor.db"))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return result{}, err
		}
		defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
		pid = cmd.Process.Pid
	} else {
		cfg := gateway.Shipped(o.chats, dir, model.URL, tgToken, tg.URL)
		cfg.Learning.Enabled = false
		config.Section[*telegram.Config](cfg).Pacing = md.pacing
		path := filepath.Join(dir, "config.yaml")
		if err := cfgfile.WriteFile(path, cfg); err != nil {
			return result{}, err
		}
		if o.profile != "" {
			os.Setenv("SWITCHBOARD_CPUPROFILE", fmt.Sprintf("%s-%s-%d.prof", o.profile, map[bool]string{true: "paced", false: "unpaced"}[md.pacing], run+1))
		}
		p, err := gateway.Start(ctx, bin, dir, path)
		os.Unsetenv("SWITCHBOARD_CPUPROFILE")
		if err != nil {
			return result{}, err
		}
		defer func() {
			if err := p.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}()
		pid, metricsURL = p.Pid(), p.Base+"/metrics"
	}
	sent := 0
	round := func(r int) error {
		for c := 1; c <= o.chats; c++ {
			tg.PushText(int64(c), int64(c), "user"+strconv.Itoa(c), fmt.Sprintf("message %d of chat %d", r, c))
		}
		sent += o.chats
		_, err := tg.WaitSent(ctx, sent)
		return err
	}
	for r := range o.warmup {
		if err := round(r); err != nil {
			return result{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	// Idle: no message for o.idle (long polls only).
	idle0, err := gateway.CPUTime(pid)
	if err != nil {
		return result{}, err
	}
	t0 := time.Now()
	select {
	case <-time.After(o.idle):
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
	idle1, err := gateway.CPUTime(pid)
	if err != nil {
		return result{}, err
	}
	var res result
	res.idle = time.Duration(float64(idle1-idle0) / time.Since(t0).Seconds())
	tx0, c0 := storeCounts(metricsURL)
	cpu0, err := gateway.CPUTime(pid)
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	for r := range o.rounds {
		if err := round(o.warmup + r); err != nil {
			return result{}, err
		}
	}
	// What follows the last reply (recording the turn) is part of it.
	if metricsURL != "" {
		if err := waitTurns(ctx, metricsURL, float64(o.chats*(o.warmup+o.rounds))); err != nil {
			return result{}, err
		}
	}
	res.wall = time.Since(start)
	cpu1, err := gateway.CPUTime(pid)
	if err != nil {
		return result{}, err
	}
	tx1, c1 := storeCounts(metricsURL)
	res.anonKB, _ = gateway.StatusKB(pid, "RssAnon")
	res.msgs, res.cpu, res.tx, res.commits = o.chats*o.rounds, cpu1-cpu0, tx1-tx0, c1-c0
	if md.floor {
		res.tx, res.commits = 2*float64(res.msgs), 2*float64(res.msgs) // two autocommitted inserts a message
	}
	return res, nil
}

// metric reads the sum of a counter's series from /metrics (0 when absent).
func metric(url string, names ...string) []float64 {
	out := make([]float64, len(names))
	if url == "" {
		return out
	}
	resp, err := http.Get(url)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for i, n := range names {
			if rest, ok := strings.CutPrefix(line, n); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "{")) {
				f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
				if len(f) > 0 {
					v, _ := strconv.ParseFloat(f[0], 64)
					out[i] += v
				}
			}
		}
	}
	return out
}

func storeCounts(url string) (tx, commits float64) {
	v := metric(url, "switchboard_store_transactions_total", "switchboard_store_commits_total")
	return v[0], v[1]
}

// waitTurns waits until the gateway has recorded n turns.
func waitTurns(ctx context.Context, url string, n float64) error {
	for {
		if metric(url, "switchboard_turns_total")[0] >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("the turns were not all recorded")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// starters are the programs whose starts are timed, in the order they
// take turns: switchboard, then the floor bots. bin is the short name the
// ratios use.
var starters = [...]struct{ name, bin string }{
	{"switchboard serve (shipped defaults)", "switchboard"},
	{"floor bot", "floor"},
	{"floor bot on switchboard's libraries (initialised, unused)", "libs"},
}

// firstPoll starts switchboard (or a floor bot, if isFloor) from bin and
// returns the time from exec to its first getUpdates reaching the fake,
// the CPU time it used until then, and the time from exec to ready:
// switchboard's "switchboard serving" log line (its router has started: a
// message is answered), the floor bot's first poll.
func firstPoll(bin, root string, isFloor bool) (wall, cpu, ready time.Duration, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tg := tgfake.Start(tgToken)
	defer tg.Close()
	model := testkit.Start("127.0.0.1:0")
	defer model.Close()
	dir, err := os.MkdirTemp(root, "start-")
	if err != nil {
		return 0, 0, 0, err
	}
	var cmd *exec.Cmd
	if isFloor {
		cmd = exec.Command(bin, "-api", tg.URL, "-token", tgToken, "-model", model.URL, "-db", filepath.Join(dir, "floor.db"))
	} else {
		path := filepath.Join(dir, "config.yaml")
		if err := cfgfile.WriteFile(path, gateway.Shipped(1, dir, model.URL, tgToken, tg.URL)); err != nil {
			return 0, 0, 0, err
		}
		cmd = exec.Command(bin, "serve", "--config", path)
		cmd.Dir = dir
	}
	logf, err := os.Create(filepath.Join(dir, "start.log"))
	if err != nil {
		return 0, 0, 0, err
	}
	defer logf.Close()
	serving := &logWatch{line: `"msg":"switchboard serving"`, seen: make(chan string, 1)}
	cmd.Stderr = io.MultiWriter(logf, serving)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, err
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	if err := tg.WaitCalls(ctx, "getUpdates", 1); err != nil {
		return 0, 0, 0, fmt.Errorf("no getUpdates: %w", err)
	}
	wall, cpu = time.Since(start), threadsCPU(cmd.Process.Pid)
	if isFloor {
		return wall, cpu, wall, nil
	}
	select {
	case line := <-serving.seen:
		var l struct{ Time time.Time }
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			return 0, 0, 0, fmt.Errorf("the serving line %q: %w", line, err)
		}
		return wall, cpu, l.Time.Sub(start), nil
	case <-ctx.Done():
		return 0, 0, 0, errors.New("no \"switchboard serving\" in the log")
	}
}

// logWatch passes the first log line holding line to seen.
type logWatch struct {
	line string
	seen chan string
	buf  []byte
	done bool
}

func (w *logWatch) Write(p []byte) (int, error) {
	if w.done {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		if strings.Contains(l, w.line) {
			w.done, w.buf = true, nil
			w.seen <- l
			return len(p), nil
		}
	}
}

// threadsCPU is the CPU time the process's threads have run so far, in
// nanoseconds (the first field of /proc/PID/task/TID/schedstat): finer than
// /proc/PID/stat's clock ticks, for a start-up of tens of milliseconds.
func threadsCPU(pid int) time.Duration {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var sum time.Duration
	for _, f := range tasks {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if fs := strings.Fields(string(data)); len(fs) > 0 {
			ns, _ := strconv.ParseInt(fs[0], 10, 64)
			sum += time.Duration(ns)
		}
	}
	return sum
}

func report(w io.Writer, o options, res [][]result, starts, startCPU, ready [len(starters)][]time.Duration) {
	host, _ := os.Hostname()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(w, "msgcost: %d chats × %d rounds (+%d warm-up), %d runs a mode, %s, %s, load %s\n\n",
		o.chats, o.rounds, o.warmup, o.runs, time.Now().UTC().Format("2006-01-02 15:04 UTC"), host, strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Fprintln(w, "| program | CPU a message, median (min–max) | net of idle | idle CPU | store transactions / commits a message | wall of the rounds |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for m, rs := range res {
		per := make([]time.Duration, len(rs))
		nets := make([]time.Duration, len(rs))
		for i, r := range rs {
			per[i], nets[i] = r.perMsg(), r.net()
		}
		mid := median(rs, func(r result) time.Duration { return r.perMsg() })
		fmt.Fprintf(w, "| %s | %.2f ms (%.2f–%.2f) | %.2f ms | %.1f ms/s | %.2f / %.2f | %s |\n", modes[m].name,
			ms(mid.perMsg()), ms(slices.Min(per)), ms(slices.Max(per)), ms(mid.net()), ms(mid.idle),
			mid.tx/float64(mid.msgs), mid.commits/float64(mid.msgs), mid.wall.Round(10*time.Millisecond))
	}
	if o.starts > 0 {
		fmt.Fprintln(w)
		state := "as built (just linked)"
		if o.deployed {
			state = "as deployed (read from disk at the first start)"
		}
		fmt.Fprintf(w, "Starts, %d of each program, all %s:\n\n", o.starts, state)
		fmt.Fprintln(w, "| program | exec to first getUpdates, median (min–max) | CPU time until then, median (min–max) | exec to ready, median (min–max) |")
		fmt.Fprintln(w, "|---|---|---|---|")
		for k, s := range starters {
			d, c, r := sorted(starts[k]), sorted(startCPU[k]), sorted(ready[k])
			fmt.Fprintf(w, "| %s | %.1f ms (%.1f–%.1f) | %.1f ms (%.1f–%.1f) | %.1f ms (%.1f–%.1f) |\n", s.name, ms(d[len(d)/2]), ms(d[0]), ms(d[len(d)-1]),
				ms(c[len(c)/2]), ms(c[0]), ms(c[len(c)-1]), ms(r[len(r)/2]), ms(r[0]), ms(r[len(r)-1]))
		}
		fmt.Fprintln(w)
		for _, q := range [][2]int{{0, 1}, {2, 1}, {0, 2}} {
			a, b := sorted(starts[q[0]]), sorted(starts[q[1]])
			ca, cb := sorted(startCPU[q[0]]), sorted(startCPU[q[1]])
			fmt.Fprintf(w, "%s / %s: %.2f× the wall time, %.2f× the CPU time\n", starters[q[0]].bin, starters[q[1]].bin,
				float64(a[len(a)/2])/float64(b[len(b)/2]), float64(ca[len(ca)/2])/float64(cb[len(cb)/2]))
		}
		fmt.Fprintln(w, "(floor: the floor bot; libs: the floor bot on switchboard's libraries)")
	}
}

// median is the run of median key.
func median(rs []result, key func(result) time.Duration) result {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b result) int { return int(key(a) - key(b)) })
	return s[len(s)/2]
}

func sorted(d []time.Duration) []time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d
}
