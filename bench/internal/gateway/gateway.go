// Package gateway runs the real switchboard binary as a process for the
// benchmarks: it builds it as it is deployed, starts `serve` with a config
// file, measures the time to a passing /readyz, and reads the process's
// memory from /proc.
package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
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
	"time"

	"github.com/switchboard-gateway/switchboard/channels/discord"
	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/discordfake"
)

// Tags is the project's one set of build tags, as in the README's build
// command.
const Tags = "goolm"

// Build builds the switchboard binary (go build -trimpath -tags goolm, as
// it is deployed) into dir and returns its path. It must run inside the
// module.
func Build(dir string) (string, error) {
	return BuildPackage(dir, "switchboard", "github.com/switchboard-gateway/switchboard", Tags)
}

// BuildPackage builds the command pkg of this module with go build
// -trimpath and the build tags given, into dir/name.
func BuildPackage(dir, name, pkg string, tags ...string) (string, error) {
	bin := filepath.Join(dir, name)
	goTool := "go"
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		goTool = p // the toolchain that built us, not whatever PATH finds
	}
	args := []string{"build", "-trimpath", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command(goTool, append(args, pkg)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Process is a running `switchboard serve`.
type Process struct {
	Base  string        // http://host:port of its HTTP server
	Ready time.Duration // from exec to the first /readyz 200

	cmd  *exec.Cmd
	log  *tailLog
	done chan struct{} // closed when the log reader ends
}

// Start runs `bin serve --config config` in dir and returns once /readyz
// answers 200. The configuration must set `http.listen` (127.0.0.1:0 is
// fine: the address is read from the log) and `log.format: json`. The whole
// log is written to serve.log in dir. ctx bounds the wait for readiness; the
// process itself lives until Stop or Kill.
func Start(ctx context.Context, bin, dir, config string) (*Process, error) {
	cmd := exec.Command(bin, "serve", "--config", config)
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, log: &tailLog{}, done: make(chan struct{})}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	// The address is in the log; the rest of the log is kept for errors.
	addr := make(chan string, 1)
	go func() {
		defer close(p.done)
		defer logFile.Close()
		w := bufio.NewWriter(logFile)
		defer w.Flush()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		found := false
		for sc.Scan() {
			var line struct{ Msg, Addr string }
			if !found && json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "http listening" {
				found = true
				addr <- line.Addr
			}
			p.log.add(sc.Text())
			w.Write(sc.Bytes())
			w.WriteByte('\n')
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	fail := func(err error) (*Process, error) {
		p.Kill()
		return nil, fmt.Errorf("%w\nlog:\n%s", err, p.Log())
	}
	select {
	case a := <-addr:
		p.Base = "http://" + a
	case <-p.done:
		return fail(errors.New("serve exited before listening"))
	case <-ctx.Done():
		return fail(errors.New("serve did not listen"))
	}
	// Readiness is what is measured, so it is polled, every millisecond.
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := client.Get(p.Base + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				p.Ready = time.Since(start)
				return p, nil
			}
		}
		select {
		case <-ctx.Done():
			return fail(errors.New("serve never got ready"))
		case <-p.done:
			return fail(errors.New("serve exited before it was ready"))
		case <-tick.C:
		}
	}
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// StatusKB reads a field of /proc/PID/status given in kB, such as VmRSS
// (resident now) or VmHWM (peak resident).
func (p *Process) StatusKB(field string) (int, error) {
	return StatusKB(p.Pid(), field)
}

// StatusKB reads a kB field of /proc/PID/status.
func StatusKB(pid int, field string) (int, error) {
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

// Stop sends SIGTERM and waits for a clean exit.
func (p *Process) Stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	<-p.done
	if err := p.cmd.Wait(); err != nil {
		return fmt.Errorf("serve exited with %w\nlog:\n%s", err, p.Log())
	}
	return nil
}

// Kill ends the process at once (cleanup after a failure).
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
	_ = p.cmd.Wait()
}

// Log returns the first 64 KiB of the process's log.
func (p *Process) Log() string { return p.log.String() }

// tailLog keeps the first 64 KiB of serve's log for error messages.
type tailLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *tailLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 1<<16 {
		l.b.WriteString(line + "\n")
	}
}

func (l *tailLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// CPUTime is the CPU time the process used so far (user + system), from
// /proc/PID/stat.
func (p *Process) CPUTime() (time.Duration, error) {
	return CPUTime(p.Pid())
}

// CPUTime is the CPU time process pid used so far (user + system), from
// /proc/PID/stat, in clock ticks (10 ms).
func CPUTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may
	// contain spaces: state is field 3, utime 14 and stime 15.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	const ticks = 100 // USER_HZ, 100 on every Linux architecture Go supports
	return time.Duration(utime+stime) * time.Second / ticks, nil
}

// Settings are what the benchmarks vary in the configuration.
type Settings struct {
	ContextWindow      int // llm.context_window
	MaxConcurrentTurns int // agent.max_concurrent_turns
	Users              int // Telegram user ids 1..Users are in allow_users
}

// Config is the configuration of every benchmark run. Learning is off: it
// makes its own model calls after each reply, which would mix into the
// request counts (its effect on reply latency is BenchmarkReplyLatency's
// subject). poll_timeout is 1 s so that "idle" (three empty long polls) is
// short. Telegram's outbound pacing is off and the fake Telegram must have
// no limits (tgfake.NoLimits): these runs measure the gateway, at rates no
// real bot may send at (one chat answered back to back, 1,000 chats at
// once); bench/burst measures with Telegram's limits. Write it with
// cfgfile.WriteFile.
func Config(s Settings, dir, modelURL, tgToken, tgURL string, dc *discordfake.Fake) *config.Config {
	cfg := Shipped(s.Users, dir, modelURL, tgToken, tgURL)
	cfg.LLM.ContextWindow = s.ContextWindow
	cfg.Agent.MaxConcurrentTurns = s.MaxConcurrentTurns
	cfg.Learning.Enabled = false
	config.Section[*telegram.Config](cfg).Pacing = false
	d := config.Section[*discord.Config](cfg)
	d.Enabled, d.Token, d.APIBase, d.GatewayURL = true, dc.Token, dc.APIBase(), dc.GatewayURL()
	d.AllowUsers = []string{"310000000000000001"}
	return cfg
}

// Shipped is the shipped defaults (config.Default) with only what a run
// must wire: the fake model, Telegram at tgURL admitting user ids
// 1..users, the run's directory for the database and skills, an HTTP
// address the process picks, JSON logs, and a 1 s long poll.
func Shipped(users int, dir, modelURL, tgToken, tgURL string) *config.Config {
	ids := make([]string, users)
	for i := range ids {
		ids[i] = strconv.Itoa(i + 1)
	}
	cfg := config.Default()
	cfg.LLM.BaseURL, cfg.LLM.APIKey, cfg.LLM.Model = modelURL, "sk-bench", "fake-model"
	cfg.Store.Path = filepath.Join(dir, "switchboard.db")
	cfg.Skills.Dir = filepath.Join(dir, "skills")
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Log.Format = "json"
	tg := config.Section[*telegram.Config](cfg)
	tg.Enabled, tg.Token, tg.APIEndpoint, tg.PollTimeout, tg.AllowUsers = true, tgToken, tgURL, time.Second, ids
	return cfg
}
