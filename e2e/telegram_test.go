package e2e

// End-to-end tests of the Telegram channel through the real wiring: a config
// file → `serve` → the adapter on tgbotapi against the fake Bot API → the
// router → the agent loop → the go-openai client against the fake model, with
// SQLite in a temporary directory.
//
// TestTelegramCrash runs serve in child processes (this test binary, see
// TestMain) and kills them with SIGKILL where a crash could lose or double a
// reply, then restarts serve on the same database.

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/gateway"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
	"github.com/switchboard-gateway/switchboard/internal/tghtml"
	"github.com/switchboard-gateway/switchboard/llm"
)

const (
	tgToken = "7301234567:AAE2e-telegram-Secret_0123456789abcdef"

	// Telegram users; a private chat has the id of its user.
	tgAlice   int64 = 5001
	tgBob     int64 = 5002
	tgCarol   int64 = 5003
	tgDave    int64 = 5004
	tgMallory int64 = 5666 // not on the allowlist
	tgErin    int64 = 5777 // asks for access with a pairing code
)

// telegramConfig writes a serve configuration aimed at the fake model and
// the Bot API at endpoint; extra sets more of channels.telegram, more sets
// anything else.
func telegramConfig(t *testing.T, endpoint string, model *testkit.FakeLLM, pollTimeout time.Duration, extra func(*telegram.Config),
	more ...func(*config.Config)) string {
	t.Helper()
	dir := t.TempDir()
	cfg := modelConfig(model.URL)
	cfg.Store.Path = filepath.Join(dir, "switchboard.db")
	cfg.Skills.Dir = filepath.Join(dir, "skills")
	// Learning calls the model in the background after replies; these tests
	// count the model calls of turns.
	cfg.Learning.Enabled = false
	cfg.HTTP.Listen = ""
	cfg.Log.Level = "debug"
	tg := config.Section[*telegram.Config](cfg)
	tg.Enabled, tg.Token, tg.APIEndpoint, tg.PollTimeout = true, tgToken, endpoint, pollTimeout
	extra(tg)
	for _, m := range more {
		m(cfg)
	}
	return cfgfile.Write(t, cfg)
}

// allowUsers admits the Telegram users ids.
func allowUsers(ids ...int64) func(*telegram.Config) {
	return func(tg *telegram.Config) { tg.AllowUsers = userIDs(ids...) }
}

// telegramServe is a running `switchboard serve` with Telegram enabled.
type telegramServe struct {
	*serveRun
	*modelScript
	tg    *tgfake.Fake
	net   *flakyNet // between serve and tg
	model *testkit.FakeLLM
	cfg   string // the configuration file

	mu    sync.Mutex
	final map[int64]int // chat → messages the bot must have sent there in the end
}

// startTelegramServe runs serve against tg (set up by the caller) and a
// scripted model, with a 1 s long poll; extra sets more of
// channels.telegram, more anything else. It returns once the adapter polls
// for updates.
func startTelegramServe(t *testing.T, tg *tgfake.Fake, extra func(*telegram.Config), more ...func(*config.Config)) *telegramServe {
	t.Helper()
	model := testkit.NewFakeLLM(t)
	s := &telegramServe{tg: tg, net: newFlakyNet(t, tg.URL), model: model, modelScript: newModelScript(model), final: map[int64]int{}}
	s.cfg = telegramConfig(t, s.net.URL, model, time.Second, extra, more...)
	s.serveRun = startServe(t, s.cfg, func(ctx context.Context) error { return tg.WaitCalls(ctx, "getUpdates", 1) })
	return s
}

// say sends text to the bot from user in chat and returns the message id.
func (s *telegramServe) say(chat, user int64, username, text string, opts ...tgfake.MsgOption) int {
	_, id := s.tg.PushText(chat, user, username, text, opts...)
	return id
}

// mention addresses text to the bot, as a Telegram client writes it.
func (s *telegramServe) mention(text string) string { return "@" + s.tg.BotUsername + " " + text }

// waitSent waits until the bot has sent at least n messages to chat.
func (s *telegramServe) waitSent(t *testing.T, chat int64, n int) []tgfake.SentMessage {
	t.Helper()
	sent, err := waitSentTo(s.ctx(t), s.tg, chat, n)
	if err != nil {
		t.Fatalf("want %d message(s) in chat %d, have %q: %v\nstderr:\n%s", n, chat, sentTexts(sent), err, s.stderr.String())
	}
	return sent
}

