package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/gateway"
	"github.com/switchboard-gateway/switchboard/httpapi"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/llm"
)

// lineWriter collects output and hands every "bot>" line to a channel.
type lineWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	part string
	bot  chan string
}

func newLineWriter() *lineWriter { return &lineWriter{bot: make(chan string, 100)} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	w.part += string(p)
	for {
		i := strings.IndexByte(w.part, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimPrefix(w.part[:i], "\r")
		w.part = w.part[i+1:]
		if rest, ok := strings.CutPrefix(line, "bot> "); ok {
			w.bot <- rest
		}
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// session runs `switchboard chat` with a pipe for stdin.
type session struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *lineWriter
	err  *lineWriter
	done chan int
}

func startChat(t *testing.T, cfgPath string) *session {
	t.Helper()
	pr, pw := io.Pipe()
	s := &session{t: t, in: pw, out: newLineWriter(), err: newLineWriter(), done: make(chan int, 1)}
	go func() { s.done <- run(t.Context(), []string{"chat", "--config", cfgPath}, pr, s.out, s.err) }()
	return s
}

func (s *session) say(text string) string {
	s.t.Helper()
	if _, err := fmt.Fprintln(s.in, text); err != nil {
		s.t.Fatal(err)
	}
	select {
	case reply := <-s.out.bot:
		return reply
	case code := <-s.done:
		s.t.Fatalf("chat exited with %d; stderr:\n%s", code, s.err.String())
	case <-s.t.Context().Done():
		s.t.Fatalf("no reply to %q; output:\n%s\nstderr:\n%s", text, s.out.String(), s.err.String())
	}
	return ""
}

func (s *session) quit() int {
	s.t.Helper()
	s.in.Close() // Ctrl-D
	select {
	case code := <-s.done:
		return code
	case <-s.t.Context().Done():
		s.t.Fatal("chat did not exit at end of input")
	}
	return -1
}

// noLearning turns background learning off for tests that script the
// model's replies in order: its calls would take replies meant for turns.
func noLearning(cfg *config.Config) { cfg.Learning.Enabled = false }

// The terminal chat: a multi-turn conversation through the real router and
// loop; after a restart on the same database the history is there.
func TestChatConversationSurvivesRestart(t *testing.T) {
	fake := testkit.NewFakeLLM(t)
	db := filepath.Join(t.TempDir(), "chat.db")
	c := config.Default()
	c.LLM.BaseURL, c.LLM.APIKey, c.LLM.Model = fake.URL, "sk-test", "fake-model"
	c.Store.Path = db
	noLearning(c)
	cfg := cfgfile.Write(t, c)

	fake.Push(
		testkit.Reply{Text: "Nice to meet you, Ada."},
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c1", "current_time", `{}`)}},
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c2", "send_message", `{"text":"It is tea time."}`)}},
		testkit.Reply{Text: "done"},
	)
	s := startChat(t, cfg)
	if got := s.say("Hi, I'm Ada"); got != "Nice to meet you, Ada." {
		t.Fatalf("reply 1 = %q", got)
	}
	if got := s.say("What time is it?"); got != "It is tea time." {
		t.Fatalf("reply 2 = %q", got)
	}
	if code := s.quit(); code != 0 {
		t.Fatalf("exit code %d; stderr: %s", code, s.err.String())
	}
	if !strings.Contains(s.out.String(), "current_time({}) → ok") {
		t.Fatalf("tool activity not shown:\n%s", s.out.String())
	}
	if strings.Count(s.out.String(), "bot> ") != 2 {
		t.Fatalf("want exactly two replies (no doubles):\n%s", s.out.String())
	}

	// Restart on the same database: the model sees the earlier conversation.
	fake.Push(testkit.Reply{Text: "You are Ada."})
	s = startChat(t, cfg)
	if got := s.say("Who am I?"); got != "You are Ada." {
		t.Fatalf("reply 3 = %q", got)
	}
	s.quit()
	reqs := fake.Requests()
	last := reqs[len(reqs)-1].Messages
	var contents []string
	for _, m := range last {
		if m.Role == llm.RoleUser || (m.Role == llm.RoleAssistant && m.Content != "") {
			contents = append(contents, m.Content)
		}
	}
	want := []string{"Hi, I'm Ada", "Nice to meet you, Ada.", "What time is it?", "done", "Who am I?"}
	if strings.Join(contents, "|") != strings.Join(want, "|") {
		t.Fatalf("history after restart = %q; want %q", contents, want)
	}
}

// An unreachable model: the user gets a short error in the chat, the turn is
// recorded as failed, and the chat keeps serving.
func TestChatUnreachableModel(t *testing.T) {
	fake := testkit.NewFakeLLM(t)
	fake.SetDefault(&testkit.Reply{Status: 503})
	db := filepath.Join(t.TempDir(), "chat.db")
	c := config.Default()
	c.LLM.BaseURL, c.LLM.Model, c.LLM.MaxRetries = fake.URL, "fake-model", 1
	c.Store.Path = db
	noLearning(c)
	cfg := cfgfile.Write(t, c)
	s := startChat(t, cfg)
	if got := s.say("hello?"); !strings.Contains(got, "couldn't reach the language model") {
		t.Fatalf("reply = %q", got)
	}
	fake.SetDefault(&testkit.Reply{Text: "I'm back."})
	if got := s.say("hello again"); got != "I'm back." {
		t.Fatalf("reply after recovery = %q", got)
	}
	s.quit()
	if !strings.Contains(s.out.String(), "the model server did not answer (") {
		t.Fatalf("the failure is not shown:\n%s", s.out.String())
	}
}

// apiOnlyConfig writes a configuration with only the HTTP API as a channel,
// on a free loopback port, and returns it and the port's address.
func apiOnlyConfig(t *testing.T, fake *testkit.FakeLLM) (cfg, addr string) {
	t.Helper()
	return apiConfigOn(t, fake, filepath.Join(t.TempDir(), "api.db"))
}

// apiConfigOn is apiOnlyConfig with its store at dbPath.
func apiConfigOn(t *testing.T, fake *testkit.FakeLLM, dbPath string) (cfg, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	ln.Close()
	c := config.Default()
	c.LLM.BaseURL, c.LLM.Model = fake.URL, "fake-model"
	c.Learning.Enabled = false
	c.Store.Path = dbPath
	c.HTTP.Listen = addr
	cfg = cfgfile.Write(t, c)
	return cfg, addr
}

// serve runs with only the OpenAI-compatible API as its channel.
func TestServeWithOnlyTheHTTPAPI(t *testing.T) {
	fake := testkit.NewFakeLLM(t)
	fake.SetDefault(&testkit.Reply{Text: "hello from the API"})
	cfg, addr := apiOnlyConfig(t, fake)
	serve := startServe(t, cfg, func(ctx context.Context) error {
		tick := time.NewTicker(10 * time.Millisecond) // polling a port until it answers
		defer tick.Stop()
		for {
			if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
		}
	})
	body := strings.NewReader(`{"model":"switchboard","user":"ada","messages":[{"role":"user","content":"hi"}]}`)
	resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json", body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 ||
		out.Choices[0].Message.Content != "hello from the API" {
		t.Fatalf("status %d, %+v, %v\n%s", resp.StatusCode, out, err, serve.stderr.String())
	}
	if code := serve.stop(t); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
}

// A stop asked for while serve starts (here just before the router loads
// the unfinished messages) is a clean stop, exit 0, not a failure; and
// /readyz does not answer ready before the router has started.
func TestStopWhileStarting(t *testing.T) {
	cfg, addr := apiOnlyConfig(t, testkit.NewFakeLLM(t))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var readyz int
	var startup httpapi.Check
	hook := func() {
		defer cancel()
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			t.Errorf("readyz while starting: %v", err)
			return
		}
		defer resp.Body.Close()
		var rd httpapi.Readiness
		readyz = resp.StatusCode
		if err := json.NewDecoder(resp.Body).Decode(&rd); err != nil {
			t.Errorf("readyz while starting: %v", err)
		}
		startup = rd.Checks["startup"]
	}
	stderr := newLineWriter()
	code := runWith(ctx, gateway.Options{BeforeRouterStart: hook}, []string{"serve", "--config", cfg}, strings.NewReader(""), io.Discard, stderr)
	if code != exitOK || strings.Contains(stderr.String(), "level=ERROR") || !strings.Contains(stderr.String(), "stopped while starting") {
		t.Errorf("serve stopped while starting: exit %d, want 0, log:\n%s", code, stderr.String())
	}
	if readyz != http.StatusServiceUnavailable || startup.OK || !strings.Contains(startup.Detail, "starting") {
		t.Errorf("readyz before the router started: %d, startup check %+v; want 503 and a failing startup check", readyz, startup)
	}
}
