package cli

import (
	"os"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// TestMain reports the package's skipped tests, with their reasons, in one
// closing line (testkit.RunTests).
func TestMain(m *testing.M) { os.Exit(testkit.RunTests(m)) }
