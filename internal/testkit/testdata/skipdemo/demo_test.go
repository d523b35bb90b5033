// Package skipdemo is a package whose tests skip through testkit.SkipFor,
// for TestSkipLinesInGoTest: go test ./... never runs it (testdata).
package skipdemo

import (
	"os"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

func TestMain(m *testing.M) { os.Exit(testkit.RunTests(m)) }

func TestRuns(t *testing.T) {}

func TestNeedsPostgres(t *testing.T) {
	for _, name := range []string{"a", "b"} {
		t.Run(name, func(t *testing.T) {
			testkit.SkipFor(t, "PostgreSQL", "DEMO_DSN is not set: see .ci/run")
		})
	}
}

func TestNeedsChromium(t *testing.T) {
	testkit.SkipFor(t, "", "chromium is not installed (apt-get install chromium)\nmore detail on a second line")
}
