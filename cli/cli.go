// Package cli is the switchboard command line: it parses the arguments,
// prints the usage, runs the admin commands (backup, check, doctor,
// pairing, schedule, skills, version), hands serve and chat to the gateway package,
// and maps what they return to the exit code.
//
//	switchboard [serve]   run every enabled channel until SIGINT/SIGTERM
//	switchboard init      write a first config.yaml, asking or from flags
//	switchboard chat      talk to the agent in this terminal (--verbose: logs here)
//	switchboard check     validate the config and print what would run
//	switchboard pairing   list or approve access requests (pairing codes)
//	switchboard schedule  list or cancel scheduled jobs
//	switchboard skills    list, apply or revert proposed skill instructions
//	switchboard backup    copy the SQLite store consistently, also while serving
//	switchboard doctor    check config, store, model and channel tokens; say what to fix
//	switchboard version   print the version
//	switchboard healthcheck  ask the running gateway's /healthz (container health checks)
//
// Every command takes --config PATH, before or after it. Without it, the
// first of ./config.yaml, the user's configuration directory and
// /etc/switchboard/config.yaml is read (see lookupConfig); without any,
// built-in defaults plus environment variables are used. --version (-v)
// prints the version.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/gateway"
)

// Exit codes.
const (
	ExitOK     = 0
	ExitFail   = 1 // the command ran and failed
	ExitConfig = 2 // bad usage or configuration
)

// Stdio is where a command reads and writes.
type Stdio struct {
	In       io.Reader
	Out, Err io.Writer
}

// usage is the command line's help; the init flags of the chat platforms
// come from their definitions (see initFlagsUsage). It is made when first
// asked for: building it walks every channel's configuration, which every
// start of serve would otherwise pay for before main.
var usage = sync.OnceValue(func() string {
	return fmt.Sprintf(usageFormat, initChannelFlagsUsage(), nonInteractiveUsage())
})

const usageFormat = `usage: switchboard [--config PATH] [command] [arguments]

commands:
  serve     run every enabled channel until interrupted (default)
  init      write a first configuration (asks, or takes the init flags)
  chat      talk to the agent in this terminal; its log lines go to
            switchboard-chat.log next to the store (on PostgreSQL:
            ~/.local/state/switchboard/chat.log), --verbose prints them
  check     validate the configuration and print what would run
  pairing   list | approve CODE | deny CODE | revoke CHANNEL USER_ID: access requests
  schedule  list | cancel ID: scheduled reminders and tasks
  skills    proposals [apply ID | revert NAME]: learned skill instructions
  backup    [PATH]: a consistent copy of the SQLite store, also while serving
            (default: beside it, switchboard.db.backup-YYYYMMDD-HHMMSS)
  doctor    check the config, store (its integrity too; --deep: fully),
            model server and channel tokens
  version   print the version
  healthcheck  ask the running gateway's /healthz (exit 0 when it answers)

--config PATH   configuration file; before or after the command. Default:
                the first of ./config.yaml, ~/.config/switchboard/config.yaml
                and /etc/switchboard/config.yaml; without any, built-in
                defaults and environment variables apply (OPENAI_BASE_URL,
                OPENAI_API_KEY, OPENAI_MODEL, ...). init writes to PATH, or
                to ./config.yaml
--version, -v   print the version
--verbose       chat: print the log lines here instead of the log file

init flags (each question they answer is not asked):
  --model-url URL  --api-key KEY  --model NAME          the model server
%s  --http-listen ADDR   the HTTP API and dashboard (default 127.0.0.1:8080)
%s  --force              replace an existing file
  --no-check           do not check the model server and the tokens
`

// Run runs the command line args (without the program name) of the build
// version and returns the exit code.
func Run(ctx context.Context, version string, args []string, stdio Stdio) int {
	return RunWith(ctx, version, args, stdio, gateway.Options{})
}

