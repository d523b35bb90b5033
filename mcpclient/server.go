package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/buildinfo"
)

// Transports, as ServerStatus reports them.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

const (
	// DefaultTimeout bounds one tool call when its config leaves timeout
	// zero (config documents the same 60s).
	DefaultTimeout = 60 * time.Second
	// DefaultStartupTimeout bounds starting a server (or connecting to it)
	// and listing its tools when its config leaves startup_timeout zero: a
	// server run through npx may download itself first.
	DefaultStartupTimeout = 60 * time.Second
	// minRetry and maxRetry bound the backoff between the attempts to start
	// a server that is down: quick for a crashed child, and no more than
	// one attempt every two minutes for one that stays away.
	minRetry = time.Second
	maxRetry = 2 * time.Minute
	// defaultGrace is how long closing a stdio server waits after closing
	// its stdin, and again after SIGTERM, before it kills the process: the
	// spec's shutdown sequence, with the SDK's own default.
	defaultGrace = 5 * time.Second
	// maxListPages stops a server whose tools/list cursor never ends.
	maxListPages = 100
	// minSecretLen is the shortest env or header value treated as a secret
	// when scrubbing error text: shorter values ("1", "true") are ordinary
	// words, as config.Secrets decides too.
	minSecretLen = 8
)

// options are the knobs tests turn; Connect uses the defaults.
type options struct {
	grace     time.Duration                                   // see defaultGrace
	lookupEnv func(string) (string, bool)                     // our environment; nil: os.LookupEnv
	backoff   func(attempt int) time.Duration                 // the delay before retry attempt (1, 2…); nil: backoff
	wait      func(ctx context.Context, d time.Duration) bool // waits d; false if ctx ended first; nil: wait
	notify    func()                                          // called after the tool set changed
}

// backoff doubles the delay from minRetry up to maxRetry.
func backoff(attempt int) time.Duration {
	d := minRetry
	for i := 1; i < attempt && d < maxRetry; i++ {
		d *= 2
	}
	return min(d, maxRetry)
}

// wait sleeps d, or less if ctx ends first (then it returns false).
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// server is one configured MCP server and its current connection.
type server struct {
	name      string
	transport string
	argv      []string    // stdio
	env       []string    // stdio; values are secrets
	url       string      // http
	headers   http.Header // http; values are secrets
	base      *http.Transport
	timeout   time.Duration // per call
	startup   time.Duration // per start: connect and list the tools
	secrets   []string
	opts      options
	log       *slog.Logger
	client    *mcp.Client

	ctx    context.Context // ends on close: aborts a reconnect in progress
	cancel context.CancelFunc

	connSem chan struct{}  // held while (re)connecting
	wg      sync.WaitGroup // session watchers, retries and refreshes
	changed func()         // called after list changed; set by the Manager

	refreshMu sync.Mutex // one tools/list refresh at a time

	mu        sync.Mutex
	cur       *conn
	closed    bool
	list      []*mcp.Tool // the server's callable tools, as last listed
	tools     int         // of which offered to the model
	lastErr   string
	retrying  bool // a retry loop runs
	attempts  int
	nextRetry time.Time
}

// conn is one session with a server (and, for stdio, one child process).
type conn struct {
	sess   *mcp.ClientSession
	pid    int // stdio child, 0 for http
	stderr *stderrLogger
	tasks  *taskTools // the tools that require task augmentation

	lostOnce sync.Once
	lost     chan struct{} // closed once the session is known to be dead

	closeOnce sync.Once
	closeErr  error
}

func newConn(sess *mcp.ClientSession) *conn {
	return &conn{sess: sess, lost: make(chan struct{})}
}

func (c *conn) markLost() { c.lostOnce.Do(func() { close(c.lost) }) }

func (c *conn) isLost() bool {
	select {
	case <-c.lost:
		return true
	default:
		return false
	}
}

// close ends the session; for stdio that closes the child's stdin, waits,
// sends SIGTERM, waits and kills (the SDK's CommandTransport), then kills
// whatever the child left behind in its process group.
func (c *conn) close() error {
	c.closeOnce.Do(func() {
		c.markLost()
		c.closeErr = c.sess.Close()
		killGroup(c.pid)
		if c.stderr != nil {
			c.stderr.flush()
		}
	})
	return c.closeErr
}

