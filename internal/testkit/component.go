package testkit

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// LogsAs checks that the logger a package derives from the one it is given
// (as its New does) marks its lines component=want: mk gets a logger that
// writes to a buffer and returns the package's.
func LogsAs(t *testing.T, want string, mk func(*slog.Logger) *slog.Logger) {
	t.Helper()
	var buf bytes.Buffer
	mk(slog.New(slog.NewTextHandler(&buf, nil))).Info("probe")
	line := strings.TrimSpace(buf.String())
	var got []string
	for _, f := range strings.Fields(line) {
		if c, ok := strings.CutPrefix(f, "component="); ok {
			got = append(got, c)
		}
	}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("log line %q: component %q, want exactly %q", line, got, want)
	}
}
