package main

import (
	"context"
	"os"
	"path/filepath"

	"github.com/switchboard-gateway/switchboard/bench/internal/gateway"
	"github.com/switchboard-gateway/switchboard/internal/discordfake"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
)

const tgToken = "7300000001:AAF-bench-Secret_0123456789abcdef"

// settings are what an operator would put in config.yaml for this run; the
// same for every phase and printed with the table.
type settings = gateway.Settings

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
	r.tg.SetLimits(tgfake.NoLimits) // the gateway is measured, not Telegram's limits (see gateway.Config)
	dir, err := os.MkdirTemp(root, "run-")
	if err != nil {
		r.closeFakes()
		return nil, err
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := cfgfile.WriteFile(cfg, gateway.Config(s, dir, r.model.URL, tgToken, r.tg.URL, r.dc)); err != nil {
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
