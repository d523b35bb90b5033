package gateway

import (
	"net"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/httpapi"
	"github.com/switchboard-gateway/switchboard/mcpclient"
	"github.com/switchboard-gateway/switchboard/metrics"
	"github.com/switchboard-gateway/switchboard/skills"
)

// /status says that an MCP server that is down is being retried.
func TestStatusNotesShowAnMCPServerBeingRetried(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/mcp"
	l.Close() // nothing listens there now

	mcp, errs := mcpclient.Connect(t.Context(), []config.MCPServer{{Name: "later", URL: url}}, nil)
	t.Cleanup(func() { mcp.Close() })
	if len(errs) != 1 {
		t.Fatalf("errs = %v, want the failed start", errs)
	}
	watcher := skills.NewWatcher(fstest.MapFS{}, skills.Builtin(), skills.Env{}, nil)
	notes := strings.Join(statusNotes(watcher, mcp, nil)(), "\n")
	if !strings.Contains(notes, "MCP server later is down and retried in the background (0 retries so far, next in ") ||
		!strings.Contains(notes, "connection refused") {
		t.Errorf("status notes = %q, want the server down and retried, with its error", notes)
	}
}

// /status (for admins) names a channel that failed and is being retried.
func TestStatusNotesShowAFailedChannel(t *testing.T) {
	mcp, _ := mcpclient.Connect(t.Context(), nil, nil)
	t.Cleanup(func() { mcp.Close() })
	watcher := skills.NewWatcher(fstest.MapFS{}, skills.Builtin(), skills.Env{}, nil)
	chans := func() []httpapi.ChannelStatus {
		return []httpapi.ChannelStatus{
			{Name: "discord", State: httpapi.StateConnected},
			{Name: "telegram", State: httpapi.StateRetrying, Restarts: 2, LastError: "telegram: getMe: 401 Unauthorized"},
		}
	}
	notes := strings.Join(statusNotes(watcher, mcp, chans)(), "\n")
	if !strings.Contains(notes, "Channel telegram failed and is retried (2 restarts so far, next now): telegram: getMe: 401 Unauthorized") ||
		strings.Contains(notes, "discord") {
		t.Errorf("status notes = %q, want telegram failing and nothing about discord", notes)
	}
}

// /status (for admins) names a skill withheld for lack of a grant.
func TestStatusNotesShowAWithheldSkill(t *testing.T) {
	mcp, _ := mcpclient.Connect(t.Context(), nil, nil)
	t.Cleanup(func() { mcp.Close() })
	watcher := skills.NewWatcher(fstest.MapFS{"w.yaml": {Data: []byte("name: w\ndescription: W.\ndefine_tools:\n  - name: get\n    kind: http\n    url: http://127.0.0.1:9/x\n")}}, nil, skills.Env{}, nil)
	notes := strings.Join(statusNotes(watcher, mcp, nil)(), "\n")
	if !strings.Contains(notes, `Skill w is not offered: it asks for more than skills.grants.w gives it: w.yaml:6: define_tools[0]: tool "get": url: the host 127.0.0.1:9 is not granted`) {
		t.Errorf("status notes = %q", notes)
	}
}

// /status's line about the model server: nothing while it answers; after
// calls that found it unavailable, how many, when, and the error.
func TestModelDown(t *testing.T) {
	at := time.Date(2026, 12, 6, 9, 0, 5, 0, time.UTC)
	for _, tt := range []struct {
		h    metrics.ModelHealth
		want string
	}{
		{metrics.ModelHealth{LastOK: at}, ""},
		{metrics.ModelHealth{LastFailure: at, LastError: "status 400: bad request"}, ""}, // refused, not down
		{metrics.ModelHealth{LastFailure: at, LastError: "connect: connection refused", Unavailable: 1},
			"1 call in a row failed, the last at 09:00:05 UTC: connect: connection refused"},
		{metrics.ModelHealth{LastFailure: at, LastError: "status 502", Unavailable: 3}, "3 calls in a row failed, the last at 09:00:05 UTC: status 502"},
	} {
		if got := modelDown(func() metrics.ModelHealth { return tt.h })(); got != tt.want {
			t.Errorf("modelDown(%+v) = %q, want %q", tt.h, got, tt.want)
		}
	}
}
