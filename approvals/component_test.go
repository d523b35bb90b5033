package approvals

import (
	"log/slog"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// Its log lines say component=approvals.
func TestLogComponent(t *testing.T) {
	testkit.LogsAs(t, "approvals", func(l *slog.Logger) *slog.Logger { return New(Config{Logger: l}).log })
}
