package reply_test

// Helpers of the tests that run the reply side through a whole router, on
// the fakes router's own tests use (package chatfake).

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/chatfake"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/store"
)

type (
	fakeChannel = chatfake.Channel
	fakeRunner  = chatfake.Runner
)

func newFakeChannel() *fakeChannel { return chatfake.NewChannel() }
func newFakeRunner() *fakeRunner   { return chatfake.NewRunner() }

type stoppedTicker struct{}

func (stoppedTicker) C() <-chan time.Time { return nil }
func (stoppedTicker) Stop()               {}

func msg(chat, user, text string) channels.Inbound { return chatfake.Msg(chat, user, text) }

var everyone = router.Access{Users: []string{"*"}}

// startRouter starts a router with cfg on a fresh store, cfg.Agent as its
// runner and ch as its one channel, open to everyone; the store is closed
// when the test ends.
func startRouter(t *testing.T, cfg router.Config, ch channels.Channel) *router.Router {
	t.Helper()
	cfg.Store = openWaitStore(t)
	if cfg.NewTicker == nil {
		cfg.NewTicker = func(time.Duration) router.Ticker { return stoppedTicker{} }
	}
	r, err := router.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.AddChannel(ch, everyone)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r
}

// elapse waits d: in a synctest bubble, a jump of the virtual clock.
func elapse(d time.Duration) { <-time.After(d) }

// openWaitStore opens a database in the test's directory, closed when the
// test ends.
func openWaitStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
