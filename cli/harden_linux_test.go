package cli

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// chat (like serve) makes the gateway process non-dumpable before it
// starts anything: a command of its uid cannot read its /proc environ or
// memory. Issue 29, finding 2.
func TestChatMakesTheGatewayNonDumpable(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	model := testkit.NewFakeLLM(t)
	r := runChat(t, model.URL, nil, "")
	d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if err != nil || d != 0 {
		t.Errorf("after chat, dumpable = %d, %v; want 0 (chat exit %d, %s)", d, err, r.code, r.stderr)
	}
}
