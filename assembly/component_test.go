package assembly

import (
	"log/slog"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// Its log lines say component=assembly.
func TestLogComponent(t *testing.T) {
	testkit.LogsAs(t, "assembly", func(l *slog.Logger) *slog.Logger { return New(Config{Logger: l}).log })
}
