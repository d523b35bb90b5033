package chatapi

import (
	"os"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// TestMain runs the tests, then says which skipped and why (testkit.SkipFor).
func TestMain(m *testing.M) { os.Exit(testkit.RunTests(m)) }