// newServer checks one server's config. It always returns a server, so a
// misconfigured one still shows in Status.
func newServer(cfg config.MCPServer, log *slog.Logger, opts options) (*server, error) {
	s := &server{
		name:    cfg.Name,
		timeout: cfg.Timeout,
		startup: cfg.StartupTimeout,
		opts:    opts,
		log:     log.With("mcp_server", cfg.Name),
		connSem: make(chan struct{}, 1),
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if s.startup <= 0 {
		s.startup = DefaultStartupTimeout
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	fail := func(err error) (*server, error) {
		err = fmt.Errorf("mcp server %q: %w", s.name, err)
		s.lastErr = err.Error()
		return s, err
	}
	switch {
	case len(cfg.Command) > 0 && cfg.URL != "":
		s.transport = TransportStdio
		return fail(errors.New("set either command or url, not both"))
	case len(cfg.Command) > 0:
		s.transport = TransportStdio
		s.argv = cfg.Command
		for i, e := range cfg.Env {
			k, v, ok := strings.Cut(e, "=")
			if !ok || k == "" {
				return fail(fmt.Errorf("env[%d] must be KEY=value", i))
			}
			s.addSecret(v)
		}
		s.env = cfg.Env
	case cfg.URL != "":
		s.transport = TransportHTTP
		s.url = cfg.URL
		if u, err := url.Parse(cfg.URL); err == nil && u.User != nil {
			p, _ := u.User.Password()
			s.addSecret(p)
		}
		s.headers = http.Header{}
		for i, h := range cfg.Headers {
			k, v, ok := strings.Cut(h, ":")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if !ok || k == "" {
				return fail(fmt.Errorf("headers[%d] must be \"Name: value\"", i))
			}
			s.headers.Add(k, v)
			s.addSecret(v)
		}
		s.base = http.DefaultTransport.(*http.Transport).Clone()
	default:
		return fail(errors.New("set command (a stdio server) or url (a streamable HTTP server)"))
	}
	s.client = mcp.NewClient(&mcp.Implementation{Name: "switchboard", Version: buildVersion()}, &mcp.ClientOptions{
		Logger: s.log,
		// Advertise nothing: we answer no roots, sampling or elicitation requests.
		Capabilities: &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(_ context.Context, req *mcp.ToolListChangedRequest) {
			s.refresh(req.Session)
		},
	})
	return s, nil
}

func (s *server) addSecret(v string) {
	if len(v) >= minSecretLen {
		s.secrets = append(s.secrets, v)
	}
}

// start connects for the first time and lists the server's tools; when
// that fails, the server is retried in the background.
func (s *server) start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.startup)
	defer cancel()
	err := s.establish(ctx, "start")
	if err != nil {
		s.kick()
		return err
	}
	s.log.Info("mcp server connected", "transport", s.transport, "tools", s.listed())
	return nil
}

// establish opens a session, lists the tools and makes it the current one;
// the error names the server and the step that failed (what, for a start).
// The caller holds connSem or is the first start.
func (s *server) establish(ctx context.Context, what string) error {
	step := func(name string, err error) error {
		if errors.Is(err, context.DeadlineExceeded) && s.ctx.Err() == nil {
			err = fmt.Errorf("did not start within %s (startup_timeout): %w", s.startup, err)
		}
		return s.fail(fmt.Errorf("mcp server %q: %s: %w", s.name, name, err))
	}
	c, err := s.connect(ctx)
	if err != nil {
		if what == "start" && s.transport == TransportHTTP {
			what = "connect"
		}
		return step(what, err)
	}
	tools, err := listTools(ctx, c.sess)
	if err != nil {
		_ = c.close()
		return step("list tools", err)
	}
	tools = s.callable(c, tools)
	if !s.adopt(c, tools) {
		_ = c.close()
		return fmt.Errorf("mcp server %q: closed", s.name)
	}
	if s.changed != nil {
		s.changed()
	}
	return nil
}

// callable drops the tools this client cannot call: those that require task
// augmentation (execution.taskSupport "required", MCP 2025-11-25), since
// every plain tools/call of them fails.
func (s *server) callable(c *conn, tools []*mcp.Tool) []*mcp.Tool {
	out := tools[:0:0]
	for _, t := range tools {
		if t != nil && c.tasks.required(t.Name) {
			s.log.Info("mcp tool skipped: it requires task augmentation, which this client does not support", "tool", t.Name)
			continue
		}
		out = append(out, t)
	}
	return out
}

