// Package console is the terminal channel: it reads lines from an input and
// prints the bot's replies, its tool activity (one dim line per tool call)
// and errors to an output. It is what `switchboard chat` talks through.
package console

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
)

// ChatID is the console's single chat.
const ChatID = "terminal"

// Options configure the console.
type Options struct {
	In    io.Reader
	Out   io.Writer
	User  string // the local user's id (and name)
	Color bool   // ANSI colours (for a terminal)
	// Verbose shows why a turn failed (the error chain); otherwise only
	// that it failed, the details being in the log.
	Verbose bool
	// Logger gets the errors the terminal shows as a plain sentence; nil
	// discards them.
	Logger *slog.Logger
}

// Adapter is the terminal channel.
type Adapter struct {
	o     Options
	mu    sync.Mutex // serialises writes to Out
	seq   atomic.Int64
	start int64
}

// New returns a console adapter.
func New(o Options) *Adapter {
	if o.In == nil {
		o.In = os.Stdin
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.User == "" {
		o.User = "local"
	}
	// Message ids must stay unique across restarts (intake is idempotent by
	// id), so they start from the clock.
	return &Adapter{o: o, start: time.Now().UnixNano()}
}

// IsTerminal reports whether f is a character device (a terminal).
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Name implements channels.Channel.
func (a *Adapter) Name() string { return "console" }

// RepliesInProcess implements router.InProcessReplier: replies go to this
// terminal.
func (a *Adapter) RepliesInProcess() bool { return true }

// Run reads lines until the input ends (returns nil) or ctx ends.
func (a *Adapter) Run(ctx context.Context, sink channels.Sink) error {
	lines := make(chan string)
	errc := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(a.o.In)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		errc <- sc.Err()
	}()
	a.prompt()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			if err != nil {
				return fmt.Errorf("console: read input: %w", err)
			}
			if a.o.Color {
				a.mu.Lock()
				fmt.Fprintln(a.o.Out) // end the prompt line at Ctrl-D
				a.mu.Unlock()
			}
			return nil
		case line := <-lines:
			text := strings.TrimSpace(line)
			if text == "" {
				a.prompt()
				continue
			}
			in := channels.Inbound{
				Channel: "console", ChatID: ChatID, ChatType: channels.DM,
				MessageID: strconv.FormatInt(a.start+a.seq.Add(1), 10),
				UserID:    a.o.User, DisplayName: a.o.User, Text: text, Mentioned: true, Time: time.Now(),
			}
			if err := sink.Deliver(ctx, in); err != nil {
				a.o.Logger.Error("console: could not take a message", "err", err)
				a.errorf("could not take that message; the details are in the log")
			}
		}
	}
}

// Send implements channels.Channel: it prints the reply.
func (a *Adapter) Send(_ context.Context, m channels.Outbound) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	label := "bot>"
	if a.o.Color {
		label = "\x1b[1;36mbot>\x1b[0m"
	}
	fmt.Fprintf(a.o.Out, "\r%s %s\n", label, strings.TrimSpace(m.Text))
	a.promptLocked()
	return strconv.FormatInt(time.Now().UnixNano(), 10), nil
}

// TurnEvent shows tool activity and failures (router.ActivityViewer).
func (a *Adapter) TurnEvent(_ string, ev agent.Event) {
	switch ev.Kind {
	case agent.EventToolEnd:
		status := "ok"
		if ev.IsError {
			status = "error: " + oneLine(ev.Result, 80)
		}
		a.dim(fmt.Sprintf("  · %s(%s) → %s (%s)", ev.Tool, oneLine(ev.Args, 60), status, ev.Duration.Round(time.Millisecond)))
	case agent.EventCompactionEnd:
		a.dim(fmt.Sprintf("  · compacted the conversation: ~%d → ~%d tokens", ev.TokensBefore, ev.TokensAfter))
	case agent.EventDone:
		if ev.Err != "" && ev.StopReason.Class() == agent.ClassFailed {
			if a.o.Verbose {
				a.errorf("turn failed (%s): %s", ev.StopReason, oneLine(ev.Err, 200))
			} else {
				a.errorf("turn failed (%s); the details are in the log", ev.StopReason)
			}
		}
	}
}

func (a *Adapter) dim(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.o.Color {
		s = "\x1b[2m" + s + "\x1b[0m"
	}
	fmt.Fprintf(a.o.Out, "\r%s\n", s)
}

func (a *Adapter) errorf(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := "error: " + fmt.Sprintf(format, args...)
	if a.o.Color {
		s = "\x1b[31m" + s + "\x1b[0m"
	}
	fmt.Fprintf(a.o.Out, "\r%s\n", s)
}

func (a *Adapter) prompt() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.promptLocked()
}

func (a *Adapter) promptLocked() {
	if a.o.Color {
		fmt.Fprint(a.o.Out, "\x1b[1myou>\x1b[0m ")
	}
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

var _ channels.Channel = (*Adapter)(nil)
