package e2e

// Faults end to end (issue 10), through `serve` with real client libraries
// against the fakes: a model that fails (429, 500, a request slower than
// llm.request_timeout, a stream cut short, tool-call arguments that are not
// JSON), a Bot API or Discord REST API that fails (429, 5xx, connection
// resets), and a database that takes no writes (full, read-only). Each time
// every inbound message gets its answer (late, after one notice, when the
// model was unavailable) or a short, clear error, the next
// message of that chat and other chats still work, and serve survives.
// The unit tests of llm, agent, channels/* and store cover the mechanisms;
// these show what the user sees.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/gateway"
	"github.com/switchboard-gateway/switchboard/internal/discordfake"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"

	_ "github.com/mattn/go-sqlite3"
)

// Telegram users of the fault tests; a private chat has the id of its user.
const (
	fu1 int64 = 6001 + iota
	fu2
	fu3
	fu4
	fu5
	fu6
	fu7
	fu8
	fu9
)

var faultUsers = []int64{fu1, fu2, fu3, fu4, fu5, fu6, fu7, fu8, fu9}

// faultServe is `switchboard serve` with Telegram and the HTTP server.
type faultServe struct {
	*serveRun
	*modelScript
	tg    *tgfake.Fake
	model *testkit.FakeLLM
	url   string // the HTTP server
}

// faultConfig writes a configuration for tg and model with a database in
// dir; llm sets more of llm (retries, timeouts).
func faultConfig(t *testing.T, dir string, tg *tgfake.Fake, model *testkit.FakeLLM, llm func(*config.LLM)) string {
	t.Helper()
	return faultConfigWith(t, dir, tg, model, func(c *config.Config) { llm(&c.LLM) })
}

// faultConfigWith is faultConfig with set changing any of the configuration.
func faultConfigWith(t *testing.T, dir string, tg *tgfake.Fake, model *testkit.FakeLLM, set func(*config.Config)) string {
	t.Helper()
	cfg := config.Default()
	cfg.LLM.BaseURL, cfg.LLM.APIKey, cfg.LLM.Model = model.URL, e2eAPIKey, "fake-model"
	set(cfg)
	cfg.Store.Path = filepath.Join(dir, "switchboard.db")
	cfg.Skills.Dir = filepath.Join(dir, "skills")
	cfg.Learning.Enabled = false
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Log.Level = "debug"
	c := config.Section[*telegram.Config](cfg)
	c.Enabled, c.Token, c.APIEndpoint, c.PollTimeout = true, tgToken, tg.URL, time.Second
	c.AllowUsers = userIDs(faultUsers...)
	return cfgfile.Write(t, cfg)
}

// noRetries is faultConfig's llm: no retries.
func noRetries(c *config.LLM) { c.MaxRetries = 0 }

// startFaultServe runs serve on cfg (written by faultConfig for tg and
// model) and returns once it polls Telegram and its HTTP server listens.
// The store is opened with storeOpts (a database that cannot take writes).
func startFaultServe(t *testing.T, cfg string, tg *tgfake.Fake, model *testkit.FakeLLM, script *modelScript, storeOpts ...store.Option) *faultServe {
	t.Helper()
	polls := tg.Calls("getUpdates")
	s := &faultServe{tg: tg, model: model, modelScript: script}
	s.serveRun = startServeWith(t, cfg, gateway.Options{StoreOptions: storeOpts},
		func(ctx context.Context) error { return tg.WaitCalls(ctx, "getUpdates", polls+1) })
	if err := waitLog(s.ctx(t), s.stderr, "http listening"); err != nil {
		t.Fatal(err)
	}
	s.url = "http://" + listenLine.FindStringSubmatch(logLine(s.stderr, "http listening"))[1]
	return s
}

// say sends text to the bot from user in their private chat.
func (s *faultServe) say(user int64, text string) {
	s.tg.PushText(user, user, fmt.Sprintf("user%d", user), text)
}

