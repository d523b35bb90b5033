package mcpclient

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"sync"
)

// maxStderrLine caps one logged line of a child's stderr, so a server that
// writes megabytes without a newline cannot grow the buffer without bound.
const maxStderrLine = 4096

// stderrLogger is the stderr of a stdio server: it logs each line at debug
// level and never echoes anything to our own stdout or stderr.
type stderrLogger struct {
	log *slog.Logger

	mu  sync.Mutex
	buf []byte
}

// Write implements io.Writer; os/exec calls it from its copying goroutine.
// A line longer than maxStderrLine is logged in pieces of that size.
func (w *stderrLogger) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	rest := w.buf
	for {
		i := bytes.IndexByte(rest, '\n')
		switch {
		case i >= 0 && i <= maxStderrLine:
			w.emit(rest[:i])
			rest = rest[i+1:]
		case len(rest) >= maxStderrLine:
			w.emit(rest[:maxStderrLine])
			rest = rest[maxStderrLine:]
		default:
			w.buf = append(w.buf[:0], rest...)
			return len(p), nil
		}
	}
}

// flush logs a last line that did not end in a newline.
func (w *stderrLogger) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(w.buf)
		w.buf = w.buf[:0]
	}
}

func (w *stderrLogger) emit(line []byte) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	w.log.LogAttrs(context.Background(), slog.LevelDebug, "mcp server stderr", slog.String("line", string(line)))
}

// inheritedEnv names the only variables a stdio server inherits from our
// environment: enough to find programs, a home and temporary directory and a
// locale, and none of the credentials our own process may hold.
var inheritedEnv = []string{"PATH", "HOME", "LANG", "TMPDIR"}

// childEnv is the environment of a stdio server: the inherited variables
// that are set, then the server's own KEY=value entries, which win on a
// clash (os/exec keeps the last value of a duplicated key).
func childEnv(lookup func(string) (string, bool), extra []string) []string {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	env := make([]string, 0, len(inheritedEnv)+len(extra))
	for _, k := range inheritedEnv {
		if v, ok := lookup(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, extra...)
}
