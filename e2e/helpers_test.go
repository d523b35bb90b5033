package e2e

// Helpers shared by the end-to-end tests of every channel, and the entry
// point of the child processes of the crash tests.

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/cli"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/gateway"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// Exit codes of the command line.
const (
	exitOK     = cli.ExitOK
	exitFail   = cli.ExitFail
	exitConfig = cli.ExitConfig
)

// run is the command line as the binary runs it (version "dev"), on these
// streams.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runWith(ctx, gateway.Options{}, args, stdin, stdout, stderr)
}

// runWith is run with more options for the gateway serve or chat builds.
func runWith(ctx context.Context, opts gateway.Options, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.RunWith(ctx, "dev", args, cli.Stdio{In: stdin, Out: stdout, Err: stderr}, opts)
}

// modelConfig is the built-in configuration aimed at the scripted model at
// url: the e2e API key, model fake-model, no retries.
func modelConfig(url string) *config.Config {
	cfg := config.Default()
	cfg.LLM.BaseURL, cfg.LLM.APIKey, cfg.LLM.Model, cfg.LLM.MaxRetries = url, e2eAPIKey, "fake-model", 0
	return cfg
}

// userIDs lists Telegram user ids as allow_users holds them.
func userIDs(ids ...int64) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.FormatInt(id, 10)
	}
	return out
}

// crashChildEnv names the configuration file a crash-test child serves. A
// test binary started with it set runs `switchboard serve` instead of the
// tests, until SIGTERM (or until the parent kills it).
const crashChildEnv = "SWITCHBOARD_CRASH_CHILD"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(crashChildEnv); cfg != "" {
		os.Exit(runCrashChild(cfg))
	}
	waitersRunTogether()
	code := testkit.RunTests(m) // then says which tests skipped and why
	if checkout.dir != "" {
		os.RemoveAll(checkout.dir)
	}
	os.Exit(code)
}

// Most parallel tests here wait on the wall clock (outages of 45–60 s
// while replies sit in the outbox, a server that starts later), but go test
// runs no more than -parallel (GOMAXPROCS) of them at once, so they queued
// behind each other and behind the chaos rigs. Unless -parallel is given,
// waitersRunTogether lets all of them run at once; the tests that keep a
// core busy or measure wall time under load (the chaos rigs, the live
// previews) call parallelBusy instead of t.Parallel and hold one of
// busySlots, one per core, so no more of those run together than before.
func waitersRunTogether() {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", "32")
	}
}

var busySlots = make(chan struct{}, runtime.GOMAXPROCS(0))

// parallelBusy is t.Parallel for a test that keeps a core busy: it runs in
// the parallel phase with at most one busy test per core at a time.
func parallelBusy(t *testing.T) {
	t.Helper()
	t.Parallel()
	busySlots <- struct{}{}
	t.Cleanup(func() { <-busySlots })
}

// runCrashChild is `switchboard serve --config cfg` as the real binary runs it.
func runCrashChild(cfg string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return run(ctx, []string{"serve", "--config", cfg}, strings.NewReader(""), os.Stdout, os.Stderr)
}

// serveRun is `switchboard serve` running in this process, as cli.Run runs
// it, until stop.
type serveRun struct {
	stderr *lineWriter

	cancel context.CancelFunc
	done   chan struct{} // closed when run has returned code
	code   int
	once   sync.Once
	exit   int // what stop returns
}

// startServe runs serve with the configuration file cfg and waits until
// ready returns nil; ready's context ends early if serve exits. serve is
// stopped when the test ends, if not before.
func startServe(t *testing.T, cfg string, ready func(ctx context.Context) error) *serveRun {
	t.Helper()
	return startServeWith(t, cfg, gateway.Options{}, ready)
}

// startServeWith is startServe with more options for the gateway.
func startServeWith(t *testing.T, cfg string, opts gateway.Options, ready func(ctx context.Context) error) *serveRun {
	t.Helper()
	s := &serveRun{stderr: newLineWriter(), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.done)
		s.code = runWith(ctx, opts, []string{"serve", "--config", cfg}, strings.NewReader(""), io.Discard, s.stderr)
	}()
	// Registered after the caller's fakes and temporary directories, so it
	// runs before they go away.
	t.Cleanup(func() { s.stop(t) })

	wctx, wcancel := context.WithTimeout(t.Context(), e2eWait)
	defer wcancel()
	go func() {
		select {
		case <-s.done:
			wcancel()
		case <-wctx.Done():
		}
	}()
	if err := ready(wctx); err != nil {
		t.Fatalf("serve did not get ready (%v); stderr:\n%s", err, s.stderr.String())
	}
	return s
}

// stop ends serve and returns its exit code (-1 if it did not stop).
func (s *serveRun) stop(t *testing.T) int {
	s.once.Do(func() {
		s.cancel()
		timer := time.NewTimer(e2eWait)
		defer timer.Stop()
		select {
		case <-s.done:
			s.exit = s.code
		case <-timer.C:
			s.exit = -1
			t.Errorf("serve did not stop within %s; stderr:\n%s", e2eWait, s.stderr.String())
		}
	})
	return s.exit
}