// expect records how many messages chat must hold when serve has stopped:
// a late or doubled send shows up then.
func (s *telegramServe) expect(chat int64, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.final[chat] = n
}

// finish stops serve and checks what must hold once it has drained: exit
// code 0, every chat holding what was expected, every scripted answer used,
// and no secret in the log.
func (s *telegramServe) finish(t *testing.T) {
	t.Helper()
	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d, want 0; stderr:\n%s", code, s.stderr.String())
	}
	s.mu.Lock()
	total := 0
	for chat, n := range s.final {
		total += n
		if got := sentTo(s.tg.Sent(), chat); len(got) != n {
			t.Errorf("after shutdown, chat %d holds %d messages, want %d: %q", chat, len(got), n, sentTexts(got))
		}
	}
	s.mu.Unlock()
	if sent := s.tg.Sent(); len(sent) != total {
		perChat := map[int64]int{}
		for _, m := range sent {
			perChat[m.ChatID]++
		}
		t.Errorf("the bot sent %d messages in all, want %d; per chat: %v", len(sent), total, perChat)
	}
	s.checkAllAsked(t)
	logs := s.stderr.String()
	if !strings.Contains(logs, "switchboard serving") {
		t.Errorf("stderr does not hold serve's log:\n%s", logs)
	}
	checkNoSecrets(t, "serve's log", logs)
}

// checkNoSecrets fails if the bot token (whole, or its secret half in any
// escaping) or the model API key appears in text.
func checkNoSecrets(t *testing.T, what, text string) {
	t.Helper()
	_, tokenSecret, _ := strings.Cut(tgToken, ":")
	for name, secret := range map[string]string{"bot token": tgToken, "bot token's secret": tokenSecret, "API key": e2eAPIKey} {
		if strings.Contains(text, secret) {
			t.Errorf("the %s appears in %s", name, what)
		}
	}
}

// flakyNet forwards requests to the fake Bot API and can cut the connection
// of a call, as a flaky network does: the client then gets a transport
// error, whose text names the URL, bot token included.
type flakyNet struct {
	URL string

	mu   sync.Mutex
	drop map[string]bool // lower-case methods whose next call is cut
}

