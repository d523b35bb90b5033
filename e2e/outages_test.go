package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
)

// TestOutagesInRealTime runs the two outages of issue 24's acceptance at
// their full length, side by side, through serve: Telegram's sendMessage
// answering 502 pages for 45 seconds, and the model answering 503 pages
// for 60 seconds. Each ends with exactly one late reply per message and
// nothing pending. The outage's length is the scenario, not a wait for
// something to happen: what the test waits for is the fake's state.
// (TestModelOutage and router's TestOutboxTelegramOutage run the same
// courses in fewer rounds or on a virtual clock.)
func TestOutagesInRealTime(t *testing.T) {
	t.Parallel() // with the other long real-time tests, after the rest
	t.Run("telegram 502 for 45 s", func(t *testing.T) {
		t.Parallel()
		realTimeOutage(t, 45*time.Second, func(s *faultServe) (begin, end func()) {
			return func() { s.tg.Outage("sendMessage", 502, "<html><body><h1>502 Bad Gateway</h1></body></html>") },
				func() { s.tg.EndOutage("sendMessage") }
		}, "switchboard_replies_pending", nil)
	})
	t.Run("model 503 for 60 s", func(t *testing.T) {
		t.Parallel()
		realTimeOutage(t, 60*time.Second, func(s *faultServe) (begin, end func()) {
			return func() { s.model.SetOutage(&testkit.Reply{Status: 503, HTMLBody: true}) },
				func() { s.model.SetOutage(nil) }
		}, "switchboard_model_waiting_messages", []string{modelDownNotice})
	})
}

// realTimeOutage: three messages in two chats arrive while outage's begin
// is in force; it ends after length. During it, nothing but notices
// reaches the chats, the messages are counted as waiting (gauge), and none
// is done; after it, each chat holds its notices, then exactly one late
// reply per message, in order, and every inbox row is done.
func realTimeOutage(t *testing.T, length time.Duration, outage func(*faultServe) (begin, end func()), gauge string, notices []string) {
	tg := tgfake.New(t, tgToken)
	model := testkit.NewFakeLLM(t)
	script := newModelScript(model)
	dir := t.TempDir()
	cfg := faultConfig(t, dir, tg, model, func(*config.LLM) {})
	s := startFaultServe(t, cfg, tg, model, script)
	ctx, cancel := context.WithTimeout(t.Context(), length+3*time.Minute)
	defer cancel()

	begin, end := outage(s)
	begin()
	start := time.Now()
	msgs := []struct {
		user int64
		text string
	}{{fu1, "first in a long outage"}, {fu1, "second in a long outage"}, {fu2, "only one in a long outage"}}
	for _, m := range msgs {
		s.answer(m.text, testkit.Reply{Text: "Late answer to " + m.text})
		s.say(m.user, m.text)
	}
	// Both chats' first messages are held: the gauge counts them.
	waitGaugeAtLeast(t, ctx, s, gauge, 1)
	lapse := time.NewTimer(length - time.Since(start))
	select {
	case <-lapse.C:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	for _, u := range []int64{fu1, fu2} {
		if got := sentTexts(sentTo(tg.Sent(), u)); fmt.Sprint(got) != fmt.Sprint(notices) {
			t.Errorf("chat %d holds %q after %v of outage, want only %q", u, got, length, notices)
		}
	}
	if n := pendingInbox(t, filepath.Join(dir, "switchboard.db")); n == 0 && len(notices) > 0 {
		t.Errorf("no message pending after %v of model outage", length)
	}
	end()
	ended := time.Now()

	want := map[int64][]string{
		fu1: append(append([]string{}, notices...), "Late answer to "+msgs[0].text, "Late answer to "+msgs[1].text),
		fu2: append(append([]string{}, notices...), "Late answer to "+msgs[2].text),
	}
	for u, w := range want {
		if _, err := waitSentTo(ctx, tg, u, len(w)); err != nil {
			t.Fatalf("chat %d: %v; stderr:\n%s", u, err, s.stderr.String())
		}
	}
	t.Logf("outage of %v: every message answered %v after it ended", length, time.Since(ended).Round(time.Millisecond))
	// A turn in each chat after the late replies: a second copy of any
	// would be there before its answer.
	for _, u := range []int64{fu1, fu2} {
		text := fmt.Sprintf("after the outage %d", u)
		s.answer(text, testkit.Reply{Text: "Back to normal."})
		s.say(u, text)
		want[u] = append(want[u], "Back to normal.")
		if _, err := waitSentTo(ctx, tg, u, len(want[u])); err != nil {
			t.Fatalf("chat %d: %v", u, err)
		}
	}
	for u, w := range want {
		if got := sentTexts(sentTo(tg.Sent(), u)); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("chat %d holds %q, want %q", u, got, w)
		}
	}
	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d; stderr:\n%s", code, s.stderr.String())
	}
	db := filepath.Join(dir, "switchboard.db")
	if n := pendingInbox(t, db); n != 0 {
		t.Errorf("pending messages at the end = %d, want 0", n)
	}
	if n := undeliveredInbox(t, db); n != 0 {
		t.Errorf("%d messages done without a delivery record, want 0", n)
	}
	checkNoSecrets(t, "serve's log", s.stderr.String())
}

// waitGaugeAtLeast polls serve's /metrics until series is at least min.
// (Metrics have no event to wait on.)
func waitGaugeAtLeast(t *testing.T, ctx context.Context, s *faultServe, series string, min float64) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if got := s.metric(t, series); got >= min {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s stayed below %v; stderr:\n%s", series, min, s.stderr.String())
		case <-tick.C:
		}
	}
}

// undeliveredInbox counts the messages marked done that have no delivery
// record: answers lost.
func undeliveredInbox(t *testing.T, path string) int {
	t.Helper()
	return countIn(t, path, `SELECT count(*) FROM inbox i WHERE i.status = 'done'
		AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.inbox_id = i.id)`)
}
