package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/gateway"
	"github.com/switchboard-gateway/switchboard/internal/logging"
	"github.com/switchboard-gateway/switchboard/internal/sandbox"
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
	harden(log)
	// From the start, so that a SIGHUP while starting waits for the reload
	// instead of ending the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if err := gateway.CheckServable(cfg); err != nil {
		log.Error(err.Error())
		return ExitConfig
	}
	opts.Logger, opts.Level, opts.EarlyChannels = log, &level, true
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

// harden makes the gateway process non-dumpable before it holds a secret
// a command could read: a process of its uid (a command tool's program)
// cannot read its /proc environ or memory then.
func harden(log *slog.Logger) {
	if err := sandbox.HardenGateway(); err != nil {
		log.Warn("the gateway stays dumpable", "err", err)
	}
}

// chat runs a terminal conversation. It ends at end of input or on
// interrupt. Log lines would break into the conversation, so they go to
// the chat's log file (chatLogPath), or with verbose to stderr.
func chat(ctx context.Context, cfg *config.Config, opts gateway.Options, stdio Stdio, verbose bool) int {
	var (
		log   *slog.Logger
		where string
		err   error
	)
	if verbose {
		log, err = newLogger(cfg, stdio.Err, "")
		where = "printed here (--verbose)"
	} else {
		var f *os.File
		path := chatLogPath(cfg)
		if f, err = openLog(path); err != nil {
			// Without the file, only errors, on stderr.
			fmt.Fprintf(stdio.Err, "switchboard: %v; only errors are logged, here\n", err)
			log, err = newLogger(cfg, stdio.Err, "error")
			where = "not kept: only errors print here (--verbose shows every log line)"
		} else {
			defer f.Close()
			log, err = newLogger(cfg, f, "")
			where = path + " (--verbose prints them here)"
		}
	}
	if err != nil {
		fmt.Fprintf(stdio.Err, "switchboard: %v\n", err)
		return ExitConfig
	}
	harden(log)
	opts.Logger = log
	g, err := gateway.Build(ctx, cfg, opts)
	if err != nil {
		fmt.Fprintf(stdio.Err, "switchboard: %v\n", err)
		return ExitFail
	}
	defer g.Close()
	if err := g.Chat(ctx, gateway.ChatOptions{In: stdio.In, Out: stdio.Out, Logs: where, Verbose: verbose}); err != nil {
		fmt.Fprintf(stdio.Err, "switchboard: %v\n", err)
		return ExitFail
	}
	return ExitOK
}

// chatLogName is the chat's log file, next to a SQLite store.
const chatLogName = "switchboard-chat.log"

// chatLogPath is where `chat` logs: next to the SQLite database (where the
// operator already keeps the bot's state), or on PostgreSQL in the user's
// state directory ($XDG_STATE_HOME/switchboard, ~/.local/state/switchboard).
func chatLogPath(cfg *config.Config) string {
	if cfg.Store.Driver != config.StorePostgres && cfg.Store.Path != "" {
		return filepath.Join(filepath.Dir(cfg.Store.Path), chatLogName)
	}
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return chatLogName // the current directory
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "switchboard", "chat.log")
}

// openLog opens a log file for appending, making its directory.
func openLog(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("chat log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("chat log: %w", err)
	}
	return f, nil
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
