package logging

import (
	"fmt"
	"io"
	"log/slog"
)

// NewLeveled is New with a level that can change while the process runs
// (a SIGHUP reload): the logger filters on lv as it is at each call.
func NewLeveled(w io.Writer, lv *slog.LevelVar, format string, secrets []string) (*slog.Logger, error) {
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

// ParseLevel reads debug, info, warn or error.
func ParseLevel(level string) (slog.Level, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return 0, fmt.Errorf("logging: level %q: use debug, info, warn or error", level)
	}
	return lv, nil
}