func (s *faultServe) waitSent(t *testing.T, chat int64, n int) []tgfake.SentMessage {
	t.Helper()
	sent, err := waitSentTo(s.ctx(t), s.tg, chat, n)
	if err != nil {
		t.Fatalf("want %d message(s) in chat %d, have %q: %v\nstderr:\n%s", n, chat, sentTexts(sent), err, s.stderr.String())
	}
	return sent
}

// get fetches path from serve's HTTP server.
func (s *faultServe) get(t *testing.T, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.url+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// storeCheck is the store's line of /readyz.
type storeCheck struct {
	Ready  bool
	Status int
	OK     bool
	Detail string
}

func (s *faultServe) readiness(t *testing.T) storeCheck {
	t.Helper()
	code, body := s.get(t, "/readyz")
	var rd struct {
		Ready  bool
		Checks map[string]struct {
			OK     bool
			Detail string
		}
	}
	if err := json.Unmarshal([]byte(body), &rd); err != nil {
		t.Fatalf("readyz: %d %q: %v", code, body, err)
	}
	c := rd.Checks["store"]
	return storeCheck{Ready: rd.Ready, Status: code, OK: c.OK, Detail: c.Detail}
}

// waitStoreCheck polls /readyz until the store's check is ok (or not).
// (Readiness has no event to wait on.)
func (s *faultServe) waitStoreCheck(t *testing.T, ok bool) storeCheck {
	t.Helper()
	ctx := s.ctx(t)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		c := s.readiness(t)
		if c.OK == ok {
			return c
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the store's readiness stayed %+v, want ok=%v", c, ok)
		case <-tick.C:
		}
	}
}

// logHas reports whether a line of log holds all of texts.
func logHas(log *lineWriter, texts ...string) bool {
	for line := range strings.Lines(log.String()) {
		if !slices.ContainsFunc(texts, func(s string) bool { return !strings.Contains(line, s) }) {
			return true
		}
	}
	return false
}

// requestsFor counts the model requests whose newest user message is text.
func requestsFor(m *testkit.FakeLLM, text string) int {
	n := 0
	for _, r := range m.Requests() {
		if u := userTexts(r); len(u) > 0 && u[len(u)-1] == text {
			n++
		}
	}
	return n
}

// waitRequestsFor waits until the model was asked n times for text.
func waitRequestsFor(t *testing.T, ctx context.Context, m *testkit.FakeLLM, text string, n int) {
	t.Helper()
	for requestsFor(m, text) < n {
		if err := m.WaitCalls(ctx, m.Calls()+1); err != nil {
			t.Fatalf("the model was asked %d times for %q, want %d: %v", requestsFor(m, text), text, n, err)
		}
	}
}

