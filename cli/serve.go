package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"switchboard/config"
	"switchboard/gateway"
	"switchboard/internal/logging"
)

// serve runs the gateway until ctx ends (SIGINT, SIGTERM), reloading what
// it safely can on SIGHUP.
func serve(ctx context.Context, cfg *config.Config, opts gateway.Options, stderr io.Writer) int {
	var level slog.LevelVar
	lv, err := logging.ParseLevel(cfg.Log.Level)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard: %v\n", err)
		return ExitConfig
	}
	level.Set(lv)
	log, err := logging.NewLeveled(stderr, &level, cfg.Log.Format, cfg.Secrets())
	if err != nil {
		fmt.Fprintf(stderr, "switchboard: %v\n", err)
		return ExitConfig
	}
	for _, w := range cfg.Warnings() {
		log.Warn(w)
	}
	// From the start, so that a SIGHUP while starting waits for the reload
	// instead of ending the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if err := gateway.CheckServable(cfg); err != nil {
		log.Error(err.Error())
		return ExitConfig
	}
	opts.Logger, opts.Level = log, &level
	g, err := gateway.Build(ctx, cfg, opts)
	if err != nil {
		log.Error("start", "err", err)
		return ExitFail
	}
	defer g.Close() // last: the store closes after everything that writes to it
	if err := g.Serve(ctx, hup); err != nil {
		return ExitFail // Serve logged it
	}
	return ExitOK
}

// chat runs a terminal conversation. It ends at end of input or on
// interrupt.
func chat(ctx context.Context, cfg *config.Config, opts gateway.Options, stdio Stdio) int {
	// Logs would garble the conversation: only warnings and errors, on stderr.
	log, err := newLogger(cfg, stdio.Err, "warn")
	if err != nil {
		fmt.Fprintf(stdio.Err, "switchboard: %v\n", err)
		return ExitConfig
	}
	opts.Logger = log
	g, err := gateway.Build(ctx, cfg, opts)
	if err != nil {
		fmt.Fprintf(stdio.Err, "switchboard: %v\n", err)
		return ExitFail
	}
	defer g.Close()
	if err := g.Chat(ctx, stdio.In, stdio.Out); err != nil {
		fmt.Fprintf(stdio.Err, "switchboard: %v\n", err)
		return ExitFail
	}
	return ExitOK
}

// newLogger builds the process logger with every configured secret
// redacted, at minLevel or above.
func newLogger(cfg *config.Config, w io.Writer, minLevel string) (*slog.Logger, error) {
	level := cfg.Log.Level
	if minLevel != "" && levelRank(level) < levelRank(minLevel) {
		level = minLevel
	}
	return logging.New(w, level, cfg.Log.Format, cfg.Secrets())
}

func levelRank(l string) int {
	switch l {
	case "debug":
		return 0
	case "info":
		return 1
	case "warn":
		return 2
	}
	return 3
}