// RunWith is Run with more options for the gateway that serve and chat
// build (tests: hooks, store options). Version, Logger, Level and
// ConfigPath are set here.
func RunWith(ctx context.Context, version string, args []string, stdio Stdio, opts gateway.Options) int {
	stdout, stderr := stdio.Out, stdio.Err
	fs := flag.NewFlagSet("switchboard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage()) }
	cfgPath := fs.String("config", "", "configuration file (default ./config.yaml)")
	var showVersion bool
	fs.BoolVar(&showVersion, "version", false, "print the version")
	fs.BoolVar(&showVersion, "v", false, "print the version")
	verbose := fs.Bool("verbose", false, "chat: print the log lines in the terminal instead of the log file")
	deep := fs.Bool("deep", false, "doctor: check every index of the SQLite store against its table too (slower)")
	var initOpts initOptions
	initOpts.register(fs)
	// Flags may come before or after the command and its arguments; the
	// first positional argument is the command.
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return ExitOK
			}
			return ExitConfig
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if showVersion {
		fmt.Fprintf(stdout, "switchboard %s\n", version)
		return ExitOK
	}
	cmd := "serve"
	if len(positional) > 0 {
		cmd, positional = positional[0], positional[1:]
	}
	if f := initOpts.collect(fs); f != "" && cmd != "init" {
		fmt.Fprintf(stderr, "switchboard: --%s is a flag of init, not of %s\n", f, cmd)
		return ExitConfig
	}
	if !configGiven(fs) && cmd != "init" {
		*cfgPath = lookupConfig()
	}
	admin, isAdmin := storeCommandNamed(cmd)
	if len(positional) > 0 && !isAdmin {
		fmt.Fprintf(stderr, "switchboard: unexpected argument %q\n\n%s", positional[0], usage())
		return ExitConfig
	}
	switch cmd {
	case "version":
		fmt.Fprintf(stdout, "switchboard %s\n", version)
		return ExitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage())
		return ExitOK
	case "init":
		return initCommand(ctx, *cfgPath, &initOpts, stdio) // it writes *cfgPath, or ./config.yaml
	case "check", "serve", "chat":
	case "doctor":
		return doctor(ctx, *cfgPath, *deep, stdout) // it reports configuration problems itself
	case "healthcheck":
		return healthcheck(ctx, *cfgPath, stdout, stderr)
	default:
		if !isAdmin {
			fmt.Fprintf(stderr, "switchboard: unknown command %q\n\n%s", cmd, usage())
			return ExitConfig
		}
	}

	load := gateway.LoadConfig
	if isAdmin {
		load = loadStoreConfig // the model's and the bots' secrets are not needed
	}
	cfg, err := load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard: %v\n", err)
		return ExitConfig
	}
	opts.Version, opts.ConfigPath = version, *cfgPath
	switch cmd {
	case "check":
		return check(cfg, *cfgPath, stdout)
	case "chat":
		return chat(ctx, cfg, opts, stdio, *verbose)
	case "serve":
		return serve(ctx, cfg, opts, stderr)
	default:
		return admin.do(ctx, cfg, positional, stdout, stderr)
	}
}

// usageColumn is where the descriptions of the init flags start.
const usageColumn = 56

// initChannelFlagsUsage lists each platform's --NAME-token and --NAME-user
// flags, then their API address flags, for the usage text.
func initChannelFlagsUsage() string {
	var b strings.Builder
	var api []string
	for _, d := range initChannels() {
		line := fmt.Sprintf("  --%s-token TOKEN  --%s-user ID", d.Name, d.Name)
		desc := d.Title
		if d.Init.UsageNote != "" {
			desc += " " + d.Init.UsageNote
		}
		for _, m := range d.Init.More {
			arg := "TOKEN"
			if m.Plain {
				arg = "ID"
			}
			more := fmt.Sprintf("--%s-%s %s", d.Name, m.Flag, arg)
			if last := desc[strings.LastIndex(desc, "\n")+1:]; len(last)+2+len(more) > 40 {
				desc += ",\n" + strings.Repeat(" ", usageColumn) + more // wrapped under the description
				continue
			}
			desc += ", " + more
		}
		fmt.Fprintf(&b, "%-*s %s\n", usageColumn-1, line, desc)
		api = append(api, fmt.Sprintf("--%s-%s URL", d.Name, d.Init.APIFlag))
	}
	if len(api) > 0 {
		line := "  " + strings.Join(api, "  ")
		if len(line) >= usageColumn-1 { // too long for the column: the description below
			line += "\n" + strings.Repeat(" ", usageColumn-1)
		}
		fmt.Fprintf(&b, "%-*s %s\n", usageColumn-1, line, "other API servers")
	}
	return b.String()
}

// nonInteractiveUsage is --non-interactive's line, naming the environment
// variables init reads, wrapped under its description.
func nonInteractiveUsage() string {
	const indent = "                       "
	words := []string{"OPENAI_*,"}
	for _, d := range initChannels() {
		words = append(words, config.FallbackEnv("channels."+d.Name+"."+d.Init.Token())+",")
		for _, m := range d.Init.More {
			if env := config.FallbackEnv("channels." + d.Name + "." + m.Key); env != "" {
				words = append(words, env+",")
			}
		}
	}
	words[len(words)-1] = strings.TrimSuffix(words[len(words)-1], ",") + ")"
	line := "  --non-interactive    ask nothing (flags, then"
	var b strings.Builder
	for _, w := range words {
		if len(line)+1+len(w) > 80 {
			b.WriteString(line + "\n")
			line = indent + w
			continue
		}
		line += " " + w
	}
	b.WriteString(line + "\n")
	return b.String()
}
