package e2e

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
)

// modelDownNotice is what a chat is told once when the model is unavailable.
const modelDownNotice = "Sorry, the language model is unavailable right now. I'll answer your message when it's back."

// modelCheck is the model's line of /readyz.
func (s *faultServe) modelCheck(t *testing.T) (int, bool, string) {
	t.Helper()
	code, body := s.get(t, "/readyz")
	var rd struct {
		Checks map[string]struct {
			OK     bool
			Detail string
		}
	}
	if err := json.Unmarshal([]byte(body), &rd); err != nil {
		t.Fatalf("readyz: %d %q: %v", code, body, err)
	}
	return code, rd.Checks["model"].OK, rd.Checks["model"].Detail
}

// waitModelCheck polls /readyz until the model's check is ok (or not).
// (Readiness has no event to wait on.)
func (s *faultServe) waitModelCheck(t *testing.T, ok bool) (int, string) {
	t.Helper()
	ctx := s.ctx(t)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		code, got, detail := s.modelCheck(t)
		if got == ok {
			return code, detail
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the model's readiness stayed %v (%d %q), want ok=%v", got, code, detail, ok)
		case <-tick.C:
		}
	}
}

// metric reads one value of serve's /metrics.
func (s *faultServe) metric(t *testing.T, series string) float64 {
	t.Helper()
	_, body := s.get(t, "/metrics")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics has no %s", series)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// waitMetric polls serve's /metrics until series has the value want: the
// router counts a message after its reply is out. (Metrics have no event
// to wait on.)
func (s *faultServe) waitMetric(t *testing.T, series string, want float64) {
	t.Helper()
	ctx := s.ctx(t)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		got := s.metric(t, series)
		if got == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s = %v, want %v", series, got, want)
		case <-tick.C:
		}
	}
}

// pendingInbox counts the messages stored and not done.
func pendingInbox(t *testing.T, path string) int {
	t.Helper()
	return countIn(t, path, `SELECT count(*) FROM inbox WHERE status = 'pending'`)
}

// countIn runs a count query on the database at path, read-only.
func countIn(t *testing.T, path, query string) int {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// TestModelOutage: the model is down (every completion a 503 from a proxy,
// while GET /models still answers) for a while. Each chat is told once,
// nothing is lost, /readyz says the model is down, and when it is back
// every message gets exactly one late reply, in order. A restart during an
// outage keeps the message pending, and it too is answered once.
//
// The outage lasts until the router has tried each waiting message a few
// times (waits of 1 s, then 2 s…): the same course as a 60-second outage,
// with fewer rounds, so the test does not take a minute.
func TestModelOutage(t *testing.T) {
	tg := tgfake.New(t, tgToken)
	model := testkit.NewFakeLLM(t)
	script := newModelScript(model)
	dir := t.TempDir()
	cfg := faultConfig(t, dir, tg, model, noRetries)
	db := filepath.Join(dir, "switchboard.db")
	s := startFaultServe(t, cfg, tg, model, script)
	ctx := s.ctx(t)

	model.SetOutage(&testkit.Reply{Status: 503, HTMLBody: true})
	msgs := []struct {
		user int64
		text string
	}{{fu1, "first of one"}, {fu1, "second of one"}, {fu2, "only of two"}, {fu3, "only of three"}}
	for _, m := range msgs {
		s.answer(m.text, testkit.Reply{Text: "Late answer to " + m.text})
		s.say(m.user, m.text)
	}
	// Each waiting message was tried at least three times: at 0, 1 and
	// 3 s (fu1's second waits behind its first).
	waitRequestsFor(t, ctx, model, "first of one", 3)
	waitRequestsFor(t, ctx, model, "only of two", 3)
	waitRequestsFor(t, ctx, model, "only of three", 3)
	for _, u := range []int64{fu1, fu2, fu3} {
		if got := sentTexts(sentTo(tg.Sent(), u)); len(got) != 1 || got[0] != modelDownNotice {
			t.Fatalf("chat %d holds %q during the outage, want one notice; stderr:\n%s", u, got, s.stderr.String())
		}
	}
	if n := requestsFor(model, "second of one"); n != 0 {
		t.Errorf("fu1's second message was tried %d times during the outage, want 0: it waits behind the first", n)
	}
	if code, detail := s.waitModelCheck(t, false); code != 503 || !strings.Contains(detail, "chat completions failed") || !strings.Contains(detail, "503") {
		t.Errorf("readyz during the outage = %d %q, want 503 naming the failed completions", code, detail)
	}
	if n := pendingInbox(t, db); n != 4 {
		t.Errorf("pending messages during the outage = %d, want 4", n)
	}
	if w := s.metric(t, "switchboard_model_waiting_messages"); w != 3 {
		t.Errorf("switchboard_model_waiting_messages = %v, want 3", w)
	}
	if !logHas(s.stderr, "level=WARN", "the model is unavailable; the message stays pending") {
		t.Errorf("no WARN for the held message:\n%s", s.stderr.String())
	}

	model.SetOutage(nil)
	for _, u := range []int64{fu1, fu2, fu3} {
		want := 2
		if u == fu1 {
			want = 3
		}
		s.waitSent(t, u, want)
	}
	if code, _ := s.waitModelCheck(t, true); code != 200 {
		t.Errorf("readyz after the outage = %d, want 200", code)
	}
	s.waitMetric(t, `switchboard_model_waits_total{outcome="answered"}`, 3)
	s.waitMetric(t, "switchboard_model_waiting_messages", 0)

	// A restart in the middle of an outage: the message stays pending and
	// is answered after the restart, once the model is back.
	model.SetOutage(&testkit.Reply{CutStream: true})
	s.answer("across a restart", testkit.Reply{Text: "Late answer to across a restart"})
	s.say(fu4, "across a restart")
	waitRequestsFor(t, ctx, model, "across a restart", 2)
	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d during the outage; stderr:\n%s", code, s.stderr.String())
	}
	if n := pendingInbox(t, db); n != 1 {
		t.Fatalf("pending messages after the stop = %d, want 1", n)
	}
	s = startFaultServe(t, cfg, tg, model, script)
	waitRequestsFor(t, s.ctx(t), model, "across a restart", 3) // resumed, and still down
	model.SetOutage(nil)
	s.waitSent(t, fu4, 3) // a notice before and after the restart, then the answer
	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d; stderr:\n%s", code, s.stderr.String())
	}

	want := map[int64][]string{
		fu1: {modelDownNotice, "Late answer to first of one", "Late answer to second of one"},
		fu2: {modelDownNotice, "Late answer to only of two"},
		fu3: {modelDownNotice, "Late answer to only of three"},
		fu4: {modelDownNotice, modelDownNotice, "Late answer to across a restart"},
	}
	for u, w := range want {
		if got := sentTexts(sentTo(tg.Sent(), u)); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("chat %d holds %q, want %q", u, got, w)
		}
	}
	if n := pendingInbox(t, db); n != 0 {
		t.Errorf("pending messages at the end = %d, want 0", n)
	}
	script.checkAllAsked(t)
	checkNoSecrets(t, "serve's log", s.stderr.String())
}