// ctx bounds one wait of a test by e2eWait.
func (s *serveRun) ctx(t *testing.T) context.Context { return waitCtx(t) }

// waitCtx bounds one wait of a test by e2eWait.
func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), e2eWait)
	t.Cleanup(cancel)
	return ctx
}

// modelScript answers the fake model's requests by their newest user
// message rather than from one queue, so a subtest that fails leaves the
// answers of the others alone.
type modelScript struct {
	fake *testkit.FakeLLM

	mu      sync.Mutex
	answers map[string][]testkit.Reply // newest user message → the next answers to it
}

// newModelScript makes script the default answer of fake.
func newModelScript(fake *testkit.FakeLLM) *modelScript {
	s := &modelScript{fake: fake, answers: map[string][]testkit.Reply{}}
	fake.SetDefault(&testkit.Reply{Func: s.reply})
	return s
}

// answer scripts the model's next answers to requests whose newest user
// message is text (one answer per model call: a tool step takes one).
func (s *modelScript) answer(text string, replies ...testkit.Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers[text] = append(s.answers[text], replies...)
}

func (s *modelScript) reply(r testkit.Recorded) testkit.Reply {
	u := userTexts(r)
	if len(u) == 0 {
		return testkit.Reply{Status: 500, ErrorMessage: "e2e: a request without a user message"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.answers[u[len(u)-1]]
	if len(q) == 0 {
		return testkit.Reply{Status: 500, ErrorMessage: fmt.Sprintf("e2e: no answer scripted for %q", u[len(u)-1])}
	}
	s.answers[u[len(u)-1]] = q[1:]
	return q[0]
}

// checkAllAsked reports scripted answers the model was never asked for.
func (s *modelScript) checkAllAsked(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for text, q := range s.answers {
		if len(q) > 0 {
			t.Errorf("%d scripted answer(s) to %q were never asked for", len(q), text)
		}
	}
}

// requestFor returns the first model request whose newest user message is
// text.
func (s *modelScript) requestFor(t *testing.T, text string) testkit.Recorded {
	t.Helper()
	for _, r := range s.fake.Requests() {
		if u := userTexts(r); len(u) > 0 && u[len(u)-1] == text {
			return r
		}
	}
	t.Fatalf("no model request ends with the user message %q", text)
	return testkit.Recorded{}
}

// requestsMentioning counts the model requests in which any message
// contains text.
func (s *modelScript) requestsMentioning(text string) int {
	n := 0
	for _, r := range s.fake.Requests() {
		if slices.ContainsFunc(r.Messages, func(m llm.Message) bool { return strings.Contains(m.Content, text) }) {
			n++
		}
	}
	return n
}

// assertHistory checks that the model request answering last saw the
// conversation so far: these user messages, and the earlier reply.
func (s *modelScript) assertHistory(t *testing.T, last string, users []string, reply string) {
	t.Helper()
	r := s.requestFor(t, last)
	if got := userTexts(r); !slices.Equal(got, users) {
		t.Errorf("user messages the model saw = %q, want %q", got, users)
	}
	if !slices.Contains(assistantTexts(r), reply) {
		t.Errorf("the model did not see its earlier reply %q: %q", reply, assistantTexts(r))
	}
}

// forwardTo sends a request a tap received, with its body, to upstream and
// returns the answer. A send (send true) that reached the platform is
// carried out whatever becomes of its sender, as on a real network. A
// failure aborts the tap's handler, as a dropped connection.
func forwardTo(r *http.Request, body []byte, upstream string, send bool) (*http.Response, []byte) {
	ctx := r.Context()
	if send {
		ctx = context.WithoutCancel(ctx)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	return resp, answer
}

// answerWith writes a forwarded answer back to the tap's client.
func answerWith(w http.ResponseWriter, resp *http.Response, answer []byte) {
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// finalCounts is how many messages each chat must hold once serve has
// stopped: a late or doubled send shows up then.
type finalCounts struct {
	mu   sync.Mutex
	want map[string]int
}

// expect records that chat must hold n messages in the end.
func (f *finalCounts) expect(chat string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.want == nil {
		f.want = map[string]int{}
	}
	f.want[chat] = n
}

// check reports each chat whose texts (what the bot sent it) are not as
// many as expected.
func (f *finalCounts) check(t *testing.T, texts func(chat string) []string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for chat, n := range f.want {
		if got := texts(chat); len(got) != n {
			t.Errorf("after shutdown, %s holds %d messages from the bot, want %d: %q", chat, len(got), n, got)
		}
	}
}

// stopOK stops serve and fails the test unless it exited with 0.
func (s *serveRun) stopOK(t *testing.T) {
	t.Helper()
	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d, want 0; stderr:\n%s", code, s.stderr.String())
	}
}
