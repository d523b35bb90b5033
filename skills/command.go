package skills

// Kind command: a program run in the workspace with templated arguments,
// never through a shell.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/confine"
	"github.com/switchboard-gateway/switchboard/internal/sandbox"
)

const (
	// defaultCommandTimeout matches config's tools.command.timeout default.
	defaultCommandTimeout = 30 * time.Second
	// tailBytes is how much of a command's output is kept for its error.
	tailBytes = 2000
)

// CommandPolicy governs command tools (from config tools.command.*).
type CommandPolicy struct {
	Enabled bool
	// Workspace is the only directory commands run in and may name paths
	// in; absolute or relative to the working directory, created (0o750)
	// when missing and Enabled.
	Workspace string
	// Timeout per call; 0 means 30s. A tool's own smaller timeout wins.
	Timeout time.Duration
	// MaxOutputChars caps stdout+stderr; 0 means 20000. A tool's own
	// smaller max_response_chars wins.
	MaxOutputChars int
	// ConnectPorts are the TCP ports commands may connect to; none by
	// default (the sandbox enforces it where Landlock has network rules).
	ConnectPorts []uint16
}

// CommandPolicyOf is the policy of the configuration's tools.command.
func CommandPolicyOf(c config.CommandTool) CommandPolicy {
	p := CommandPolicy{Enabled: c.Enabled, Workspace: c.Workspace, Timeout: c.Timeout, MaxOutputChars: c.MaxOutputChars}
	for _, port := range c.ConnectPorts {
		if port > 0 && port <= 65535 { // config.Validate refuses others
			p.ConnectPorts = append(p.ConnectPorts, uint16(port))
		}
	}
	return p
}

// errCommandsDisabled is what a command tool answers while the operator has
// not enabled command tools.
var errCommandsDisabled = errors.New("command tools are disabled; the operator can enable them with tools.command.enabled")

type commandTool struct {
	name     string
	enabled  bool
	argv0    string // the program as written
	program  string // resolved at build time
	lookErr  error
	safe     string // the program's safe-mode option, put first ("" for none)
	argv     []tmpl // argv[1:]
	optsEnd  int    // index in argv after a literal "--" (len(argv) when none)
	ws       confine.Dir
	environ  []string
	readOnly []string // what the command line names outside the workspace
	ports    []uint16 // TCP ports it may connect to
	timeout  time.Duration
	maxChars int
}

