// Command fuzz runs every fuzz target of the module for a given time each,
// one after another, and prints a Markdown table: per target, the
// executions, the new interesting inputs the run found (and the size of the
// corpus after it), and any failure with the path of its failing input.
//
//	go run ./bench/fuzz                          # every target, 1 minute each
//	go run ./bench/fuzz -fuzztime 5m             # the habit before a release
//	go run ./bench/fuzz -fuzztime 20s -run Load ./config/
//
// It finds the targets with `go test -list '^Fuzz'` in every package (of the
// patterns given, ./... by default) whose test files declare a func Fuzz…,
// and runs each with `go test -run '^$' -fuzz '^Name$' -fuzztime D`. A
// failing input is written by go test to the package's testdata/fuzz/Name/,
// where it stays as a seed: fix the bug and commit it with the fix. The exit
// status is 1 if a target failed, 2 if the targets could not be found.
// Ctrl-C stops the target running (go test reports it as usual) and prints
// the table so far.
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
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-gateway/switchboard/bench/internal/report"
)

func main() {
	fuzztime := flag.String("fuzztime", "1m", "how long to fuzz each target (a duration, or Nx for N executions)")
	run := flag.String("run", "", "only the targets whose \"package.Target\" matches this regexp")
	parallel := flag.Int("parallel", 0, "fuzzing processes per target (0: go test's default, GOMAXPROCS)")
	verbose := flag.Bool("v", false, "copy go test's output to stderr")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./bench/fuzz [flags] [packages]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	var filter *regexp.Regexp
	if *run != "" {
		var err error
		if filter, err = regexp.Compile(*run); err != nil {
			fmt.Fprintln(os.Stderr, "fuzz: -run:", err)
			os.Exit(2)
		}
	}
	patterns := flag.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	targets, err := findTargets(ctx, patterns)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fuzz:", err)
		os.Exit(2)
	}
	var chosen []target
	for _, t := range targets {
		if filter == nil || filter.MatchString(t.pkg.ImportPath+"."+t.name) {
			chosen = append(chosen, t)
		}
	}
	if len(chosen) == 0 {
		fmt.Fprintln(os.Stderr, "fuzz: no fuzz target matches")
		os.Exit(2)
	}

	started := time.Now()
	var results []result
	for i, t := range chosen {
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(os.Stderr, "fuzz: [%d/%d] %s %s for %s\n", i+1, len(chosen), t.pkg.ImportPath, t.name, *fuzztime)
		var log io.Writer
		if *verbose {
			log = os.Stderr
		}
		r := fuzz(ctx, t, *fuzztime, *parallel, log)
		fmt.Fprintf(os.Stderr, "fuzz:        %s\n", r.summary())
		results = append(results, r)
	}
	printTable(os.Stdout, results, *fuzztime, *parallel, started, len(chosen))
	for _, r := range results {
		if r.failed {
			os.Exit(1)
		}
	}
	if ctx.Err() != nil {
		os.Exit(1)
	}
}

// pkg is what go list says about a package.
type pkg struct {
	ImportPath   string
	Dir          string
	TestGoFiles  []string
	XTestGoFiles []string
}

type target struct {
	pkg  pkg
	name string
}

var fuzzFunc = regexp.MustCompile(`(?m)^func Fuzz\w*\(`)

// findTargets lists the fuzz targets of the packages matching patterns.
// Only packages whose test files declare a func Fuzz… are compiled for
// `go test -list`, which has the last word.
func findTargets(ctx context.Context, patterns []string) ([]target, error) {
	out, err := goCmd(ctx, append([]string{"list", "-json=ImportPath,Dir,TestGoFiles,XTestGoFiles"}, patterns...)...)
	if err != nil {
		return nil, err
	}
	var targets []target
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list: %w", err)
		}
		if !declaresFuzz(p) {
			continue
		}
		out, err := goCmd(ctx, "test", "-list", "^Fuzz", p.ImportPath)
		if err != nil {
			return nil, err
		}
		for _, name := range listed(out) {
			targets = append(targets, target{pkg: p, name: name})
		}
	}
	return targets, nil
}

func declaresFuzz(p pkg) bool {
	for _, f := range append(p.TestGoFiles, p.XTestGoFiles...) {
		if b, err := os.ReadFile(filepath.Join(p.Dir, f)); err == nil && fuzzFunc.Match(b) {
			return true
		}
	}
	return false
}

// listed returns the fuzz target names in the output of go test -list: one
// name a line, then "ok  <package> <time>".
func listed(out []byte) []string {
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "Fuzz") && !strings.ContainsAny(line, " \t") {
			names = append(names, line)
		}
	}
	return names
}

func goCmd(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return out, nil
}

// result is one target's run.
type result struct {
	target
	wall           time.Duration
	elapsed        time.Duration // as the fuzzer last reported it
	execs          int64
	newInteresting int
	corpus         int // total interesting inputs after the run: seeds, testdata and the cache
	failed         bool
	input          string // the failing input's file (relative to the working directory), or its seed name
	message        string // the failure's first line
	stopped        bool   // interrupted
}

func (r result) summary() string {
	s := fmt.Sprintf("%d execs, %d new interesting (corpus %d) in %s", r.execs, r.newInteresting, r.corpus, r.wall.Round(time.Second))
	if r.failed {
		s += "; FAIL: " + r.failure()
	}
	return s
}

func (r result) failure() string {
	s := r.message
	if r.input != "" {
		s = "input " + r.input + ": " + s
	}
	return s
}

