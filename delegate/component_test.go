package delegate

import (
	"log/slog"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// Its log lines say component=delegate.
func TestLogComponent(t *testing.T) {
	testkit.LogsAs(t, "delegate", func(l *slog.Logger) *slog.Logger { return New(Config{Logger: l}).log })
}
