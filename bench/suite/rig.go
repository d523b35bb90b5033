package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"switchboard/bench/internal/gateway"
	"switchboard/internal/discordfake"
	"switchboard/internal/testkit"
	"switchboard/internal/tgfake"
)

const tgToken = "7300000001:AAF-bench-Secret_0123456789abcdef"

// settings are what an operator would put in config.yaml for this run; the
// same for every phase and printed with the table.
type settings struct {
	ContextWindow      int // llm.context_window
	MaxConcurrentTurns int // agent.max_concurrent_turns
	Users              int // Telegram user ids 1..Users are in allow_users
}

// rig is one `switchboard serve` process with its own fakes and a fresh
// database: Telegram and Discord enabled, the fake model behind llm.
type rig struct {
	tg    *tgfake.Fake
	dc    *discordfake.Fake
	model *testkit.FakeLLM
	proc  *gateway.Process
}

// startRig starts fresh fakes, writes the config under a new directory of
// root, and starts bin; it returns once /readyz answers 200.
func startRig(ctx context.Context, bin, root string, s settings) (*rig, error) {
	r := &rig{tg: tgfake.Start(tgToken), dc: discordfake.Start(), model: testkit.Start("127.0.0.1:0")}
	dir, err := os.MkdirTemp(root, "run-")
	if err != nil {
		r.closeFakes()
		return nil, err
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(configYAML(s, dir, r.model.URL, r.tg.URL, r.dc)), 0o600); err != nil {
		r.closeFakes()
		return nil, err
	}
	r.proc, err = gateway.Start(ctx, bin, dir, cfg)
	if err != nil {
		r.closeFakes()
		return nil, err
	}
	return r, nil
}

// stop ends the process with SIGTERM (it must exit cleanly) and the fakes.
func (r *rig) stop() error {
	err := r.proc.Stop()
	r.closeFakes()
	return err
}

// kill ends everything at once, after a failure.
func (r *rig) kill() {
	r.proc.Kill()
	r.closeFakes()
}

func (r *rig) closeFakes() {
	r.model.Close()
	r.tg.Close()
	r.dc.Close()
}

// configYAML is the configuration of every run. Learning is off: it makes
// its own model calls after each reply, which would mix into the request
// counts (its effect on reply latency is BenchmarkReplyLatency's subject).
// poll_timeout is 1 s so that "idle" (three empty long polls) is short.
func configYAML(s settings, dir, modelURL, tgURL string, dc *discordfake.Fake) string {
	users := make([]string, s.Users)
	for i := range users {
		users[i] = strconv.Quote(strconv.Itoa(i + 1))
	}
	return fmt.Sprintf(`llm:
  base_url: %q
  api_key: sk-bench
  model: fake-model
  context_window: %d
agent:
  max_concurrent_turns: %d
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
    allow_users: [%s]
  discord:
    enabled: true
    token: %q
    api_base: %q
    gateway_url: %q
    allow_users: ["310000000000000001"]
`, modelURL, s.ContextWindow, s.MaxConcurrentTurns, filepath.Join(dir, "switchboard.db"), filepath.Join(dir, "skills"),
		tgToken, tgURL, strings.Join(users, ", "), dc.Token, dc.APIBase(), dc.GatewayURL())
}