func (s *server) listed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.list)
}

// kick starts the background retry loop unless it runs already.
func (s *server) kick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.retrying {
		return
	}
	s.retrying, s.attempts, s.nextRetry = true, 0, time.Now().Add(s.opts.backoff(1))
	s.wg.Add(1)
	go s.retry()
}

// retry starts the server again with capped exponential backoff until it
// answers (or a call reconnected it), or the server is closed.
func (s *server) retry() {
	defer s.wg.Done()
	for attempt := 1; ; attempt++ {
		d := s.opts.backoff(attempt)
		s.mu.Lock()
		s.attempts, s.nextRetry = attempt-1, time.Now().Add(d)
		s.mu.Unlock()
		if !s.opts.wait(s.ctx, d) {
			s.endRetry(true)
			return
		}
		s.mu.Lock()
		s.attempts, s.nextRetry = attempt, time.Time{}
		s.mu.Unlock()
		err := s.retryOnce()
		if err == nil && s.endRetry(false) {
			s.log.Info("mcp server connected", "transport", s.transport, "tools", s.listed(), "attempt", attempt)
			return
		}
		if s.ctx.Err() != nil {
			s.endRetry(true)
			return
		}
		if err != nil {
			s.log.Info("mcp server still down; retrying", "attempt", attempt, "next_in", s.opts.backoff(attempt+1), "err", err)
		}
	}
}

// retryOnce makes one attempt, unless the server is up already.
func (s *server) retryOnce() error {
	select {
	case s.connSem <- struct{}{}:
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
	defer func() { <-s.connSem }()
	if c, err := s.current(); c != nil || err != nil {
		return err
	}
	s.reap()
	ctx, cancel := context.WithTimeout(s.ctx, s.startup)
	defer cancel()
	return s.establish(ctx, "start")
}

// endRetry ends the retry loop if the server is up or closed (or always, if
// force); false means go on.
func (s *server) endRetry(force bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !force && !s.closed && (s.cur == nil || s.cur.isLost()) {
		return false
	}
	s.retrying, s.nextRetry = false, time.Time{}
	return true
}

// reap closes the dead connection, if any, before another is started.
func (s *server) reap() {
	s.mu.Lock()
	old := s.cur
	s.mu.Unlock()
	if old != nil {
		_ = old.close()
	}
}

// refresh lists the tools of sess again after the server said they changed,
// in the background: the notification handler must not block the session.
func (s *server) refresh(sess *mcp.ClientSession) {
	s.mu.Lock()
	if s.closed || s.cur == nil || s.cur.sess != sess {
		s.mu.Unlock()
		return
	}
	c := s.cur
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		s.refreshMu.Lock()
		defer s.refreshMu.Unlock()
		ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
		defer cancel()
		tools, err := listTools(ctx, c.sess)
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Warn("mcp server said its tools changed, but listing them failed", "err", s.redact(err))
			}
			return
		}
		tools = s.callable(c, tools)
		s.mu.Lock()
		current := !s.closed && s.cur == c
		if current {
			s.list = tools
		}
		s.mu.Unlock()
		if current && s.changed != nil {
			s.changed()
			// Logged once the new set is offered: a reader of the log
			// (an operator, the e2e test) may ask for the new tools at once.
			s.log.Info("mcp server tools changed", "tools", len(tools))
		}
	}()
}

// fail records err (scrubbed of secrets) as the server's last error.
func (s *server) fail(err error) error {
	err = s.redact(err)
	s.mu.Lock()
	s.lastErr = err.Error()
	s.mu.Unlock()
	return err
}

