package e2e

// Tests of `serve` as a long-lived service: the HTTP server next to the
// Telegram channel, metrics after a scripted turn, SIGHUP, a channel that
// fails and is retried, and graceful shutdown with a turn in flight.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

const (
	svcTGToken   = "7309876543:AAF-service-Secret_abcdef0123456789"
	svcHTTPToken = "svc-http-token-0123456789abcdef"
	svcWait      = 30 * time.Second
	svcAda       = int64(6001)
	svcBob       = int64(6002)
)

// svcLog collects serve's log and wakes waiters on every write.
type svcLog struct{ testkit.SyncBuffer }

func newSvcLog() *svcLog { return &svcLog{} }

// waitFor returns the first log line matching re, waiting for it.
func (l *svcLog) waitFor(ctx context.Context, re *regexp.Regexp) (string, error) {
	m, err := l.WaitFor(ctx, func(text string) (string, bool) {
		m := re.FindString(text)
		return m, m != ""
	})
	if err != nil {
		return "", fmt.Errorf("waiting for %s in the log: %w", re, err)
	}
	return m, nil
}

// svcServe is `switchboard serve` in this process.
type svcServe struct {
	t      *testing.T
	log    *svcLog
	cancel context.CancelFunc
	done   chan int
	url    string // the HTTP server, once listening
}

// svcSettings is the services tests' configuration: the fake model and
// Telegram, a database and skills folder in dir, the HTTP server on a free
// port, behind a token.
func svcSettings(dir string, model *testkit.FakeLLM, tg *tgfake.Fake) *config.Config {
	cfg := config.Default()
	cfg.LLM.BaseURL, cfg.LLM.APIKey, cfg.LLM.Model, cfg.LLM.MaxRetries = model.URL, "sk-service-test", "fake-model", 0
	cfg.Store.Path = filepath.Join(dir, "switchboard.db")
	cfg.Skills.Dir = filepath.Join(dir, "skills")
	// Learning calls the model in the background after replies; these tests
	// count the model calls of turns.
	cfg.Learning.Enabled = false
	cfg.HTTP.Listen, cfg.HTTP.Token = "127.0.0.1:0", svcHTTPToken
	cfg.Log.Level = "info"
	c := config.Section[*telegram.Config](cfg)
	c.Enabled, c.Token, c.APIEndpoint, c.PollTimeout = true, svcTGToken, tg.URL, time.Second
	c.AllowUsers = userIDs(svcAda)
	return cfg
}

// svcConfig writes cfg to config.yaml in dir and returns its path.
func svcConfig(t *testing.T, dir string, cfg *config.Config) string {
	t.Helper()
	path := filepath.Join(dir, "config.yaml")
	if err := cfgfile.WriteFile(path, cfg); err != nil {
		t.Fatal(err)
	}
	return path
}

var listenLine = regexp.MustCompile(`http listening"? addr=(\S+)`)

func startSvc(t *testing.T, cfg string, tg *tgfake.Fake) *svcServe {
	t.Helper()
	s := &svcServe{t: t, log: newSvcLog(), done: make(chan int, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		s.done <- run(ctx, []string{"serve", "--config", cfg}, strings.NewReader(""), io.Discard, s.log)
	}()
	t.Cleanup(func() { s.stop() })
	wctx, wcancel := context.WithTimeout(t.Context(), svcWait)
	defer wcancel()
	go func() { // serve exiting early ends the wait
		select {
		case code := <-s.done:
			s.done <- code
			wcancel()
		case <-wctx.Done():
		}
	}()
	line, err := s.log.waitFor(wctx, listenLine)
	if err != nil {
		t.Fatalf("serve did not listen: %v\n%s", err, s.log.String())
	}
	s.url = "http://" + listenLine.FindStringSubmatch(line)[1]
	if err := tg.WaitCalls(wctx, "getUpdates", 1); err != nil {
		t.Fatalf("serve did not poll Telegram: %v\n%s", err, s.log.String())
	}
	return s
}

// stop is SIGTERM: it returns serve's exit code.
func (s *svcServe) stop() int {
	s.cancel()
	select {
	case code := <-s.done:
		s.done <- code
		return code
	case <-time.After(svcWait):
		s.t.Errorf("serve did not stop within %s:\n%s", svcWait, s.log.String())
		return -1
	}
}

// waitReady polls /readyz until it answers 200 or svcWait passes, and
// returns the last answer. Channels report connected as their Run starts,
// a moment after Telegram's first poll, which startSvc waits for.
func (s *svcServe) waitReady() (int, string) {
	s.t.Helper()
	deadline := time.Now().Add(svcWait)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		code, body := s.get("/readyz")
		if code == http.StatusOK || time.Now().After(deadline) {
			return code, body
		}
		<-tick.C
	}
}

