package plans

import (
	"log/slog"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// Its log lines say component=plans.
func TestLogComponent(t *testing.T) {
	testkit.LogsAs(t, "plans", func(l *slog.Logger) *slog.Logger { return New(Config{Logger: l}).log })
}
