// Package console is the terminal channel: it reads lines from an input and
// prints the bot's replies, as the model writes them, its tool activity
// (one dim line per tool call) and errors to an output. It is what
// `switchboard chat` talks through.
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
	// Whole prints each reply whole when it is sent, instead of as the
	// model writes it (channels.console.stream_preview: false).
	Whole bool
}

// Adapter is the terminal channel.
type Adapter struct {
	o     Options
	mu    sync.Mutex // serialises writes to Out; guards line
	line  liveLine   // the reply being printed as it streams
	seq   atomic.Int64
	start int64
}

// liveLine is a reply printed as the model writes it: the text of a
// send_message call (agent.EventReplyDelta), or, on a terminal (Color), the
// model's plain text (agent.EventTextDelta), which may turn out to be
// interim text beside tool calls. When the message is sent, a line that
// showed it already is only ended; one that showed something else (a call
// refused, interim text) is marked "not sent" and the message is printed.
type liveLine struct {
	open   bool
	callID string // the send_message call shown; "" for plain text
	text   strings.Builder
	closed map[string]bool // calls whose line ended: later fragments are not shown
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

// RepliesInProcess implements channels.InProcessReplier: replies go to this
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

// Send implements channels.Channel: it prints the reply, or ends the line
// that showed it as it streamed.
func (a *Adapter) Send(_ context.Context, m channels.Outbound) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	text := strings.TrimSpace(m.Text)
	if a.line.open && strings.TrimSpace(a.line.text.String()) == text {
		a.endLineLocked("")
	} else {
		a.endLineLocked(notSent)
		fmt.Fprintf(a.o.Out, "\r%s %s\n", a.label(), text)
	}
	a.promptLocked()
	return strconv.FormatInt(time.Now().UnixNano(), 10), nil
}

// notSent marks a line that showed text the turn did not send.
const notSent = " (not sent)"

func (a *Adapter) label() string {
	if a.o.Color {
		return "\x1b[1;36mbot>\x1b[0m"
	}
	return "bot>"
}

// stream prints a fragment of the reply being written: of send_message
// call callID, or of the model's plain text when callID is "".
func (a *Adapter) stream(callID, frag string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := &a.line
	switch {
	case l.closed[callID] && callID != "":
		return
	case l.open && l.callID != callID && callID == "":
		return // plain text while a call is shown: printed if sent
	case l.open && l.callID != callID:
		if l.callID != "" {
			return // another call, streamed alongside: printed when sent
		}
		a.endLineLocked(notSent) // the plain text was interim: a call follows
	}
	if !l.open {
		frag = strings.TrimLeft(frag, " \t\r\n")
		if frag == "" {
			return
		}
		l.open, l.callID = true, callID
		l.text.Reset()
		fmt.Fprintf(a.o.Out, "\r%s ", a.label())
	}
	l.text.WriteString(frag)
	fmt.Fprint(a.o.Out, frag)
}

// endLineLocked ends the streamed line, if one is open, with note.
func (a *Adapter) endLineLocked(note string) {
	l := &a.line
	if !l.open {
		return
	}
	if note != "" && a.o.Color {
		note = "\x1b[2m" + note + "\x1b[0m"
	}
	fmt.Fprintf(a.o.Out, "%s\n", note)
	if l.callID != "" {
		if l.closed == nil {
			l.closed = map[string]bool{}
		}
		l.closed[l.callID] = true
	}
	l.open = false
}

// endLine ends the line showing call callID ("" for plain text), if it is
// the one open, as not sent.
func (a *Adapter) endLine(callID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.line.open && a.line.callID == callID {
		a.endLineLocked(notSent)
	}
}

// TurnEvent implements channels.TurnWatcher: it shows the reply as it
// streams, tool activity and failures.
func (a *Adapter) TurnEvent(_ channels.Inbound, ev agent.Event) {
	switch ev.Kind {
	case agent.EventReplyDelta:
		if !a.o.Whole {
			a.stream(ev.CallID, ev.Text)
		}
	case agent.EventTextDelta:
		if a.o.Color && !a.o.Whole { // on a terminal, where "not sent" can follow it
			a.stream("", ev.Text)
		}
	case agent.EventInterimText, agent.EventRetry:
		a.endLine("") // plain text beside tool calls, or sent back to work
	case agent.EventToolEnd:
		if ev.IsError {
			a.endLine(ev.CallID) // a send_message call refused: not sent
		}
		status := "ok"
		if ev.IsError {
			status = "error: " + oneLine(ev.Result, 80)
		}
		a.dim(fmt.Sprintf("  · %s(%s) → %s (%s)", ev.Tool, oneLine(ev.Args, 60), status, ev.Duration.Round(time.Millisecond)))
	case agent.EventCompactionEnd:
		a.dim(fmt.Sprintf("  · compacted the conversation: ~%d → ~%d tokens", ev.TokensBefore, ev.TokensAfter))
	case agent.EventDone:
		a.mu.Lock()
		a.endLineLocked(notSent) // text the turn did not send (after a reply, NO_REPLY)
		a.line.closed = nil
		a.mu.Unlock()
		if ev.Err != "" && ev.StopReason.Class() == agent.ClassFailed {
			switch {
			case a.o.Verbose:
				a.errorf("turn failed (%s): %s", ev.StopReason, oneLine(ev.Err, 200))
			case ev.StopReason == agent.StopLLMError || ev.StopReason == agent.StopModelUnavailable:
				a.errorf("the model server did not answer (%s); `switchboard doctor` checks it, the details are in the log", lastCause(ev.Err))
			default:
				a.errorf("turn failed (%s); the details are in the log", ev.StopReason)
			}
			a.prompt() // the reply's prompt came before this line
		}
	}
}

func (a *Adapter) dim(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.breakLineLocked()
	if a.o.Color {
		s = "\x1b[2m" + s + "\x1b[0m"
	}
	fmt.Fprintf(a.o.Out, "\r%s\n", s)
}

func (a *Adapter) errorf(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.breakLineLocked()
	s := "error: " + fmt.Sprintf(format, args...)
	if a.o.Color {
		s = "\x1b[31m" + s + "\x1b[0m"
	}
	fmt.Fprintf(a.o.Out, "\r%s\n", s)
}

// breakLineLocked ends a streamed line before another line is printed (a
// tool that ran alongside); the reply it showed is printed in full when it
// is sent.
func (a *Adapter) breakLineLocked() {
	if a.line.open {
		a.endLineLocked(" …")
	}
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

// lastCause is the innermost cause of an error chain as text ("dial tcp
// 127.0.0.1:9: connect: connection refused" → "connection refused"), for a
// terminal line that says what went wrong without the whole chain.
func lastCause(err string) string {
	err = oneLine(err, 400)
	if i := strings.LastIndex(err, ": "); i >= 0 && i+2 < len(err) {
		err = err[i+2:]
	}
	return oneLine(err, 120)
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

var (
	_ channels.Channel          = (*Adapter)(nil)
	_ channels.TurnWatcher      = (*Adapter)(nil)
	_ channels.InProcessReplier = (*Adapter)(nil)
)
