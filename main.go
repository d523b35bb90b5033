// Command switchboard is a chat-channel gateway to one AI agent: people talk
// to it from Telegram, Discord or a terminal; it answers through any
// OpenAI-compatible model server and remembers conversations in SQLite.
//
//	switchboard [serve]   run every enabled channel until SIGINT/SIGTERM
//	switchboard chat      talk to the agent in this terminal
//	switchboard check     validate the config and print what would run
//	switchboard pairing   list or approve access requests (pairing codes)
//	switchboard schedule  list or cancel scheduled jobs
//	switchboard skills    list, apply or revert proposed skill instructions
//	switchboard doctor    check config, store, model and channel tokens; say what to fix
//	switchboard version   print the version
//
// Every command takes --config PATH (default ./config.yaml; without that file,
// built-in defaults plus environment variables are used).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	"switchboard/config"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// Exit codes.
const (
	exitOK     = 0
	exitFail   = 1 // the command ran and failed
	exitConfig = 2 // bad usage or configuration
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopProfile := cpuProfile(os.Getenv("SWITCHBOARD_CPUPROFILE"))
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stopProfile()
	memProfile(os.Getenv("SWITCHBOARD_MEMPROFILE"))
	os.Exit(code)
}

// memProfile writes a heap profile to path (%p: the process id), if path is
// set: its alloc_space and alloc_objects views are where the run allocated.
func memProfile(path string) {
	if path == "" {
		return
	}
	f, err := os.Create(strings.ReplaceAll(path, "%p", strconv.Itoa(os.Getpid())))
	if err == nil {
		err = errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "switchboard: SWITCHBOARD_MEMPROFILE: %v\n", err)
	}
}

// cpuProfile writes a CPU profile of the whole run to path (for `go tool
// pprof`), if path is set: a developer's tool for the benchmarks.
func cpuProfile(path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(strings.ReplaceAll(path, "%p", strconv.Itoa(os.Getpid())))
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "switchboard: SWITCHBOARD_CPUPROFILE: %v\n", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

const usage = `usage: switchboard [command] [--config PATH]

commands:
  serve     run every enabled channel until interrupted (default)
  chat      talk to the agent in this terminal
  check     validate the configuration and print what would run
  pairing   list | approve CODE | revoke CHANNEL USER_ID: access requests
  schedule  list | cancel ID: scheduled reminders and tasks
  skills    proposals [apply ID | revert NAME]: learned skill instructions
  doctor    check the config, store, model server and channel tokens
  version   print the version

--config PATH   configuration file (default ./config.yaml; if that file does
                not exist, built-in defaults and environment variables apply:
                OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL, ...)
`

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("switchboard "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	cfgPath := fs.String("config", "", "configuration file (default ./config.yaml)")
	// Flags may come before or after positional arguments.
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitConfig
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(positional) > 0 && cmd != "pairing" && cmd != "skills" && cmd != "schedule" {
		fmt.Fprintf(stderr, "switchboard: unexpected argument %q\n\n%s", positional[0], usage)
		return exitConfig
	}
	switch cmd {
	case "version":
		fmt.Fprintf(stdout, "switchboard %s\n", version)
		return exitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "check", "serve", "chat", "pairing", "skills", "schedule":
	case "doctor":
		return doctor(ctx, *cfgPath, stdout) // it reports configuration problems itself
	default:
		fmt.Fprintf(stderr, "switchboard: unknown command %q\n\n%s", cmd, usage)
		return exitConfig
	}

	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard: %v\n", err)
		return exitConfig
	}
	switch cmd {
	case "check":
		return check(cfg, stdout)
	case "chat":
		return chat(ctx, cfg, stdin, stdout, stderr)
	case "pairing":
		return pairing(ctx, cfg, positional, stdout, stderr)
	case "schedule":
		return scheduleCommand(ctx, cfg, positional, stdout, stderr)
	case "skills":
		return skillsCommand(ctx, cfg, positional, stdout, stderr)
	default:
		return serve(ctx, cfg, *cfgPath, stderr)
	}
}

// loadConfig loads and validates the configuration.
func loadConfig(path string) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	return cfg, nil
}
