// Package logging builds the process's slog logger: text or JSON, a level,
// and a handler that redacts secrets (tokens, API keys) from every message
// and attribute, wherever they came from (library errors embed URLs).
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// New returns a logger writing to w. level is debug|info|warn|error and
// format text|json; secrets are replaced by "[redacted]" in all output.
func New(w io.Writer, level, format string, secrets []string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("logging: level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch format {
	case "", "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("logging: format %q: use text or json", format)
	}
	return slog.New(Redact(h, secrets)), nil
}

// Redact wraps h so that every occurrence of a secret is replaced.
func Redact(h slog.Handler, secrets []string) slog.Handler {
	var pairs []string
	for _, s := range secrets {
		if len(s) >= 4 { // a shorter "secret" would redact ordinary words
			pairs = append(pairs, s, "[redacted]")
		}
	}
	if len(pairs) == 0 {
		return h
	}
	return &redactor{h: h, r: strings.NewReplacer(pairs...)}
}

type redactor struct {
	h slog.Handler
	r *strings.Replacer
}

func (d *redactor) Enabled(ctx context.Context, l slog.Level) bool { return d.h.Enabled(ctx, l) }

func (d *redactor) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, d.r.Replace(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(d.attr(a))
		return true
	})
	return d.h.Handle(ctx, out)
}

func (d *redactor) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, d.r.Replace(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, x := range g {
			out[i] = d.attr(x)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, d.r.Replace(err.Error()))
		}
		return slog.String(a.Key, d.r.Replace(fmt.Sprint(v.Any())))
	}
	return slog.Attr{Key: a.Key, Value: v}
}

func (d *redactor) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = d.attr(a)
	}
	return &redactor{h: d.h.WithAttrs(red), r: d.r}
}

func (d *redactor) WithGroup(name string) slog.Handler {
	return &redactor{h: d.h.WithGroup(name), r: d.r}
}