func (s *svcServe) get(path string) (int, string) {
	s.t.Helper()
	req, _ := http.NewRequestWithContext(s.t.Context(), "GET", s.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+svcHTTPToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func svcCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), svcWait)
	t.Cleanup(cancel)
	return ctx
}

func waitTG(t *testing.T, tg *tgfake.Fake, chat int64, n int) []tgfake.SentMessage {
	t.Helper()
	ctx := svcCtx(t)
	for {
		var mine []tgfake.SentMessage
		all := tg.Sent()
		for _, m := range all {
			if m.ChatID == chat {
				mine = append(mine, m)
			}
		}
		if len(mine) >= n {
			return mine
		}
		if _, err := tg.WaitSent(ctx, len(all)+1); err != nil {
			t.Fatalf("want %d message(s) in chat %d, have %d: %v", n, chat, len(mine), err)
		}
	}
}

func TestServeAsAService(t *testing.T) {
	tg := tgfake.New(t, svcTGToken)
	model := testkit.NewFakeLLM(t)
	dir := t.TempDir()
	settings := svcSettings(dir, model, tg)
	cfg := svcConfig(t, dir, settings)
	s := startSvc(t, cfg, tg)

	// Health needs no token; readiness does, and is green once Telegram
	// polls, the store takes writes and the model server answers.
	resp, err := http.Get(s.url + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	code, body := s.waitReady()
	var rd struct {
		Ready    bool
		Channels map[string]struct{ OK bool }
	}
	if err := json.Unmarshal([]byte(body), &rd); err != nil || code != http.StatusOK || !rd.Ready ||
		!rd.Channels["telegram"].OK || !rd.Channels["http"].OK {
		t.Fatalf("readyz: %d %s", code, body)
	}

	// A scripted turn through Telegram shows up in the metrics and on the
	// dashboard.
	model.Push(
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c1", "current_time", `{}`)}},
		testkit.Reply{Text: "It is tea time."},
	)
	tg.PushText(svcAda, svcAda, "ada", "What time is it?")
	if sent := waitTG(t, tg, svcAda, 1); sent[0].Text != "It is tea time." {
		t.Fatalf("reply = %q", sent[0].Text)
	}
	// The turn ends after its reply went out.
	if _, err := s.log.waitFor(svcCtx(t), regexp.MustCompile(`turn done"? .*turn_id=1 `)); err != nil {
		t.Fatal(err)
	}
	_, metrics := s.get("/metrics")
	for _, want := range []string{
		`switchboard_turns_total{channel="telegram",stop_reason="end_turn"} 1`,
		`switchboard_tool_calls_total{outcome="ok",tool="current_time"} 1`,
		`switchboard_channel_up{channel="telegram"} 1`,
		`switchboard_messages_sent_total{channel="telegram"} 1`,
		`switchboard_model_request_duration_seconds_count{model="fake-model",outcome="ok"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if !strings.Contains(metrics, `switchboard_background_jobs_total{job="learning",outcome="ok"} 0`) {
		t.Error("metrics lack the learning jobs")
	}
	code, page := s.get("/")
	if code != http.StatusOK || !strings.Contains(page, `data-channel="telegram"`) || !strings.Contains(page, "current_time") {
		t.Errorf("dashboard: %d, missing the channel or the tool call", code)
	}
	if !strings.Contains(page, "No scheduled jobs.") || !strings.Contains(page, "No profiles yet.") {
		t.Error("the dashboard does not show the (empty) scheduled jobs and users")
	}

	// SIGHUP: the log level and the allowlist change at once; a changed
	// model only after a restart, which the log says.
	settings.Log.Level = "debug"
	config.Section[*telegram.Config](settings).AllowUsers = userIDs(svcAda, svcBob)
	settings.LLM.MaxRetries = 2
	svcConfig(t, dir, settings)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	ctx := svcCtx(t)
	for _, re := range []string{`reload: log level changed"? level=debug`, `reload: access rules changed"? channel=telegram`,
		`reload: these settings changed but only take effect after a restart"? keys=\[llm\]`} {
		if _, err := s.log.waitFor(ctx, regexp.MustCompile(re)); err != nil {
			t.Fatalf("%v\n%s", err, s.log.String())
		}
	}
	model.Push(
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c2", "current_time", `{}`)}},
		testkit.Reply{Text: "Hello Bob."},
	)
	tg.PushText(svcBob, svcBob, "bob", "Hi, I'm new here")
	if sent := waitTG(t, tg, svcBob, 1); sent[0].Text != "Hello Bob." {
		t.Fatalf("reply to the newly allowed user = %q", sent[0].Text)
	}

	if code := s.stop(); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, s.log.String())
	}
	out := s.log.String()
	for _, secret := range []string{svcTGToken, svcHTTPToken, "sk-service-test"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log shows a secret (%q...)", secret[:6])
		}
	}
	if !strings.Contains(out, "level=DEBUG") {
		t.Error("no debug line after the reload to debug")
	}
}

