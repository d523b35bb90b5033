package testkit

import (
	"fmt"
	"os"
	"testing"
)

// Missing reports a missing outside tool a test needs (Node.js, Chromium):
// under CI=true it fails the test, since .ci/run installs the tools;
// elsewhere it skips the test with the message, which should say what to
// install, counted by SkipFor.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: .ci/run should have installed it)", msg)
	}
	SkipFor(t, "", msg)
}