func newFlakyNet(t *testing.T, target string) *flakyNet {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	// A long poll ends with a cancelled request when serve stops: no log.
	proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	n := &flakyNet{drop: map[string]bool{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.cut(strings.ToLower(path.Base(r.URL.Path))) {
			panic(http.ErrAbortHandler) // close the connection without an answer
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	n.URL = srv.URL
	return n
}

// dropNext cuts the next call of method.
func (n *flakyNet) dropNext(method string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.drop[strings.ToLower(method)] = true
}

func (n *flakyNet) cut(method string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	ok := n.drop[method]
	delete(n.drop, method)
	return ok
}

// logLine returns the first line of log that contains text, or "".
func logLine(log *lineWriter, text string) string {
	for line := range strings.Lines(log.String()) {
		if strings.Contains(line, text) {
			return line
		}
	}
	return ""
}

// waitLog waits until log holds text. (A log line has no event to wait on;
// it is polled.)
// waitLogLine waits until one line of log holds every one of texts.
func waitLogLine(ctx context.Context, log *lineWriter, texts ...string) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, line := range strings.Split(log.String(), "\n") {
			if !slices.ContainsFunc(texts, func(t string) bool { return !strings.Contains(line, t) }) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for a line with %q in the log: %w", texts, ctx.Err())
		case <-tick.C:
		}
	}
}

func waitLog(ctx context.Context, log *lineWriter, text string) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(log.String(), text) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %q in the log: %w", text, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// waitSentTo waits until at least n messages were sent to chat.
func waitSentTo(ctx context.Context, tg *tgfake.Fake, chat int64, n int) ([]tgfake.SentMessage, error) {
	for {
		all := tg.Sent()
		if mine := sentTo(all, chat); len(mine) >= n {
			return mine, nil
		}
		if _, err := tg.WaitSent(ctx, len(all)+1); err != nil {
			return sentTo(tg.Sent(), chat), err
		}
	}
}

func sentTo(sent []tgfake.SentMessage, chat int64) []tgfake.SentMessage {
	var out []tgfake.SentMessage
	for _, m := range sent {
		if m.ChatID == chat {
			out = append(out, m)
		}
	}
	return out
}

func sentTexts(sent []tgfake.SentMessage) []string {
	out := make([]string, len(sent))
	for i, m := range sent {
		out[i] = m.Text
	}
	return out
}

// sendAttempts counts the sendMessage calls, failed ones included, whose
// text is text.
func sendAttempts(tg *tgfake.Fake, text string) int {
	n := 0
	for _, p := range tg.Requests("sendMessage") {
		if p.Get("text") == text {
			n++
		}
	}
	return n
}

// longTelegramReply is exactly 6,000 characters of prose in paragraphs.
func longTelegramReply() string {
	var b strings.Builder
	for i := 1; b.Len() < 6100; i++ {
		fmt.Fprintf(&b, "Paragraph %d. Switchboard renders every answer as Telegram HTML and splits a long one at paragraph ends, so that each part fits one message and nothing is lost or repeated.\n\n", i)
	}
	return strings.TrimSpace(b.String()[:5999]) + "."
}

// TestTelegramServe covers the Telegram acceptance criteria end to end on one
// serve. Each subtest talks in chats of its own.
func TestTelegramServe(t *testing.T) {
	tg := tgfake.New(t, tgToken)
	s := startTelegramServe(t, tg, allowUsers(tgAlice, tgBob, tgCarol, tgDave))

	t.Run("private message gets the reply exactly once", func(t *testing.T) {
		s.answer("Hi, I'm Alice", testkit.Reply{Text: "Hello Alice, nice to meet you."})
		s.say(tgAlice, tgAlice, "alice", "Hi, I'm Alice")
		sent := s.waitSent(t, tgAlice, 1)
		if m := sent[0]; m.Text != "Hello Alice, nice to meet you." || m.ParseMode != "HTML" || m.ReplyTo != 0 {
			t.Fatalf("sent %+v, want the model's text as HTML, not as a reply", m)
		}
		// The chat's next message runs after the first turn has ended, so a
		// second copy of the first reply would be there by now.
		s.answer("Thanks!", testkit.Reply{Text: "Glad to help."})
		s.say(tgAlice, tgAlice, "alice", "Thanks!")
		sent = s.waitSent(t, tgAlice, 2)
		if got, want := sentTexts(sent), []string{"Hello Alice, nice to meet you.", "Glad to help."}; !slices.Equal(got, want) {
			t.Fatalf("chat holds %q, want %q", got, want)
		}
		s.assertHistory(t, "Thanks!", []string{"Hi, I'm Alice", "Thanks!"}, "Hello Alice, nice to meet you.")
		s.expect(tgAlice, 2)
	})

	t.Run("group message needs a mention and the reply quotes it", func(t *testing.T) {
		const group int64 = -1001000000001
		calls := s.model.Calls()
		s.say(group, tgAlice, "alice", "good morning, everyone", tgfake.InGroup("Team"))
		s.answer("good morning, bot", testkit.Reply{Text: "Good morning, Alice!"})
		m1 := s.say(group, tgAlice, "alice", s.mention("good morning, bot"), tgfake.InGroup("Team"))
		sent := s.waitSent(t, group, 1)
		if sent[0].Text != "Good morning, Alice!" || sent[0].ReplyTo != m1 {
			t.Fatalf("sent %+v, want the reply to message %d", sent[0], m1)
		}
		// Updates are handled in order: the unaddressed one is done.
		if got := s.model.Calls() - calls; got != 1 {
			t.Errorf("model calls = %d, want 1 (only the mention)", got)
		}
		if n := s.requestsMentioning("good morning, everyone"); n != 0 {
			t.Errorf("the unaddressed message reached the model in %d request(s)", n)
		}
		if got := userTexts(s.requestFor(t, "good morning, bot")); !slices.Equal(got, []string{"good morning, bot"}) {
			t.Errorf("user messages the model saw = %q, want only the mention without the bot's @name", got)
		}
		// A reply to the bot's message addresses it without a mention.
		quoted := fmt.Sprintf("[replying to you: %q]\n%s", "Good morning, Alice!", "and to me?")
		s.answer(quoted, testkit.Reply{Text: "Good morning, Bob!"})
		m2 := s.say(group, tgBob, "bob", "and to me?", tgfake.InGroup("Team"), tgfake.ReplyToBot(sent[0].MessageID, sent[0].Text))
		sent = s.waitSent(t, group, 2)
		if sent[1].Text != "Good morning, Bob!" || sent[1].ReplyTo != m2 {
			t.Fatalf("sent %+v, want the reply to message %d", sent[1], m2)
		}
		s.expect(group, 2)
	})

	t.Run("unlisted user gets one refusal and no model call", func(t *testing.T) {
		const group int64 = -1001000000002
		calls := s.model.Calls()
		s.say(tgMallory, tgMallory, "mallory", "let me in")
		s.say(tgMallory, tgMallory, "mallory", "please?")
		s.answer("ping", testkit.Reply{Text: "pong"})
		last, _ := s.tg.PushText(group, tgAlice, "alice", s.mention("ping"), tgfake.InGroup("Ops"))
		s.waitSent(t, group, 1)
		// A refusal is sent before its update is confirmed, and updates of
		// different chats in one batch are handled side by side: once the
		// last update is confirmed, mallory's are done.
		if err := s.tg.WaitOffset(s.ctx(t), last+1); err != nil {
			t.Fatal(err)
		}
		refusals := sentTo(s.tg.Sent(), tgMallory)
		if len(refusals) != 1 {
			t.Fatalf("mallory got %q, want one refusal", sentTexts(refusals))
		}
		if m := refusals[0]; !strings.Contains(m.Text, strconv.FormatInt(tgMallory, 10)) || utf8.RuneCountInString(m.Text) > 200 {
			t.Errorf("refusal = %q, want a short text with the user's id %d", m.Text, tgMallory)
		}
		if got := s.model.Calls() - calls; got != 1 {
			t.Errorf("model calls = %d, want 1 (alice's)", got)
		}
		for _, text := range []string{"let me in", "please?"} {
			if n := s.requestsMentioning(text); n != 0 {
				t.Errorf("the refused message %q reached the model in %d request(s)", text, n)
			}
		}
		s.expect(tgMallory, 1)
		s.expect(group, 1)
	})

	t.Run("6000-character reply arrives as two valid messages", func(t *testing.T) {
		reply := longTelegramReply()
		if n := utf8.RuneCountInString(reply); n != 6000 {
			t.Fatalf("test reply has %d characters, want 6000", n)
		}
		s.answer("Tell me a long story", testkit.Reply{Text: reply})
		s.say(tgBob, tgBob, "bob", "Tell me a long story")
		sent := s.waitSent(t, tgBob, 2)
		if len(sent) != 2 {
			t.Fatalf("got %d messages, want 2", len(sent))
		}
		var visible []string
		for i, m := range sent {
			// The fake refused invalid HTML and texts over the limit; check
			// that the parts are HTML (not the plain-text fallback) anyway.
			v, err := tghtml.Validate(m.Text)
			if m.ParseMode != "HTML" || err != nil {
				t.Errorf("part %d: parse mode %q, HTML error %v", i+1, m.ParseMode, err)
			}
			if n := tghtml.UTF16Len(v); n > tgfake.MaxTextUnits {
				t.Errorf("part %d has %d UTF-16 units, want at most %d", i+1, n, tgfake.MaxTextUnits)
			}
			visible = append(visible, v)
		}
		if !sameModuloSplitWhitespace(reply, visible) {
			t.Errorf("the parts are not the reply split at whitespace:\n%q", visible)
		}
		if sent[0].ReplyTo != 0 || sent[1].ReplyTo != 0 {
			t.Errorf("parts reply to %d and %d, want no reply in a private chat", sent[0].ReplyTo, sent[1].ReplyTo)
		}
		s.expect(tgBob, 2)
	})

	t.Run("Markdown code block arrives as HTML pre/code", func(t *testing.T) {
		s.answer("Show me Go", testkit.Reply{Text: "Here is the check:\n\n```go\nif a < b && c > d {\n\treturn\n}\n```\n\n**Done.**"})
		s.say(tgCarol, tgCarol, "carol", "Show me Go")
		m := s.waitSent(t, tgCarol, 1)[0]
		v, err := tghtml.Validate(m.Text)
		if m.ParseMode != "HTML" || err != nil {
			t.Fatalf("sent %q with parse mode %q (HTML error %v), want valid HTML", m.Text, m.ParseMode, err)
		}
		for _, want := range []string{
			"<pre><code class=\"language-go\">if a &lt; b &amp;&amp; c &gt; d {\n\treturn\n}</code></pre>",
			"<b>Done.</b>",
		} {
			if !strings.Contains(m.Text, want) {
				t.Errorf("sent %q, want it to contain %q", m.Text, want)
			}
		}
		if !strings.Contains(v, "if a < b && c > d {") {
			t.Errorf("visible text %q lost the code", v)
		}
		s.expect(tgCarol, 1)
	})

	t.Run("429 on sendMessage is waited out and the reply arrives once", func(t *testing.T) {
		calls := s.tg.Calls("sendMessage")
		s.tg.FailNext("sendMessage", 429, "", 1)
		s.answer("Are you there?", testkit.Reply{Text: "Sorry for the wait."})
		s.say(tgDave, tgDave, "dave", "Are you there?")
		if sent := s.waitSent(t, tgDave, 1); sent[0].Text != "Sorry for the wait." {
			t.Fatalf("sent %q, want the model's reply", sent[0].Text)
		}
		// The next turn of the chat starts after this one has ended.
		s.answer("Good.", testkit.Reply{Text: "Still here."})
		s.say(tgDave, tgDave, "dave", "Good.")
		sent := s.waitSent(t, tgDave, 2)
		if got, want := sentTexts(sent), []string{"Sorry for the wait.", "Still here."}; !slices.Equal(got, want) {
			t.Fatalf("chat holds %q, want %q", got, want)
		}
		if got := s.tg.Calls("sendMessage") - calls; got != 3 {
			t.Errorf("sendMessage calls = %d, want 3 (the 429, its retry, the second reply)", got)
		}
		if got := sendAttempts(s.tg, "Sorry for the wait."); got != 2 {
			t.Errorf("the first reply was attempted %d times, want 2", got)
		}
		if l := logLine(s.stderr, "call failed, retrying"); !strings.Contains(l, "call=sendMessage") || !strings.Contains(l, "wait=1s") {
			t.Errorf("the log does not show a 1 s wait before the retry of sendMessage:\n%s", s.stderr.String())
		}
		s.expect(tgDave, 2)
	})

	t.Run("the bot token stays out of the log when a call fails in transit", func(t *testing.T) {
		// The typing indicator's call is cut. The model answers once the
		// adapter has logged that (the turn's end would cancel the call).
		s.net.dropNext("sendChatAction")
		logged := make(chan struct{})
		s.answer("Is my token safe?", testkit.Reply{Text: "It is.", Block: logged})
		s.say(tgCarol, tgCarol, "carol", "Is my token safe?")
		if err := waitLog(s.ctx(t), s.stderr, "typing indicator failed"); err != nil {
			t.Fatalf("%v:\n%s", err, s.stderr.String())
		}
		close(logged)
		s.waitSent(t, tgCarol, 2)
		// The failure was logged with the request's URL, token redacted.
		if line := logLine(s.stderr, "typing indicator failed"); !strings.Contains(line, "/sendChatAction") {
			t.Errorf("the log line does not name the request's URL: %s", line)
		}
		checkNoSecrets(t, "serve's log", s.stderr.String())
		s.expect(tgCarol, 2)
	})

	s.finish(t)
}

// A Bot API server without setMyCommands and sendChatAction (as some
// self-hosted ones): the bot logs it, stops asking for typing, and answers.
func TestTelegramServeWithoutOptionalMethods(t *testing.T) {
	tg := tgfake.New(t, tgToken)
	tg.Disable("setMyCommands")
	tg.Disable("sendChatAction")
	s := startTelegramServe(t, tg, allowUsers(tgAlice))
	ctx := s.ctx(t)

	// The model answers once the adapter has taken the typing indicator's
	// refusal in (the turn's end would cancel the call).
	typed := make(chan struct{})
	s.answer("Hello?", testkit.Reply{Text: "Hello, Alice.", Block: typed})
	s.say(tgAlice, tgAlice, "alice", "Hello?")
	if err := waitLog(ctx, s.stderr, "typing indicator disabled"); err != nil {
		t.Fatalf("%v:\n%s", err, s.stderr.String())
	}
	close(typed)
	if sent := s.waitSent(t, tgAlice, 1); sent[0].Text != "Hello, Alice." {
		t.Fatalf("sent %q, want the model's reply", sent[0].Text)
	}
	s.answer("Still there?", testkit.Reply{Text: "Yes."})
	s.say(tgAlice, tgAlice, "alice", "Still there?")
	s.waitSent(t, tgAlice, 2)
	s.expect(tgAlice, 2)
	s.finish(t)

	if got := tg.Calls("setMyCommands"); got != 1 {
		t.Errorf("setMyCommands calls = %d, want 1", got)
	}
	if got := tg.Calls("sendChatAction"); got != 1 {
		t.Errorf("sendChatAction calls = %d, want 1 (no more after the server refused it)", got)
	}
	if logs := s.stderr.String(); !strings.Contains(logs, "could not register bot commands") {
		t.Errorf("the log does not say that the commands were not registered:\n%s", logs)
	}
}

// Pairing: an unknown user gets a code, the operator approves it with
// `switchboard pairing approve` while serve runs, and the user is answered.
func TestTelegramPairing(t *testing.T) {
	tg := tgfake.New(t, tgToken)
	s := startTelegramServe(t, tg, func(tg *telegram.Config) { tg.Pairing = true })

	s.say(tgErin, tgErin, "erin", "may I come in?")
	notice := s.waitSent(t, tgErin, 1)[0]
	m := regexp.MustCompile(`pairing code is ([A-Z2-9]{8})\b`).FindStringSubmatch(notice.Text)
	if m == nil {
		t.Fatalf("notice %q holds no pairing code", notice.Text)
	}
	var out, errb bytes.Buffer
	code := run(s.ctx(t), []string{"pairing", "approve", m[1], "--config", s.cfg}, strings.NewReader(""), &out, &errb)
	if want := fmt.Sprintf("approved telegram user %d", tgErin); code != exitOK || !strings.Contains(out.String(), want) {
		t.Fatalf("pairing approve: code %d, stdout %q, stderr %q; want 0 and %q", code, out.String(), errb.String(), want)
	}

	// The serving gateway tells her she is in.
	if sent := s.waitSent(t, tgErin, 2); sent[1].Text != gateway.PairingGreeting {
		t.Fatalf("chat holds %q, want the greeting after the approval", sentTexts(sent))
	}

	s.answer("thanks for letting me in", testkit.Reply{Text: "Welcome, Erin."})
	s.say(tgErin, tgErin, "erin", "thanks for letting me in")
	if sent := s.waitSent(t, tgErin, 3); sent[2].Text != "Welcome, Erin." {
		t.Fatalf("chat holds %q, want the model's reply after the code", sentTexts(sent))
	}
	if got := s.model.Calls(); got != 1 {
		t.Errorf("model calls = %d, want 1 (only after the approval)", got)
	}
	if n := s.requestsMentioning("may I come in?"); n != 0 {
		t.Errorf("the message before the approval reached the model in %d request(s)", n)
	}
	s.expect(tgErin, 3)
	s.finish(t)
}

// crashRig is the parent's side of a crash test: the fakes, one database,
// and serve children started on it one after another.
type crashRig struct {
	tg       *tgfake.Fake
	model    *testkit.FakeLLM
	cfg      string
	children []*crashChild
}

// crashChild is `switchboard serve` in a child process.
type crashChild struct {
	cmd    *exec.Cmd
	stderr *lineWriter
	done   chan struct{} // closed when the process has exited
}

func newCrashRig(t *testing.T) *crashRig {
	t.Helper()
	tg, model := tgfake.New(t, tgToken), testkit.NewFakeLLM(t)
	// A long poll: a child stops by signal, which ends its poll at once, and
	// an idle poll must not end (and take the failure armed for the next
	// poll) while the test pushes an update.
	r := newChildRig(t, model, telegramConfig(t, tg.URL, model, 30*time.Second, allowUsers(tgAlice)))
	r.tg = tg
	return r
}

// newChildRig is a crash rig serving cfg, whatever its channels. Call it
// after creating the fakes (and anything between them and serve).
func newChildRig(t *testing.T, model *testkit.FakeLLM, cfg string) *crashRig {
	t.Helper()
	r := &crashRig{model: model, cfg: cfg}
	// Registered after the fakes, so it runs before they close.
	t.Cleanup(func() {
		for i, c := range r.children {
			c.kill()
			if t.Failed() {
				t.Logf("stderr of serve child %d:\n%s", i+1, c.stderr.String())
			}
		}
	})
	return r
}

// start runs a child serving the rig's configuration.
func (r *crashRig) start(t *testing.T) *crashChild {
	t.Helper()
	// The pattern matches no test: a child never runs tests, even if it
	// did not see the environment variable.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+r.cfg)
	c := &crashChild{cmd: cmd, stderr: newLineWriter(), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.stderr, c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.children = append(r.children, c)
	go func() {
		_ = cmd.Wait()
		close(c.done)
	}()
	return c
}

// kill sends SIGKILL and waits for the process to end.
func (c *crashChild) kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
}

// crash kills the child and checks that it was still running.
func (c *crashChild) crash(t *testing.T) {
	t.Helper()
	c.kill()
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the child was not running when killed (%v); stderr:\n%s", c.cmd.ProcessState, c.stderr.String())
	}
}