// TestModelFaults: the model fails in each way a provider does; the user
// gets the answer after a retry or one short error, and the chat goes on.
func TestModelFaults(t *testing.T) {
	tg := tgfake.New(t, tgToken)
	model := testkit.NewFakeLLM(t)
	script := newModelScript(model)
	cfg := faultConfig(t, t.TempDir(), tg, model, func(c *config.LLM) { c.MaxRetries, c.RequestTimeout = 2, 2*time.Second })
	s := startFaultServe(t, cfg, tg, model, script)

	// then checks that the chat's next message is answered after what came
	// before, which the model sees in its history.
	then := func(t *testing.T, user int64, before []string, want int) {
		t.Helper()
		next := fmt.Sprintf("and now, %d?", user)
		s.answer(next, testkit.Reply{Text: "Still here."})
		s.say(user, next)
		sent := s.waitSent(t, user, want)
		if got := sent[len(sent)-1].Text; got != "Still here." {
			t.Fatalf("chat holds %q, want the next message answered", sentTexts(sent))
		}
		if got := userTexts(s.requestFor(t, next)); !slices.Equal(got, append(before, next)) {
			t.Errorf("user messages the model saw = %q, want %q", got, append(before, next))
		}
	}

	t.Run("429 with Retry-After is waited out", func(t *testing.T) {
		s.answer("rate limited?", testkit.Reply{Status: 429, ErrorCode: "rate_limit_exceeded", RetryAfter: "1"},
			testkit.Reply{Text: "Answer after the 429."})
		s.say(fu1, "rate limited?")
		if sent := s.waitSent(t, fu1, 1); sent[0].Text != "Answer after the 429." {
			t.Fatalf("sent %q, want the answer", sent[0].Text)
		}
		if requestsFor(model, "rate limited?") != 2 {
			t.Errorf("model requests = %d, want 2", requestsFor(model, "rate limited?"))
		}
		if l := logLine(s.stderr, "llm: retrying"); !strings.Contains(l, "status=429") || !strings.Contains(l, "wait=1s") {
			t.Errorf("the log does not show a 1 s wait after the 429:\n%s", l)
		}
		then(t, fu1, []string{"rate limited?"}, 2)
	})

	t.Run("500 is retried", func(t *testing.T) {
		s.answer("server error?", testkit.Reply{Status: 500}, testkit.Reply{HTMLBody: true, Status: 503},
			testkit.Reply{Text: "Answer after two failures."})
		s.say(fu2, "server error?")
		if sent := s.waitSent(t, fu2, 1); sent[0].Text != "Answer after two failures." {
			t.Fatalf("sent %q, want the answer", sent[0].Text)
		}
		then(t, fu2, []string{"server error?"}, 2)
	})

	t.Run("500 after every retry: the message waits for the model, and is answered when it is back", func(t *testing.T) {
		s.answer("down for good?", testkit.Reply{Status: 500}, testkit.Reply{Status: 500}, testkit.Reply{Status: 500},
			testkit.Reply{Status: 500}, testkit.Reply{Status: 500}, testkit.Reply{Status: 500},
			testkit.Reply{Text: "Answer once the model is back."})
		s.say(fu3, "down for good?")
		sent := s.waitSent(t, fu3, 2)
		if sent[0].Text != modelDownNotice || sent[1].Text != "Answer once the model is back." {
			t.Fatalf("sent %q, want the notice, then the answer", sentTexts(sent))
		}
		if requestsFor(model, "down for good?") != 7 {
			t.Errorf("model requests = %d, want 7 (two turns of 3, max_retries 2, then the answer)", requestsFor(model, "down for good?"))
		}
		then(t, fu3, []string{"down for good?"}, 3)
	})

	t.Run("a model slower than the request timeout is asked again; other chats go on", func(t *testing.T) {
		ctx := s.ctx(t)
		second := make(chan struct{})
		// The first request never ends: it times out after 2 s. The second
		// is answered once the other chat was answered.
		s.answer("slow?", testkit.Reply{Block: make(chan struct{})}, testkit.Reply{Text: "Answer after the timeout.", Block: second})
		s.say(fu4, "slow?")
		waitRequestsFor(t, ctx, model, "slow?", 1)
		s.answer("meanwhile", testkit.Reply{Text: "Meanwhile, here."})
		s.say(fu5, "meanwhile")
		if sent := s.waitSent(t, fu5, 1); sent[0].Text != "Meanwhile, here." {
			t.Fatalf("the other chat got %q", sent[0].Text)
		}
		waitRequestsFor(t, ctx, model, "slow?", 2)
		close(second)
		if sent := s.waitSent(t, fu4, 1); sent[0].Text != "Answer after the timeout." {
			t.Fatalf("sent %q, want the answer", sent[0].Text)
		}
		if l := logLine(s.stderr, "attempt timed out"); !strings.Contains(l, "llm: retrying") {
			t.Errorf("the log does not show the timed-out attempt:\n%s", s.stderr.String())
		}
		then(t, fu4, []string{"slow?"}, 2)
	})

	t.Run("a stream cut before any text is asked again", func(t *testing.T) {
		s.answer("cut early?", testkit.Reply{CutStream: true}, testkit.Reply{Text: "Answer after the cut."})
		s.say(fu6, "cut early?")
		if sent := s.waitSent(t, fu6, 1); sent[0].Text != "Answer after the cut." {
			t.Fatalf("sent %q, want the answer", sent[0].Text)
		}
		then(t, fu6, []string{"cut early?"}, 2)
	})

	t.Run("a stream cut in the middle of the text: no half answer; the message waits and is answered whole", func(t *testing.T) {
		s.answer("cut late?", testkit.Reply{TextChunks: []string{"The first half ", "of an answer"}, CutStream: true},
			testkit.Reply{Text: "The whole answer."})
		s.say(fu7, "cut late?")
		sent := s.waitSent(t, fu7, 2)
		if sent[0].Text != modelDownNotice || sent[1].Text != "The whole answer." {
			t.Fatalf("sent %q, want the notice, then the whole answer", sentTexts(sent))
		}
		// Text reached the turn already: the client does not ask again
		// (it could repeat it); the turn is tried again later, whole.
		if n := requestsFor(model, "cut late?"); n != 2 {
			t.Errorf("model requests = %d, want 2", n)
		}
		then(t, fu7, []string{"cut late?"}, 3)
	})

	t.Run("tool-call arguments that are not JSON are refused and the turn goes on", func(t *testing.T) {
		s.answer("send me a note",
			testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c1", "send_message", `{"text": "half a note`)}},
			testkit.Reply{Text: "Here is your note."})
		s.say(fu8, "send me a note")
		sent := s.waitSent(t, fu8, 1)
		if sent[0].Text != "Here is your note." {
			t.Fatalf("sent %q, want the final answer", sentTexts(sent))
		}
		reqs := model.Requests()
		var result string
		for _, r := range reqs {
			for _, m := range r.Messages {
				if m.Role == llm.RoleTool && m.ToolCallID == "c1" {
					result = m.Content
				}
			}
		}
		if !strings.Contains(result, "not valid JSON") {
			t.Errorf("the model got the tool result %q, want one saying the arguments are not valid JSON", result)
		}
		then(t, fu8, []string{"send me a note"}, 2)
	})

	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d; stderr:\n%s", code, s.stderr.String())
	}
	for _, u := range faultUsers[:8] {
		want := 2
		switch u {
		case fu5:
			want = 1
		case fu3, fu7:
			want = 3 // and the notice that the model was unavailable
		}
		if n := len(sentTo(tg.Sent(), u)); n != want {
			t.Errorf("chat %d holds %d messages after shutdown, want %d: %q", u, n, want, sentTexts(sentTo(tg.Sent(), u)))
		}
	}
	s.checkAllAsked(t)
	checkNoSecrets(t, "serve's log", s.stderr.String())
}

// TestTelegramFaults: the Bot API fails calls the way it and the network
// do; every message is answered exactly once.
func TestTelegramFaults(t *testing.T) {
	tg := tgfake.New(t, tgToken)
	model := testkit.NewFakeLLM(t)
	script := newModelScript(model)
	s := startFaultServe(t, faultConfig(t, t.TempDir(), tg, model, noRetries), tg, model, script)

	// sendFails arms a failure of the reply's sendMessage and checks that
	// the reply arrives once after one more attempt.
	sendFails := func(t *testing.T, user int64, arm func(), logged string) {
		t.Helper()
		ask, reply := fmt.Sprintf("hello from %d", user), fmt.Sprintf("Hello, %d.", user)
		s.answer(ask, testkit.Reply{Text: reply})
		arm()
		s.say(user, ask)
		if sent := s.waitSent(t, user, 1); sent[0].Text != reply {
			t.Fatalf("sent %q, want the reply", sent[0].Text)
		}
		// The next turn of the chat starts after this one ended, so a
		// second copy of the reply would be there by now.
		s.answer("again", testkit.Reply{Text: "Again."})
		s.say(user, "again")
		if got := sentTexts(s.waitSent(t, user, 2)); !slices.Equal(got, []string{reply, "Again."}) {
			t.Fatalf("chat holds %q, want the reply once, then the next", got)
		}
		if n := sendAttempts(tg, reply); n != 2 {
			t.Errorf("sendMessage was called %d times for the reply, want 2", n)
		}
		if !logHas(s.stderr, "call failed, retrying", logged) {
			t.Errorf("the log does not show the failed sendMessage (%q):\n%s", logged, s.stderr.String())
		}
	}

	t.Run("sendMessage 500 is retried", func(t *testing.T) {
		sendFails(t, fu1, func() { tg.FailNext("sendMessage", http.StatusInternalServerError, "", 0) }, "Internal Server Error")
	})
	t.Run("sendMessage 502 page from a proxy is retried", func(t *testing.T) {
		sendFails(t, fu2, func() {
			tg.FailNextRaw("sendMessage", http.StatusBadGateway, "<html><body>502 Bad Gateway</body></html>")
		}, "HTTP 502 Bad Gateway")
	})
	t.Run("sendMessage connection reset is retried", func(t *testing.T) {
		sendFails(t, fu3, func() { tg.ResetNext("sendMessage") }, "connection reset by peer")
	})

	// pollFails arms a failure of the next getUpdates call, waits until it
	// happened, then pushes a message: the poll after the wait delivers it.
	pollFails := func(t *testing.T, user int64, arm func(), logged string) {
		t.Helper()
		ctx := s.ctx(t)
		polls := tg.Calls("getUpdates")
		arm()
		if err := tg.WaitCalls(ctx, "getUpdates", polls+1); err != nil {
			t.Fatal(err)
		}
		ask, reply := fmt.Sprintf("polling %d", user), fmt.Sprintf("Polled, %d.", user)
		s.answer(ask, testkit.Reply{Text: reply})
		s.say(user, ask)
		if sent := s.waitSent(t, user, 1); sent[0].Text != reply {
			t.Fatalf("sent %q, want the reply", sent[0].Text)
		}
		if !logHas(s.stderr, "getUpdates failed, retrying", logged) {
			t.Errorf("the log does not show the failed poll (%q):\n%s", logged, s.stderr.String())
		}
		s.answer("and again", testkit.Reply{Text: "And again."})
		s.say(user, "and again")
		if got := sentTexts(s.waitSent(t, user, 2)); !slices.Equal(got, []string{reply, "And again."}) {
			t.Fatalf("chat holds %q, want each reply once", got)
		}
	}

	t.Run("getUpdates 500 is retried", func(t *testing.T) {
		pollFails(t, fu4, func() { tg.FailNext("getUpdates", http.StatusInternalServerError, "", 0) }, "Internal Server Error")
	})
	t.Run("getUpdates 429 waits retry_after", func(t *testing.T) {
		pollFails(t, fu5, func() { tg.FailNext("getUpdates", http.StatusTooManyRequests, "", 1) }, "retry after 1")
	})
	t.Run("getUpdates connection reset is retried", func(t *testing.T) {
		pollFails(t, fu6, func() { tg.ResetNext("getUpdates") }, "connection reset by peer")
	})

	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d; stderr:\n%s", code, s.stderr.String())
	}
	for _, u := range faultUsers[:6] {
		if n := len(sentTo(tg.Sent(), u)); n != 2 {
			t.Errorf("chat %d holds %d messages after shutdown, want 2: %q", u, n, sentTexts(sentTo(tg.Sent(), u)))
		}
	}
	s.checkAllAsked(t)
	checkNoSecrets(t, "serve's log", s.stderr.String())
}

// TestDiscordFaults: the Discord REST API fails posts with 5xx; every
// message is answered exactly once. (429 and a dropped gateway are in
// TestDiscordServe.)
func TestDiscordFaults(t *testing.T) {
	s := startDiscordServe(t)
	post := func(t *testing.T, user string, arm func()) {
		t.Helper()
		dm := s.dmChannel()
		ask, reply := "hello from "+user, "Hello, "+user+"."
		s.answer(ask, testkit.Reply{Text: reply})
		posts := s.dc.Requests(discordfake.RouteCreateMessage)
		arm()
		s.post(dm, "", user, "user", ask)
		if sent := s.waitSent(t, dm, 1); sent[0].Content != reply {
			t.Fatalf("sent %q, want the reply", sent[0].Content)
		}
		next := "next from " + user
		s.answer(next, testkit.Reply{Text: "Next."})
		s.post(dm, "", user, "user", next)
		if got := contents(s.waitSent(t, dm, 2)); !slices.Equal(got, []string{reply, "Next."}) {
			t.Fatalf("DM holds %q, want the reply once, then the next", got)
		}
		if got := s.dc.Requests(discordfake.RouteCreateMessage) - posts; got != 3 {
			t.Errorf("message posts = %d, want 3 (the failed one, its retry, the next reply)", got)
		}
		s.expect(dm, 2)
	}
	t.Run("500 on a post is retried", func(t *testing.T) {
		post(t, aliceID, func() {
			s.dc.FailNext(discordfake.RouteCreateMessage, 500, discordfake.ErrorBody(0, "500: Internal Server Error"))
		})
	})
	t.Run("502 page from a proxy is retried", func(t *testing.T) {
		post(t, bobID, func() { s.dc.FailNext(discordfake.RouteCreateMessage, 502, "<html>bad gateway</html>") })
	})
	t.Run("500 after the post was stored does not double it", func(t *testing.T) {
		post(t, carolID, func() {
			s.dc.FailNextAfterCommit(discordfake.RouteCreateMessage, 500, discordfake.ErrorBody(0, "500: Internal Server Error"))
		})
	})

	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d; stderr:\n%s", code, s.stderr.String())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch, n := range s.final {
		if got := s.dc.SentTo(ch); len(got) != n {
			t.Errorf("after shutdown, channel %s holds %d messages, want %d: %q", ch, len(got), n, contents(got))
		}
	}
	s.checkAllAsked(t)
}

// faultPages caps the database of TestStoreFull: room for the schema and a
// few conversations (4 KiB pages).
const faultPages = 400

// ballast is other data on the database's "disk": it fills the database up
// to the cap serve has, and frees it again. Its own connection has the
// same cap, as every process on a full disk has the same lack of space.
type ballast struct{ db *sql.DB }

func openBallast(t *testing.T, path string) *ballast {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1) // the pragmas hold for this one connection
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		fmt.Sprintf("PRAGMA max_page_count = %d", faultPages),
		"PRAGMA synchronous = OFF", // filling page by page need not wait for the disk
		"CREATE TABLE IF NOT EXISTS ballast (b BLOB)",
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return &ballast{db: db}
}

// fill writes ballast, in smaller and smaller rows, until no page is left.
func (b *ballast) fill(t *testing.T) {
	t.Helper()
	for _, size := range []int{64 << 10, 4 << 10, 1 << 10, 100} {
		for {
			_, err := b.db.ExecContext(t.Context(), "INSERT INTO ballast VALUES (randomblob(?))", size)
			if why, ok := store.Unavailable(err); ok && why == "storage is full" {
				break
			}
			if err != nil {
				t.Fatalf("ballast: %v", err)
			}
		}
	}
}

// free deletes the ballast: its pages become free for serve.
func (b *ballast) free(t *testing.T) {
	t.Helper()
	if _, err := b.db.ExecContext(t.Context(), "DELETE FROM ballast"); err != nil {
		t.Fatal(err)
	}
}

// checkDatabase checks the database file at path once serve has stopped:
// PRAGMA integrity_check passes and chat holds the messages want, in order.
func checkDatabase(t *testing.T, path string, chat int64, want []string) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRowContext(t.Context(), "PRAGMA integrity_check").Scan(&res); err != nil || res != "ok" {
		t.Errorf("integrity_check = %q, %v; want ok", res, err)
	}
	rows, err := db.QueryContext(t.Context(), `SELECT m.content FROM messages m JOIN sessions s ON s.id = m.session_id
		JOIN chats c ON c.id = s.chat_id WHERE c.channel = 'telegram' AND c.chat_key = ? AND m.role IN ('user', 'assistant')
		ORDER BY m.id`, fmt.Sprint(chat))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		got = append(got, c)
	}
	if !slices.Equal(got, want) {
		t.Errorf("chat %d's stored conversation = %q, want %q", chat, got, want)
	}
}

// story is a reply too long for one page of the database or one Telegram
// message.
var story = strings.TrimSpace(strings.Repeat("Once upon a time there was a gateway that kept every word. ", 100))

// TestStoreFull: the database fills up while serve runs, first when a
// message arrives, then in the middle of a turn. The user is told, once per
// outage, that storage is full; readiness says so; nothing is lost or
// corrupted; once space is freed every message is answered, once.
func TestStoreFull(t *testing.T) {
	tg := tgfake.New(t, tgToken)
	model := testkit.NewFakeLLM(t)
	script := newModelScript(model)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "switchboard.db")
	s := startFaultServe(t, faultConfig(t, dir, tg, model, noRetries), tg, model, script, store.WithMaxPages(faultPages))
	ctx := s.ctx(t)
	if c := s.readiness(t); !c.OK {
		t.Fatalf("store not ready at start: %+v", c)
	}

	s.answer("remember: apple", testkit.Reply{Text: "Noted: apple."})
	s.say(fu1, "remember: apple")
	s.waitSent(t, fu1, 1)
	b := openBallast(t, dbPath)

	// A message too big for the space left.
	b.fill(t)
	c := s.waitStoreCheck(t, false)
	if c.Status != http.StatusServiceUnavailable || !strings.Contains(c.Detail, "database or disk is full") {
		t.Errorf("readiness when full = %+v, want 503 naming the full database", c)
	}
	long := "long: " + strings.Repeat("a", 4000)
	s.answer(long, testkit.Reply{Text: "That was long."})
	s.say(fu1, long)
	s.answer("me too", testkit.Reply{Text: "Hello, you too."})
	s.say(fu2, "me too")
	notice := s.waitSent(t, fu1, 2)[1].Text
	if !strings.Contains(notice, "storage is full") || len(notice) > 200 {
		t.Errorf("notice = %q, want a short message saying storage is full", notice)
	}
	if err := waitLog(ctx, s.stderr, "database or disk is full"); err != nil {
		t.Errorf("%v:\n%s", err, s.stderr.String())
	}
	if code, _ := s.get(t, "/healthz"); code != http.StatusOK {
		t.Errorf("healthz = %d while full, want 200", code)
	}
	b.free(t)
	if got := sentTexts(s.waitSent(t, fu1, 3)); got[2] != "That was long." {
		t.Fatalf("chat holds %q, want the long message answered after the notice", got)
	}
	if got := sentTexts(s.waitSent(t, fu2, 1)); got[0] != "Hello, you too." {
		t.Fatalf("the other chat holds %q, want its answer", got)
	}
	s.assertHistory(t, long, []string{"remember: apple", long}, "Noted: apple.")
	s.waitStoreCheck(t, true)

	// Full in the middle of a turn: the model's long answer cannot be
	// stored. The turn stays open and is tried again until it can.
	// The first three tries wait for a word from the test; more are not
	// needed (and dropped below).
	tries := []chan struct{}{make(chan struct{}), make(chan struct{}), make(chan struct{})}
	for _, ch := range tries {
		s.answer("tell me a story", testkit.Reply{Text: story, Block: ch})
	}
	for range 5 {
		s.answer("tell me a story", testkit.Reply{Text: story})
	}
	s.say(fu3, "tell me a story")
	waitRequestsFor(t, ctx, model, "tell me a story", 1)
	b.fill(t)
	close(tries[0])
	notice = s.waitSent(t, fu3, 1)[0].Text
	if !strings.Contains(notice, "storage is full") {
		t.Errorf("notice = %q, want one saying storage is full", notice)
	}
	// The second try fails too (the third has begun once the second's
	// failure was handled), and the chat is not told again.
	waitRequestsFor(t, ctx, model, "tell me a story", 2)
	close(tries[1])
	waitRequestsFor(t, ctx, model, "tell me a story", 3)
	b.free(t)
	close(tries[2])
	sent := s.waitSent(t, fu3, 3)
	if !sameModuloSplitWhitespace(story, []string{sent[1].Text, sent[2].Text}) {
		t.Errorf("chat holds %q, want the notice, then the story in two parts", sentTexts(sent))
	}
	s.answer("thanks", testkit.Reply{Text: "You're welcome."})
	s.say(fu3, "thanks")
	s.waitSent(t, fu3, 4)
	s.mu.Lock()
	delete(s.answers, "tell me a story")
	s.mu.Unlock()

	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d; stderr:\n%s", code, s.stderr.String())
	}
	for chat, n := range map[int64]int{fu1: 3, fu2: 1, fu3: 4} {
		if got := sentTo(tg.Sent(), chat); len(got) != n {
			t.Errorf("chat %d holds %d messages, want %d: %q", chat, len(got), n, sentTexts(got))
		}
	}
	checkDatabase(t, dbPath, fu1, []string{"remember: apple", "Noted: apple.", long, "That was long."})
	checkDatabase(t, dbPath, fu3, []string{"tell me a story", story, "thanks", "You're welcome."})
	s.checkAllAsked(t)
}

// TestStoreReadOnly: serve starts on a database it cannot write (a file
// mode, a read-only mount). It keeps running, says so in readiness, and
// tells the user; the message is not lost: after the database is writable
// again and serve restarts, it is answered, with the earlier conversation.
func TestStoreReadOnly(t *testing.T) {
	tg := tgfake.New(t, tgToken)
	model := testkit.NewFakeLLM(t)
	script := newModelScript(model)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "switchboard.db")
	cfg := faultConfig(t, dir, tg, model, noRetries)

	s := startFaultServe(t, cfg, tg, model, script)
	script.answer("remember: pear", testkit.Reply{Text: "Noted: pear."})
	s.say(fu1, "remember: pear")
	s.waitSent(t, fu1, 1)
	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d; stderr:\n%s", code, s.stderr.String())
	}

	ro := startFaultServe(t, cfg, tg, model, script, store.WithReadOnly())
	c := ro.waitStoreCheck(t, false)
	if c.Status != http.StatusServiceUnavailable || !strings.Contains(c.Detail, "readonly") {
		t.Errorf("readiness when read-only = %+v, want 503 naming the read-only database", c)
	}
	script.answer("what did I ask you to remember?", testkit.Reply{Text: "A pear."})
	ro.say(fu1, "what did I ask you to remember?")
	notice := ro.waitSent(t, fu1, 2)[1].Text
	if !strings.Contains(notice, "storage is read-only") {
		t.Errorf("notice = %q, want one saying storage is read-only", notice)
	}
	if err := waitLog(ro.ctx(t), ro.stderr, "attempt to write a readonly database"); err != nil {
		t.Errorf("%v:\n%s", err, ro.stderr.String())
	}
	if code, _ := ro.get(t, "/healthz"); code != http.StatusOK {
		t.Errorf("healthz = %d while read-only, want 200", code)
	}
	if code := ro.stop(t); code != exitOK {
		t.Fatalf("read-only serve exited with %d; stderr:\n%s", code, ro.stderr.String())
	}
	if n := model.Calls(); n != 1 {
		t.Errorf("model calls = %d, want 1 (none while read-only)", n)
	}

	// Writable again: the message Telegram still holds is answered.
	s = startFaultServe(t, cfg, tg, model, script)
	if got := sentTexts(s.waitSent(t, fu1, 3)); got[2] != "A pear." {
		t.Fatalf("chat holds %q, want the answer after the notice", got)
	}
	s.assertHistory(t, "what did I ask you to remember?", []string{"remember: pear", "what did I ask you to remember?"}, "Noted: pear.")
	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d; stderr:\n%s", code, s.stderr.String())
	}
	if got := sentTo(tg.Sent(), fu1); len(got) != 3 {
		t.Errorf("chat holds %q, want 3 messages", sentTexts(got))
	}
	checkDatabase(t, dbPath, fu1, []string{"remember: pear", "Noted: pear.", "what did I ask you to remember?", "A pear."})
	script.checkAllAsked(t)
}