// connect opens a new session.
func (s *server) connect(ctx context.Context) (*conn, error) {
	tasks := &taskTools{}
	if s.transport == TransportHTTP {
		hc := &http.Client{Transport: &headerTransport{base: s.base, header: s.headers, tasks: tasks}}
		sess, err := s.client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: hc}, nil)
		if err != nil {
			return nil, err
		}
		c := newConn(sess)
		c.tasks = tasks
		return c, nil
	}

	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Env = childEnv(s.opts.lookupEnv, s.env)
	stderr := &stderrLogger{log: s.log}
	cmd.Stderr = stderr
	// Bounds the wait for stderr to drain when a grandchild keeps it open.
	cmd.WaitDelay = s.opts.grace
	ownProcessGroup(cmd)
	sess, err := s.client.Connect(ctx, &scanTransport{Transport: &mcp.CommandTransport{Command: cmd, TerminateDuration: s.opts.grace}, tasks: tasks}, nil)
	if err != nil {
		// The SDK closes (and reaps) a child that started but failed to
		// initialize; make sure nothing of it survives.
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
			killGroup(cmd.Process.Pid)
		}
		stderr.flush()
		return nil, err
	}
	c := newConn(sess)
	c.pid, c.stderr, c.tasks = cmd.Process.Pid, stderr, tasks
	return c, nil
}

// adopt makes c the current connection, with its tools, and watches it;
// false means the server was closed meanwhile and c must be closed by the
// caller.
func (s *server) adopt(c *conn, tools []*mcp.Tool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.cur, s.lastErr, s.list = c, "", tools
	s.wg.Add(1)
	go s.watch(c)
	return true
}

// watch notices a session that ends on its own (a crashed child, a dropped
// HTTP session), so the next call reconnects, and reaps its process.
func (s *server) watch(c *conn) {
	defer s.wg.Done()
	werr := c.sess.Wait()
	reported := c.isLost() // a failed call has already said so
	c.markLost()
	s.mu.Lock()
	current := !s.closed && s.cur == c
	report := current && !reported
	if report {
		s.lastErr = fmt.Sprintf("mcp server %q: session ended", s.name)
	}
	s.mu.Unlock()
	cerr := c.close()
	if report {
		s.log.Warn("mcp server session ended; it will be reconnected in the background or on the next call",
			"err", s.redact(errors.Join(werr, cerr)))
	}
	if current {
		s.kick()
	}
}

// current returns the live connection, or nil when a reconnect is needed.
func (s *server) current() (*conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("mcp server %q: closed", s.name)
	}
	if s.cur != nil && !s.cur.isLost() {
		return s.cur, nil
	}
	return nil, nil
}

// session returns the live connection, reconnecting once if the last one
// died. Concurrent callers share one reconnect.
func (s *server) session(ctx context.Context) (*conn, error) {
	if c, err := s.current(); c != nil || err != nil {
		return c, err
	}
	select {
	case s.connSem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("mcp server %q: wait for reconnect: %w", s.name, ctx.Err())
	}
	defer func() { <-s.connSem }()
	if c, err := s.current(); c != nil || err != nil {
		return c, err
	}
	s.reap() // the dead child before starting another

	s.log.Info("mcp server reconnecting")
	ctx, cancel := context.WithTimeout(ctx, s.startup)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	if err := s.establish(ctx, "the connection was lost and reconnecting failed"); err != nil {
		return nil, err
	}
	s.log.Info("mcp server reconnected")
	return s.current()
}

// call runs one tool call for the model; name is the tool's model-facing
// name, tool the server's.
func (s *server) call(ctx context.Context, name, tool string, raw json.RawMessage) (string, error) {
	args, err := decodeArgs(raw)
	if err != nil {
		return "", err
	}
	for attempt := 1; ; attempt++ {
		c, err := s.session(ctx)
		if err != nil {
			return "", err
		}
		cctx, cancel := context.WithTimeout(ctx, s.timeout)
		res, err := c.sess.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		cancel()
		if err == nil {
			text := resultText(res)
			if res.IsError {
				if strings.TrimSpace(text) == "" {
					return "", errors.New("the tool failed without saying why")
				}
				// The server's words, like its results: data, not instructions.
				return "", errors.New(agent.UntrustedLabel(name) + "\n" + text)
			}
			return text, nil
		}
		if errors.Is(err, mcp.ErrSessionMissing) && attempt == 1 && ctx.Err() == nil {
			// The server no longer knows the session (an HTTP server
			// restarted) and so never ran the call: reconnect and resend.
			c.markLost()
			s.log.Info("mcp server lost the session; reconnecting", "tool", tool)
			continue
		}
		return "", s.callError(ctx, c, name, tool, err)
	}
}