// stop ends the child with SIGTERM, as an operator would, and checks that
// it exits with 0 after draining its turns.
func (c *crashChild) stop(t *testing.T) {
	t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(e2eWait)
	defer timer.Stop()
	select {
	case <-c.done:
	case <-timer.C:
		t.Fatalf("the child did not stop within %s after SIGTERM", e2eWait)
	}
	if code := c.cmd.ProcessState.ExitCode(); code != exitOK {
		t.Fatalf("the child exited with %d (%v), want 0; stderr:\n%s", code, c.cmd.ProcessState, c.stderr.String())
	}
	checkNoSecrets(t, "the child's log", c.stderr.String())
}

func (r *crashRig) waitModelCalls(t *testing.T, n int) {
	t.Helper()
	if err := r.model.WaitCalls(waitCtx(t), n); err != nil {
		t.Fatal(err)
	}
}

func (r *crashRig) waitSent(t *testing.T, chat int64, n int) []tgfake.SentMessage {
	t.Helper()
	sent, err := waitSentTo(waitCtx(t), r.tg, chat, n)
	if err != nil {
		t.Fatalf("want %d message(s) in chat %d, have %q: %v", n, chat, sentTexts(sent), err)
	}
	return sent
}

// TestTelegramCrash kills serve with SIGKILL at the points where a crash
// could lose a message or answer it twice, restarts it on the same database,
// and checks that the message is answered exactly once in all.
func TestTelegramCrash(t *testing.T) {
	// never is a reply that waits until its request ends with the process.
	never := make(chan struct{})

	t.Run("while the model call is in flight", func(t *testing.T) {
		r := newCrashRig(t)
		const reply = "The answer, once."
		r.model.Push(testkit.Reply{Text: reply, Block: never}, testkit.Reply{Text: reply})
		r.tg.PushText(tgAlice, tgAlice, "alice", "What is the answer?")
		c1 := r.start(t)
		r.waitModelCalls(t, 1)
		c1.crash(t)

		c2 := r.start(t)
		r.waitSent(t, tgAlice, 1)
		c2.stop(t)
		if got := sendAttempts(r.tg, reply); got != 1 {
			t.Errorf("the reply was sent %d times, want 1", got)
		}
		if got := len(r.tg.Sent()); got != 1 {
			t.Errorf("the bot sent %d messages, want 1: %q", got, sentTexts(r.tg.Sent()))
		}
		reqs := r.model.Requests()
		if len(reqs) != 2 {
			t.Fatalf("model calls = %d, want 2 (the one cut short, the resumed one)", len(reqs))
		}
		if got := userTexts(reqs[1]); !slices.Equal(got, []string{"What is the answer?"}) {
			t.Errorf("user messages of the resumed call = %q, want the message once", got)
		}
		if !strings.Contains(c2.stderr.String(), "resuming unfinished message") {
			t.Errorf("the restarted serve did not resume the message:\n%s", c2.stderr.String())
		}
	})

	t.Run("after send_message was confirmed", func(t *testing.T) {
		r := newCrashRig(t)
		const sentByTool = "Sent by the tool, once."
		r.model.Push(
			testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c1", "send_message", `{"text":"`+sentByTool+`"}`)}},
			testkit.Reply{Text: "This final text must never be sent.", Block: never},
			testkit.Reply{Text: "Second answer."},
		)
		r.tg.PushText(tgAlice, tgAlice, "alice", "Please confirm by message.")
		c1 := r.start(t)
		// The model is asked again only after the tool's send was
		// confirmed and recorded.
		r.waitModelCalls(t, 2)
		if got := sendAttempts(r.tg, sentByTool); got != 1 {
			t.Fatalf("before the kill, the tool's message was sent %d times, want 1", got)
		}
		c1.crash(t)

		// The restarted serve replays the unfinished message before it
		// polls, so this one queues behind it in the chat.
		r.tg.PushText(tgAlice, tgAlice, "alice", "And now?")
		c2 := r.start(t)
		r.waitSent(t, tgAlice, 2)
		c2.stop(t)
		if got, want := sentTexts(r.tg.Sent()), []string{sentByTool, "Second answer."}; !slices.Equal(got, want) {
			t.Errorf("the bot sent %q, want %q", got, want)
		}
		if got := sendAttempts(r.tg, sentByTool); got != 1 {
			t.Errorf("the tool's message was sent %d times, want 1", got)
		}
		reqs := r.model.Requests()
		if len(reqs) != 3 {
			t.Fatalf("model calls = %d, want 3 (tool step, the one cut short, the next message)", len(reqs))
		}
		if got, want := userTexts(reqs[2]), []string{"Please confirm by message.", "And now?"}; !slices.Equal(got, want) {
			t.Errorf("user messages of the last call = %q, want %q (the first not asked again)", got, want)
		}
	})

	t.Run("before the offset was confirmed", func(t *testing.T) {
		r := newCrashRig(t)
		ctx := waitCtx(t)
		const reply = "Still here, once."
		r.model.Push(testkit.Reply{Text: reply, Block: never}, testkit.Reply{Text: reply})
		c1 := r.start(t)
		if err := r.tg.WaitCalls(ctx, "getUpdates", 1); err != nil {
			t.Fatal(err)
		}
		// The poll after the update's delivery, which would confirm it,
		// fails with a long retry_after: the update stays unconfirmed.
		r.tg.FailNext("getUpdates", 429, "", 60)
		update, _ := r.tg.PushText(tgAlice, tgAlice, "alice", "Are you still there?")
		// Kill once the model call arrived and the child took the failure
		// (else the restarted child would).
		r.waitModelCalls(t, 1)
		if err := r.tg.WaitCalls(ctx, "getUpdates", 2); err != nil {
			t.Fatal(err)
		}
		c1.crash(t)
		if n, offsets := r.tg.Pending(), r.tg.Offsets(); n != 1 || slices.ContainsFunc(offsets, func(o int) bool { return o > update }) {
			t.Fatalf("before the restart: %d pending update(s), offsets %v; want update %d unconfirmed", n, offsets, update)
		}

		c2 := r.start(t)
		r.waitSent(t, tgAlice, 1)
		// The redelivered update is confirmed this time.
		if err := r.tg.WaitOffset(ctx, update+1); err != nil {
			t.Fatal(err)
		}
		c2.stop(t)
		if got := sendAttempts(r.tg, reply); got != 1 {
			t.Errorf("the reply was sent %d times, want 1", got)
		}
		if got := len(r.tg.Sent()); got != 1 {
			t.Errorf("the bot sent %d messages, want 1: %q", got, sentTexts(r.tg.Sent()))
		}
		if got := r.model.Calls(); got != 2 {
			t.Errorf("model calls = %d, want 2 (the one cut short, the resumed one)", got)
		}
		if l := c2.stderr.String(); !strings.Contains(l, "duplicate message ignored") {
			t.Errorf("the restarted serve did not receive the update again and drop it as a duplicate:\n%s", l)
		}
	})
}