func (b *defBuilder) command(p CommandPolicy) (func(context.Context, json.RawMessage) (string, error), int, error) {
	d := b.def
	c := &commandTool{name: d.Name, argv0: firstOf(d.Argv), enabled: p.Enabled, timeout: p.Timeout, maxChars: p.MaxOutputChars,
		ports: p.ConnectPorts}
	if c.timeout <= 0 {
		c.timeout = defaultCommandTimeout
	}
	if d.Timeout > 0 && d.Timeout < c.timeout {
		c.timeout = d.Timeout
	}
	if c.maxChars <= 0 {
		c.maxChars = defaultMaxChars
	}
	if d.MaxResponseChars > 0 && d.MaxResponseChars < c.maxChars {
		c.maxChars = d.MaxResponseChars
	}
	switch {
	case len(d.Argv) == 0:
		b.add("argv", "required: the program and its arguments, such as [grep, -n, \"{pattern}\", notes.txt]")
		return nil, 0, nil
	case strings.TrimSpace(d.Argv[0]) == "":
		b.add("argv[0]", "the program is empty")
	case strings.ContainsAny(d.Argv[0], "{}"):
		b.add("argv[0]", "the program cannot be a placeholder; name it literally")
	}
	c.optsEnd = len(d.Argv) - 1
	for i, a := range d.Argv[1:] {
		t, _ := b.template(fmt.Sprintf("argv[%d]", i+1), a, false)
		c.argv = append(c.argv, t)
		if a == "--" && c.optsEnd == len(d.Argv)-1 {
			c.optsEnd = i + 1
		}
	}
	if len(b.errs) > 0 || !p.Enabled {
		return c.call, c.maxChars, nil
	}

	if strings.TrimSpace(p.Workspace) == "" {
		return nil, 0, errors.New("tools.command.workspace is empty; set the directory command tools run in")
	}
	ws, err := filepath.Abs(p.Workspace)
	if err != nil {
		return nil, 0, fmt.Errorf("tools.command.workspace: %w", err)
	}
	if err := os.MkdirAll(ws, 0o750); err != nil {
		return nil, 0, fmt.Errorf("tools.command.workspace: create: %w", err)
	}
	if c.ws, err = confine.At(ws); err != nil {
		return nil, 0, fmt.Errorf("tools.command.workspace: %w", err)
	}
	dir := c.ws.Path()
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	// An allowlist: the gateway's own environment never reaches a command.
	// The sandbox adds HOME and TMPDIR: a private folder per run, outside
	// the workspace, so nothing the file tools write is read as a dotfile.
	c.environ = []string{"PATH=" + path, "LANG=C.UTF-8"}

	prog := d.Argv[0]
	if strings.ContainsRune(prog, filepath.Separator) && !filepath.IsAbs(prog) {
		prog = filepath.Join(dir, prog) // a script in the workspace
	}
	if c.program, c.lookErr = exec.LookPath(prog); c.lookErr == nil {
		if abs, err := filepath.Abs(c.program); err == nil {
			c.program = abs
		}
		c.safe = safeMode(d.Argv[0], c.program, d.Argv[1:])
	}
	for _, t := range c.argv {
		if pre := t.prefix(); filepath.IsAbs(pre) {
			if t.hasPlaceholders() {
				pre = filepath.Dir(pre + "x") // the folder the placeholder names a file in
			}
			c.readOnly = append(c.readOnly, pre)
		}
	}
	return c.call, c.maxChars, nil
}

func (c *commandTool) call(parent context.Context, raw json.RawMessage) (string, error) {
	if !c.enabled {
		return "", errCommandsDisabled
	}
	if c.lookErr != nil {
		return "", fmt.Errorf("program not found: %w", c.lookErr)
	}
	args, err := parseArgs(raw)
	if err != nil {
		return "", err
	}
	argv := make([]string, len(c.argv))
	for i, t := range c.argv {
		if argv[i], err = c.renderArg(t, args, i < c.optsEnd); err != nil {
			return "", err
		}
	}

	ctx, cancel := context.WithTimeout(parent, c.timeout)
	defer cancel()
	args0 := []string{c.argv0} // as written, for the program's messages
	if c.safe != "" {
		args0 = append(args0, c.safe)
	}
	out := &outputCap{max: c.maxChars}
	// The sandbox stops the program and every process it started, setsid
	// ones included, when it ends or ctx is done, and says what it stopped.
	oc, err := sandbox.Run(ctx, sandbox.Spec{Program: c.program, Args: append(args0, argv...), Dir: c.ws.Path(),
		Env: c.environ, ReadOnly: c.readOnly, ConnectPorts: c.ports}, out, out)
	if err != nil {
		return "", fmt.Errorf("run %s: %w", c.name, err)
	}

	switch {
	case parent.Err() != nil:
		return "", fmt.Errorf("%s was stopped%s: %w", c.name, stopped(oc), parent.Err())
	case ctx.Err() != nil:
		return "", fmt.Errorf("%s timed out after %s and was stopped%s; output so far: %s", c.name, c.timeout, stopped(oc), out.tail())
	case oc.Signal != "":
		return "", fmt.Errorf("%s failed with signal %s%s; output: %s", c.name, oc.Signal, stopped(oc), out.tail())
	case oc.ExitCode != 0:
		return "", fmt.Errorf("%s failed with exit status %d%s; output: %s", c.name, oc.ExitCode, stopped(oc), out.tail())
	case !oc.Confirmed:
		return out.String() + "\n[processes it started could not all be confirmed stopped]", nil
	case oc.Leftovers == 1:
		return out.String() + "\n[a background process it started was stopped]", nil
	case oc.Leftovers > 1:
		return out.String() + fmt.Sprintf("\n[%d background processes it started were stopped]", oc.Leftovers), nil
	}
	return out.String(), nil
}