// callError explains a failed call, naming the server.
func (s *server) callError(ctx context.Context, c *conn, name, tool string, err error) error {
	var rpcErr *jsonrpc.Error
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("mcp server %q: call %s: %w", s.name, tool, ctx.Err())
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("mcp server %q: %s did not answer within %s", s.name, tool, s.timeout)
	case errors.As(err, &rpcErr):
		// The server answered with a protocol error (unknown tool, bad
		// arguments); the session is fine. Its message is the server's
		// text: labelled like its results.
		return s.redact(&rpcError{msg: fmt.Sprintf("mcp server %q: call %s: JSON-RPC error %d:\n%s\n%s",
			s.name, tool, rpcErr.Code, agent.UntrustedLabel(name), rpcErr.Message), err: err})
	case errors.Is(err, mcp.ErrConnectionClosed), errors.Is(err, mcp.ErrSessionMissing),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), c.isLost():
		// EOF: a stdio server exited in the middle of the call.
		c.markLost()
		err = s.fail(fmt.Errorf("mcp server %q: connection lost during %s (it will be reconnected on the next call): %w", s.name, tool, err))
		s.log.Warn("mcp server connection lost", "tool", tool, "err", err)
		return err
	default:
		return s.fail(fmt.Errorf("mcp server %q: call %s: %w", s.name, tool, err))
	}
}

// close ends the server's session and stops its process; it waits for a
// reconnect in progress to give up and for the session watcher to finish.
func (s *server) close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	c := s.cur
	s.mu.Unlock()

	s.cancel()
	var err error
	if c != nil {
		wasLost := c.isLost()
		if cerr := c.close(); cerr != nil && !wasLost {
			err = s.redact(fmt.Errorf("mcp server %q: close: %w", s.name, cerr))
		}
	}
	s.connSem <- struct{}{} // a reconnect in progress has closed what it opened
	<-s.connSem
	s.wg.Wait()
	if s.base != nil {
		s.base.CloseIdleConnections()
	}
	return err
}

func (s *server) status() ServerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	connected := !s.closed && s.cur != nil && !s.cur.isLost()
	return ServerStatus{
		Name:      s.name,
		Transport: s.transport,
		Connected: connected,
		Tools:     s.tools,
		LastError: s.lastErr,
		Retrying:  s.retrying && !s.closed && !connected,
		Attempts:  s.attempts,
		NextRetry: s.nextRetry,
	}
}

// redact replaces the server's secret values in err's text; errors.Is and
// errors.As still see the original chain.
func (s *server) redact(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := msg
	for _, v := range s.secrets {
		clean = strings.ReplaceAll(clean, v, "[redacted]")
	}
	if clean == msg {
		return err
	}
	return &redactedError{msg: clean, err: err}
}

// rpcError is a JSON-RPC error answer, told with the server's message
// labelled as untrusted.
type rpcError struct {
	msg string
	err error
}

func (e *rpcError) Error() string { return e.msg }
func (e *rpcError) Unwrap() error { return e.err }

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// listTools lists every page of the server's tools.
func listTools(ctx context.Context, sess *mcp.ClientSession) ([]*mcp.Tool, error) {
	var out []*mcp.Tool
	params := &mcp.ListToolsParams{}
	seen := map[string]bool{}
	for range maxListPages {
		res, err := sess.ListTools(ctx, params)
		if err != nil {
			return nil, err
		}
		out = append(out, res.Tools...)
		if res.NextCursor == "" {
			return out, nil
		}
		if seen[res.NextCursor] {
			return nil, errors.New("the server repeated a pagination cursor")
		}
		seen[res.NextCursor] = true
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
	return nil, fmt.Errorf("more than %d pages of tools", maxListPages)
}

// decodeArgs decodes the validated arguments object, keeping numbers as
// written (json.Number) so that large integers reach the server intact.
func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var args map[string]any
	if err := dec.Decode(&args); err != nil {
		return nil, fmt.Errorf("arguments must be a JSON object: %w", err)
	}
	return args, nil
}

// headerTransport adds the configured headers to every request, and notes
// the tools that require task augmentation in the answers.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
	tasks  *taskTools
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.header) > 0 {
		r = r.Clone(r.Context())
		for k, vs := range t.header {
			r.Header[k] = append([]string(nil), vs...)
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err == nil && t.tasks != nil {
		resp.Body = t.tasks.scanBody(resp.Body)
	}
	return resp, err
}

// buildVersion is the module version we announce to servers.
func buildVersion() string { return buildinfo.Version("") }
