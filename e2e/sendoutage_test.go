package e2e

// The real-time send outage of a platform through `serve`, shared by the
// Slack and WhatsApp tests: the platform refuses every send for 45 s while
// three messages arrive in two chats; during it nothing reaches the chats
// and every reply waits in the outbox; after it each message gets exactly
// one late reply, in order, and nothing is left pending. The outage's
// length is the scenario, not a wait for something: what the test waits
// for is the fake's state.

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// sendOutage is one platform's side of the test, on a running serve.
type sendOutage struct {
	channel string    // the channel's name in the store
	db      string    // serve's database
	chats   [2]string // two chats, and who writes in each
	users   [2]string
	refuse  func() (end func()) // starts the outage
	refused string              // what a refused call is, for the log: "posts", "sends"
	calls   func() int          // the sends so far, refused ones included
	tried   func() bool         // both chats' first replies were tried (and refused)
	answer  func(text string, r ...testkit.Reply)
	say     func(chat, user, text string)
	sent    func(chat string) []string // what the bot sent to chat
	waitFor func(ctx context.Context, cond func() bool) error
	expect  func(chat string, n int)
	finish  func(t *testing.T)
	stderr  func() string
}

// runSendOutage runs the outage of length on p.
func runSendOutage(t *testing.T, p sendOutage, length time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), length+3*time.Minute)
	defer cancel()
	outbox := func(statuses string) int {
		return countIn(t, p.db, fmt.Sprintf(`SELECT count(*) FROM outbox WHERE channel = '%s' AND status IN (%s)`, p.channel, statuses))
	}
	sentAtLeast := func(chat string, n int) error {
		return p.waitFor(ctx, func() bool { return len(p.sent(chat)) >= n })
	}

	end := p.refuse()
	start := time.Now()
	msgs := []struct{ chat, user, text string }{
		{p.chats[0], p.users[0], "first in a long outage"}, {p.chats[0], p.users[0], "second in a long outage"},
		{p.chats[1], p.users[1], "only one in a long outage"},
	}
	for _, m := range msgs {
		p.answer(m.text, testkit.Reply{Text: "Late answer to " + m.text})
		p.say(m.chat, m.user, m.text)
	}
	if err := p.waitFor(ctx, p.tried); err != nil {
		t.Fatalf("no reply was tried during the outage: %v\nstderr:\n%s", err, p.stderr())
	}
	lapse := time.NewTimer(length - time.Since(start))
	select {
	case <-lapse.C:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	for _, chat := range p.chats {
		if got := p.sent(chat); len(got) != 0 {
			t.Errorf("%s holds %q after %v of outage, want nothing", chat, got, length)
		}
	}
	tried := p.calls()
	// Each reply waits in the outbox.
	if n := outbox("'pending'"); n != len(msgs) {
		t.Errorf("%d replies wait in the outbox after %v of outage, want %d", n, length, len(msgs))
	}
	end()
	ended := time.Now()

	want := map[string][]string{
		p.chats[0]: {"Late answer to " + msgs[0].text, "Late answer to " + msgs[1].text},
		p.chats[1]: {"Late answer to " + msgs[2].text},
	}
	for chat, w := range want {
		if err := sentAtLeast(chat, len(w)); err != nil {
			t.Fatalf("%s: %v; stderr:\n%s", chat, err, p.stderr())
		}
	}
	t.Logf("outage of %v (%d %s refused): every message answered %v after it ended", length, tried, p.refused,
		time.Since(ended).Round(time.Millisecond))
	// A turn in each chat after the late replies: a second copy of any
	// would be there before its answer.
	for i, chat := range p.chats {
		text := fmt.Sprintf("after the outage %d", i)
		p.answer(text, testkit.Reply{Text: "Back to normal."})
		p.say(chat, p.users[i], text)
		want[chat] = append(want[chat], "Back to normal.")
		if err := sentAtLeast(chat, len(want[chat])); err != nil {
			t.Fatalf("%s: %v", chat, err)
		}
	}
	for chat, w := range want {
		if got := p.sent(chat); !slices.Equal(got, w) {
			t.Errorf("%s holds %q, want %q", chat, got, w)
		}
		p.expect(chat, len(w))
	}
	p.finish(t)
	if n := pendingInbox(t, p.db); n != 0 {
		t.Errorf("pending messages at the end = %d, want 0", n)
	}
	if n := undeliveredInbox(t, p.db); n != 0 {
		t.Errorf("%d messages done without a delivery record, want 0", n)
	}
	if n := outbox("'pending', 'dropped'"); n != 0 {
		t.Errorf("%d replies pending or dropped in the outbox at the end, want 0", n)
	}
}