// fuzz runs one target. go test runs in this process group, so a Ctrl-C
// reaches it too and it stops as it does in a terminal; ctx only tells that
// this happened.
func fuzz(ctx context.Context, t target, fuzztime string, parallel int, log io.Writer) result {
	args := []string{"test", "-run", "^$", "-fuzz", "^" + t.name + "$", "-fuzztime", fuzztime}
	if d, err := time.ParseDuration(fuzztime); err == nil {
		args = append(args, "-timeout", (d + 10*time.Minute).String())
	} else {
		args = append(args, "-timeout", "0") // -fuzztime Nx: no bound known
	}
	if parallel > 0 {
		args = append(args, "-parallel", strconv.Itoa(parallel))
	}
	args = append(args, t.pkg.ImportPath)
	cmd := exec.Command("go", args...)
	var out bytes.Buffer
	w := io.Writer(&out)
	if log != nil {
		w = io.MultiWriter(&out, log)
	}
	cmd.Stdout, cmd.Stderr = w, w
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if ctx.Err() != nil && !bytes.Contains(out.Bytes(), []byte("--- FAIL")) {
		r := parse(t, out.Bytes(), nil)
		r.wall, r.stopped = wall, true
		return r
	}
	r := parse(t, out.Bytes(), err)
	r.wall = wall
	if r.input != "" && !strings.HasPrefix(r.input, "seed#") {
		r.input = relative(filepath.Join(t.pkg.Dir, r.input))
	}
	return r
}

var (
	progressLine = regexp.MustCompile(`^fuzz: elapsed: (\S+), execs: (\d+) \([^)]*\), new interesting: (\d+) \(total: (\d+)\)`)
	writtenLine  = regexp.MustCompile(`Failing input written to (\S+)`)
	seedLine     = regexp.MustCompile(`^failure while testing seed corpus entry: (\S+)`)
	failLine     = regexp.MustCompile(`^\s*--- FAIL: (\S+)`)
)

// parse reads the output of go test -fuzz and how it exited: the last
// progress line holds the totals; a failure is a "--- FAIL:" line, its
// message the line after the innermost one, and its input either the file
// go test wrote or the corpus entry that failed (Target/name, which is
// testdata/fuzz/Target/name, or seed#N of an f.Add). A failed run without a
// "--- FAIL:" (a build error) is a failure with the last line said.
func parse(t target, out []byte, runErr error) result {
	r := result{target: t}
	var failedEntry string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	wantMessage := false
	for sc.Scan() {
		line := sc.Text()
		if wantMessage && strings.TrimSpace(line) != "" && !failLine.MatchString(line) {
			r.message = short(strings.TrimSpace(line))
			wantMessage = false
		}
		if m := progressLine.FindStringSubmatch(line); m != nil {
			r.elapsed, _ = time.ParseDuration(m[1])
			r.execs, _ = strconv.ParseInt(m[2], 10, 64)
			r.newInteresting, _ = strconv.Atoi(m[3])
			r.corpus, _ = strconv.Atoi(m[4])
			continue
		}
		if m := writtenLine.FindStringSubmatch(line); m != nil {
			r.input = m[1]
			continue
		}
		if m := seedLine.FindStringSubmatch(line); m != nil {
			_, failedEntry, _ = strings.Cut(m[1], "/")
			continue
		}
		if m := failLine.FindStringSubmatch(line); m != nil {
			r.failed = true
			wantMessage = true
			if _, entry, ok := strings.Cut(m[1], "/"); ok && failedEntry == "" {
				failedEntry = entry
			}
			continue
		}
	}
	if runErr != nil && !r.failed {
		r.failed = true
		r.message = lastLine(out)
	}
	if r.failed && r.input == "" && failedEntry != "" {
		if strings.HasPrefix(failedEntry, "seed#") {
			r.input = failedEntry
		} else {
			r.input = filepath.Join("testdata", "fuzz", t.name, failedEntry)
		}
	}
	return r
}

func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && l != "FAIL" && !strings.HasPrefix(l, "FAIL\t") && !strings.HasPrefix(l, "exit status") {
			return short(l)
		}
	}
	return "go test failed"
}

func short(s string) string {
	if r := []rune(s); len(r) > 160 {
		return string(r[:160]) + "…"
	}
	return s
}

// relative shows path relative to the working directory when it is below it.
func relative(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

func printTable(w io.Writer, results []result, fuzztime string, parallel int, started time.Time, planned int) {
	procs := "GOMAXPROCS"
	if parallel > 0 {
		procs = strconv.Itoa(parallel)
	}
	fmt.Fprintf(w, "Fuzzing, %s per target, %s fuzzing processes; %s; %s; load average %s\n\n",
		fuzztime, procs, started.UTC().Format("2006-01-02 15:04 MST"), report.Machine(), report.LoadAverage())
	fmt.Fprintln(w, "| package | target | execs | execs/s | new interesting | corpus | result |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---|")
	failed := 0
	for _, r := range results {
		rate := "–"
		if r.elapsed > 0 {
			rate = strconv.FormatInt(int64(float64(r.execs)/r.elapsed.Seconds()), 10)
		}
		outcome := "ok"
		switch {
		case r.failed:
			failed++
			outcome = "FAIL: " + strings.ReplaceAll(r.failure(), "|", `\|`)
		case r.stopped:
			outcome = "stopped"
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %d | %d | %s |\n",
			r.pkg.ImportPath, r.name, r.execs, rate, r.newInteresting, r.corpus, outcome)
	}
	fmt.Fprintf(w, "\n%d of %d targets run, %d failed, in %s.\n", len(results), planned, failed, time.Since(started).Round(time.Second))
}
