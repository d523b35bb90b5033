package e2e

// A service that never goes quiet on its users (issue 31): a turn past
// agent.turn_timeout is answered, through serve.

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
)

// TestTurnDeadlineIsNeverSilent is the repro: agent.turn_timeout
// 3s and a model that takes 5 s. A Telegram user gets one sentence, the
// message is done and the turn failed with its reason; a chat API request
// gets a 504 error, not an empty 200.
func TestTurnDeadlineIsNeverSilent(t *testing.T) {
	tg := tgfake.New(t, tgToken)
	model := testkit.NewFakeLLM(t)
	dir := t.TempDir()
	cfg := faultConfigWith(t, dir, tg, model, func(c *config.Config) {
		c.Agent.TurnTimeout = 3 * time.Second
		c.LLM.MaxRetries = 0
	})
	db := filepath.Join(dir, "switchboard.db")
	script := newModelScript(model)
	s := startFaultServe(t, cfg, tg, model, script)
	s.answer("a slow question", testkit.Reply{Text: "too late", Delay: 5 * time.Second})
	s.answer("a slow question too", testkit.Reply{Text: "too late", Delay: 5 * time.Second})

	s.say(fu1, "a slow question")
	code, body := testkit.HTTPDo(t, s.url, "", "POST", "/v1/chat/completions",
		`{"model":"switchboard","user":"ada","messages":[{"role":"user","content":"a slow question too"}]}`, nil)
	var apiErr struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(body), &apiErr); err != nil || code != 504 || apiErr.Error.Code != "turn_timeout" ||
		!strings.Contains(apiErr.Error.Message, "3 seconds") {
		t.Errorf("chat API past the deadline = %d %s, want 504 turn_timeout naming the 3 seconds", code, body)
	}

	sent := sentTexts(s.waitSent(t, fu1, 1))
	if len(sent) != 1 || !strings.Contains(sent[0], "took longer than the 3 seconds") {
		t.Fatalf("telegram chat holds %q, want one sentence naming the 3 seconds", sent)
	}
	// The sentence goes out before the turn is recorded: wait for both
	// turns' last log line.
	waitLogLines(t, s.ctx(t), s.stderr, 2, "turn done", "stop_reason=turn_timeout")
	if n := pendingInbox(t, db); n != 0 {
		t.Errorf("pending messages = %d, want 0: the message was answered", n)
	}
	if n := countIn(t, db, `SELECT count(*) FROM turns WHERE status = 'failed' AND stop_reason = 'turn_timeout'`); n != 2 {
		t.Errorf("turns failed with turn_timeout = %d, want 2", n)
	}
	if !logHas(s.stderr, "level=WARN", "turn ran past its time limit") {
		t.Errorf("no WARN for the turn past its deadline:\n%s", s.stderr.String())
	}
	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d; stderr:\n%s", code, s.stderr.String())
	}
	if got := sentTexts(sentTo(tg.Sent(), fu1)); len(got) != 1 {
		t.Errorf("telegram chat holds %q at the end, want the one sentence", got)
	}
}

// TestDamagedStoreIsFound: serve starts on a real database with four pages
// overwritten in the middle; the integrity check at start finds them:
// /readyz turns 503 with the store's check naming the damage and the fix
// (restore a backup, the newest named), and an ERROR says the same.
func TestDamagedStoreIsFound(t *testing.T) {
	tg := tgfake.New(t, tgToken)
	model := testkit.NewFakeLLM(t)
	dir := t.TempDir()
	cfg := faultConfig(t, dir, tg, model, noRetries)
	db := filepath.Join(dir, "switchboard.db")
	s := startFaultServe(t, cfg, tg, model, newModelScript(model))
	if c := s.waitStoreCheck(t, true); !c.OK {
		t.Fatalf("store check on a whole file = %+v", c)
	}
	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d; stderr:\n%s", code, s.stderr.String())
	}
	backup := db + ".backup-20261206-080000"
	var out strings.Builder
	if code := run(t.Context(), []string{"backup", "--config", cfg, backup}, strings.NewReader(""), &out, &out); code != exitOK {
		t.Fatalf("switchboard backup exited with %d: %s", code, out.String())
	}
	testkit.FillDatabase(t, db, 300)
	testkit.OverwritePages(t, db, 0, 4)

	s = startFaultServe(t, cfg, tg, model, newModelScript(model))
	c := s.waitStoreCheck(t, false)
	if c.Status != 503 || !strings.Contains(c.Detail, "is damaged") || !strings.Contains(c.Detail, "restore a backup") ||
		!strings.Contains(c.Detail, backup) {
		t.Errorf("readyz on a damaged store = %+v, want 503 naming the damage and %s", c, backup)
	}
	if !logHas(s.stderr, "level=ERROR", "the database file is damaged", "restore a backup") {
		t.Errorf("no ERROR naming the damage and the fix:\n%s", s.stderr.String())
	}
}

