package deploy

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfileCachesTheGoBuild: the build stage's go build keeps Go's
// build cache (the golang image's GOCACHE, /root/.cache/go-build) and the
// module cache in BuildKit cache mounts, so a rebuild after a source change
// does not compile SQLite's amalgamation again.
func TestDockerfileCachesTheGoBuild(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "# syntax=docker/dockerfile:1") {
		t.Error("the Dockerfile does not ask for the BuildKit syntax that has RUN --mount")
	}
	src := strings.ReplaceAll(string(b), "\\\n", " ") // continuation lines joined
	run := regexp.MustCompile(`(?m)^RUN (.*\bgo build\b.*)$`).FindStringSubmatch(src)
	if run == nil {
		t.Fatal("no RUN with go build in the Dockerfile")
	}
	for _, mount := range []string{"--mount=type=cache,target=/root/.cache/go-build", "--mount=type=cache,target=/go/pkg/mod"} {
		if !strings.Contains(run[1], mount) {
			t.Errorf("the go build RUN lacks %s: %q", mount, run[1])
		}
	}
}