// SIGTERM with a turn in flight: given enough shutdown_timeout the turn
// finishes and its reply is sent before serve exits; with too little, it is
// checkpointed, and the restarted serve completes it. Either way the user
// gets exactly one reply.
func TestServeGracefulShutdown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		timeout  time.Duration
		finishes bool
	}{
		{"turn finishes within the timeout", 30 * time.Second, true},
		{"turn is checkpointed and resumed after a restart", 100 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := tgfake.New(t, svcTGToken)
			model := testkit.NewFakeLLM(t)
			dir := t.TempDir()
			settings := svcSettings(dir, model, tg)
			settings.ShutdownTimeout = tc.timeout
			cfg := svcConfig(t, dir, settings)
			s := startSvc(t, cfg, tg)

			release := make(chan struct{})
			model.Push(
				testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c1", "current_time", `{}`)}},
				testkit.Reply{Text: "Done thinking.", Block: release},
			)
			tg.PushText(svcAda, svcAda, "ada", "Think hard")
			ctx := svcCtx(t)
			if err := model.WaitCalls(ctx, 2); err != nil { // the second step is in flight
				t.Fatal(err)
			}
			s.cancel() // SIGTERM
			if _, err := s.log.waitFor(ctx, regexp.MustCompile(`shutting down"? timeout=`)); err != nil {
				t.Fatal(err)
			}
			if tc.finishes {
				close(release)
			}
			if code := s.stop(); code != 0 {
				t.Fatalf("exit code %d:\n%s", code, s.log.String())
			}
			if !tc.finishes {
				close(release)
				if n := len(tg.Sent()); n != 0 {
					t.Fatalf("%d message(s) sent by the checkpointed turn", n)
				}
				st, err := store.Open(t.Context(), filepath.Join(dir, "switchboard.db"))
				if err != nil {
					t.Fatal(err)
				}
				pending, err := st.PendingInbox(t.Context())
				st.Close()
				if err != nil || len(pending) != 1 {
					t.Fatalf("pending messages after the checkpoint = %v, %v; want the one in flight", pending, err)
				}
				// Restart: the turn resumes from its stored steps.
				model.Push(testkit.Reply{Text: "Done thinking."})
				s = startSvc(t, cfg, tg)
			}
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("serve's log:\n%s", s.log.String())
				}
			})
			sent := waitTG(t, tg, svcAda, 1)
			if sent[0].Text != "Done thinking." {
				t.Fatalf("reply = %q", sent[0].Text)
			}
			if code := s.stop(); code != 0 {
				t.Fatalf("exit code %d", code)
			}
			if got := waitTG(t, tg, svcAda, 1); len(got) != 1 {
				t.Fatalf("%d replies, want exactly 1", len(got))
			}
			st, err := store.Open(t.Context(), filepath.Join(dir, "switchboard.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			pending, err := st.PendingInbox(t.Context())
			if err != nil || len(pending) != 0 {
				t.Fatalf("pending messages at the end = %v, %v", pending, err)
			}
			turns, err := st.RecentTurns(t.Context(), 10)
			if err != nil || len(turns) != 1 || turns[0].Status != store.TurnCompleted {
				t.Fatalf("turns = %+v, %v; want one completed turn", turns, err)
			}
			if !tc.finishes {
				// The resumed turn did not run its first step again.
				reqs := model.Requests()
				last := reqs[len(reqs)-1].Messages
				tools := 0
				for _, m := range last {
					if m.Role == llm.RoleTool {
						tools++
					}
				}
				if tools != 1 {
					t.Fatalf("the resumed turn's request holds %d tool results, want the stored 1", tools)
				}
			}
		})
	}
}
