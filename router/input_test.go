package router

import (
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/channels"
)

// Issue 31, finding 4: a chat message past channels.max_input_chars gets
// one sentence, is stored nowhere and starts no turn (no model call); a
// message at the limit is answered as usual. The limit counts characters,
// not bytes.
func TestMessagePastInputLimitIsRefused(t *testing.T) {
	e := newEnv(t, 4, everyone)
	limit := channels.DefaultMaxInputChars
	e.deliver(t, msg("c1", "u", strings.Repeat("é", limit+1)))
	want := fmt.Sprintf("That message is %d characters; the limit is %d. Send it as a file or in parts.", limit+1, limit)
	if got := e.ch.Texts(); len(got) != 1 || got[0] != want {
		t.Fatalf("sent %q, want the one sentence %q", got, want)
	}
	var rows int
	if err := e.st.DB().QueryRowContext(t.Context(), "SELECT count(*) FROM inbox").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Errorf("%d inbox rows stored for a refused message, want 0", rows)
	}

	atLimit := strings.Repeat("é", limit)
	e.deliver(t, msg("c1", "u", atLimit))
	e.waitSent(t, 2)
	if got := e.ch.Texts(); len(got) != 2 || !strings.HasPrefix(got[1], "echo: éé") {
		t.Fatalf("a message at the limit was not answered: %d sends", len(got))
	}
	e.runner.Mu.Lock()
	turns := e.runner.Turns
	e.runner.Mu.Unlock()
	if len(turns) != 1 || turns[0].Input.Content != atLimit {
		t.Errorf("%d turns ran, want 1 with the message at the limit whole (none for the refused one)", len(turns))
	}
}

// A negative limit turns the check off.
func TestInputLimitOff(t *testing.T) {
	e := newEnvWith(t, everyone, func(c *Config) { c.MaxInputChars = -1 })
	long := strings.Repeat("a", channels.DefaultMaxInputChars+1)
	e.deliver(t, msg("c1", "u", long))
	e.waitSent(t, 1)
	e.runner.Mu.Lock()
	turns := e.runner.Turns
	e.runner.Mu.Unlock()
	if len(turns) != 1 || turns[0].Input.Content != long {
		t.Fatalf("with no limit the message did not reach a turn whole (%d turns)", len(turns))
	}
}