// TestHangingModelIsSeen: the model server takes the request and says
// nothing. Each attempt ends after llm.stream_idle_timeout and is retried;
// the chat is told "Still working on it…" once, as a draft (Telegram's
// preview); /readyz turns 503 naming the hang within twice the idle
// timeout; when the server answers, the reply comes once and /readyz is
// 200 again.
func TestHangingModelIsSeen(t *testing.T) {
	tg := tgfake.New(t, tgToken)
	model := testkit.NewFakeLLM(t)
	dir := t.TempDir()
	cfg := faultConfigWith(t, dir, tg, model, func(c *config.Config) {
		c.LLM.StreamIdleTimeout, c.LLM.RequestTimeout, c.LLM.MaxRetries = time.Second, 30*time.Second, 3
		c.Agent.StillWorkingAfter = 500 * time.Millisecond
	})
	s := startFaultServe(t, cfg, tg, model, newModelScript(model))
	hang := make(chan struct{})
	for range 4 {
		s.answer("are you there?", testkit.Reply{Text: "here at last", Block: hang})
	}
	started := time.Now()
	s.say(fu1, "are you there?")

	code, detail := s.waitModelCheck(t, false)
	if took := time.Since(started); code != 503 || !strings.Contains(detail, "in flight") || !strings.Contains(detail, "hangs") || took > 10*time.Second {
		t.Errorf("readyz during the hang = %d %q after %s, want 503 naming the hang within a few seconds", code, detail, took)
	}
	drafts, err := tg.WaitDrafts(s.ctx(t), 1)
	if err != nil || drafts[0].Text != "Still working on it…" || drafts[0].ChatID != fu1 {
		t.Fatalf("drafts = %+v (%v), want the still-working line in chat %d", drafts, err, fu1)
	}
	if n := requestsFor(model, "are you there?"); n < 2 {
		t.Errorf("the model was asked %d times during the hang, want retries after the idle timeout", n)
	}
	if !logHas(s.stderr, "stream_idle", "llm.stream_idle_timeout") {
		t.Errorf("no log line names the idle timeout:\n%s", s.stderr.String())
	}

	close(hang)
	if got := sentTexts(s.waitSent(t, fu1, 1)); len(got) != 1 || got[0] != "here at last" {
		t.Errorf("chat holds %q, want the answer once (the notice was a draft)", got)
	}
	if code, _ := s.waitModelCheck(t, true); code != 200 {
		t.Errorf("readyz after the hang = %d, want 200", code)
	}
	for _, d := range tg.Drafts() {
		if strings.Count(d.Text, "Still working") > 1 {
			t.Errorf("draft %q repeats the line", d.Text)
		}
	}
}

// waitLogLines waits until n lines of log hold every one of texts. (A log
// line has no event to wait on; it is polled.)
func waitLogLines(t *testing.T, ctx context.Context, log *lineWriter, n int, texts ...string) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		got := 0
		for line := range strings.Lines(log.String()) {
			if !slices.ContainsFunc(texts, func(s string) bool { return !strings.Contains(line, s) }) {
				got++
			}
		}
		if got >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d log lines hold %q, want %d:\n%s", got, texts, n, log.String())
		case <-tick.C:
		}
	}
}