// stopped says what else was stopped with a command: the processes it
// started, or that this could not be confirmed.
func stopped(oc sandbox.Outcome) string {
	switch {
	case !oc.Confirmed:
		return " (processes it started could not all be confirmed stopped)"
	case oc.Leftovers == 1:
		return ", with 1 process it started"
	case oc.Leftovers > 1:
		return fmt.Sprintf(", with %d processes it started", oc.Leftovers)
	}
	return ""
}

// renderArg substitutes one argv element. Every argument value, and the
// element as a whole, must stay inside the workspace; a value that would
// start the element with "-" is refused where it could be read as an option.
func (c *commandTool) renderArg(t tmpl, args map[string]any, options bool) (string, error) {
	s, err := t.expand(func(seg segment) (string, error) {
		v := argText(args[seg.param])
		if why := c.escapes(v); why != "" {
			return "", fmt.Errorf("argument %s: %q %s; command arguments must stay inside the workspace", seg.param, v, why)
		}
		return v, nil
	})
	if err != nil || !t.hasPlaceholders() {
		return s, err
	}
	pre := t.prefix()
	if options && pre == "" && strings.HasPrefix(s, "-") {
		return "", fmt.Errorf("argument %q starts with - and could be read as an option; refused", s)
	}
	why := ""
	if filepath.IsAbs(pre) {
		// The skill names a fixed directory; only .. could leave it.
		if confine.HasDotDot(s) {
			why = "contains a .. path element"
		}
	} else {
		why = c.escapes(s)
	}
	if why != "" {
		return "", fmt.Errorf("argument %q %s; command arguments must stay inside the workspace", s, why)
	}
	return s, nil
}

func firstOf(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	return argv[0]
}

// escapes says why the value v, taken as a path in the workspace, would
// leave it ("" when it would not).
func (c *commandTool) escapes(v string) string {
	switch err := c.ws.Check(v); {
	case err == nil:
		return ""
	case errors.Is(err, confine.ErrBroken):
		return "cannot be resolved (a broken symlink?)"
	case errors.Is(err, confine.ErrOutside):
		return "resolves outside the workspace"
	default: // a NUL byte, an absolute path, a .. element
		return err.Error()
	}
}

// outputCap keeps the start of a command's output up to max characters,
// counts the rest, and keeps the last bytes for error messages. exec calls
// Write from one goroutine at a time when Stdout and Stderr are the same.
type outputCap struct {
	max   int
	head  []byte
	chars int // UTF-8 sequence starts seen
	total int // bytes seen
	last  []byte
}

func (w *outputCap) Write(p []byte) (int, error) {
	for _, c := range p {
		if c&0xC0 != 0x80 {
			w.chars++
		}
		if w.chars <= w.max {
			w.head = append(w.head, c)
		}
	}
	w.total += len(p)
	if len(p) >= tailBytes {
		w.last = append(w.last[:0], p[len(p)-tailBytes:]...)
	} else {
		w.last = append(w.last, p...)
		if len(w.last) > 2*tailBytes {
			w.last = append(w.last[:0], w.last[len(w.last)-tailBytes:]...)
		}
	}
	return len(p), nil
}

// String is the capped output with a note on what was cut.
func (w *outputCap) String() string {
	s := strings.ToValidUTF8(string(w.head), "\uFFFD")
	if w.chars > w.max {
		s += fmt.Sprintf("\n[truncated: %d more characters]", w.chars-w.max)
	}
	return s
}

// tail is the end of the output, for errors.
func (w *outputCap) tail() string {
	if w.total == 0 {
		return "(none)"
	}
	b := w.last
	if len(b) > tailBytes {
		b = b[len(b)-tailBytes:]
	}
	cut := w.total > len(b)
	for cut && len(b) > 0 && b[0]&0xC0 == 0x80 {
		b = b[1:]
	}
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
	if cut {
		s = "…" + s
	}
	return s
}
