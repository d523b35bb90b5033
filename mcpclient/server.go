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
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"switchboard/config"
)

// Transports, as ServerStatus reports them.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

const (
	// DefaultTimeout bounds one tool call, and the start-up of a server,
	// when its config leaves timeout zero (config documents the same 60s).
	DefaultTimeout = 60 * time.Second
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
	grace     time.Duration               // see defaultGrace
	lookupEnv func(string) (string, bool) // our environment; nil: os.LookupEnv
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
	timeout   time.Duration
	secrets   []string
	opts      options
	log       *slog.Logger
	client    *mcp.Client

	ctx    context.Context // ends on close: aborts a reconnect in progress
	cancel context.CancelFunc

	connSem chan struct{}  // held while (re)connecting
	wg      sync.WaitGroup // session watchers

	mu      sync.Mutex
	cur     *conn
	closed  bool
	tools   int
	lastErr string
}

// conn is one session with a server (and, for stdio, one child process).
type conn struct {
	sess   *mcp.ClientSession
	pid    int // stdio child, 0 for http
	stderr *stderrLogger

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
		opts:    opts,
		log:     log.With("mcp_server", cfg.Name),
		connSem: make(chan struct{}, 1),
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
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
	})
	return s, nil
}

func (s *server) addSecret(v string) {
	if len(v) >= minSecretLen {
		s.secrets = append(s.secrets, v)
	}
}

// start connects for the first time and lists the server's tools.
func (s *server) start(ctx context.Context) ([]*mcp.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	c, err := s.connect(ctx)
	if err != nil {
		step := "start"
		if s.transport == TransportHTTP {
			step = "connect"
		}
		return nil, s.fail(fmt.Errorf("mcp server %q: %s: %w", s.name, step, err))
	}
	tools, err := listTools(ctx, c.sess)
	if err != nil {
		_ = c.close()
		return nil, s.fail(fmt.Errorf("mcp server %q: list tools: %w", s.name, err))
	}
	if !s.adopt(c) {
		_ = c.close()
		return nil, fmt.Errorf("mcp server %q: closed while starting", s.name)
	}
	s.log.Info("mcp server connected", "transport", s.transport, "tools", len(tools))
	return tools, nil
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
	if s.transport == TransportHTTP {
		hc := &http.Client{Transport: &headerTransport{base: s.base, header: s.headers}}
		sess, err := s.client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: hc}, nil)
		if err != nil {
			return nil, err
		}
		return newConn(sess), nil
	}

	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Env = childEnv(s.opts.lookupEnv, s.env)
	stderr := &stderrLogger{log: s.log}
	cmd.Stderr = stderr
	// Bounds the wait for stderr to drain when a grandchild keeps it open.
	cmd.WaitDelay = s.opts.grace
	ownProcessGroup(cmd)
	sess, err := s.client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: s.opts.grace}, nil)
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
	c.pid, c.stderr = cmd.Process.Pid, stderr
	return c, nil
}

// adopt makes c the current connection and watches it; false means the
// server was closed meanwhile and c must be closed by the caller.
func (s *server) adopt(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.cur, s.lastErr = c, ""
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
	report := !s.closed && s.cur == c && !reported
	if report {
		s.lastErr = fmt.Sprintf("mcp server %q: session ended", s.name)
	}
	s.mu.Unlock()
	cerr := c.close()
	if report {
		s.log.Warn("mcp server session ended; it will be reconnected on the next call",
			"err", s.redact(errors.Join(werr, cerr)))
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
	s.mu.Lock()
	old := s.cur
	s.mu.Unlock()
	if old != nil {
		_ = old.close() // reap the dead child before starting another
	}

	s.log.Info("mcp server reconnecting")
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	c, err := s.connect(ctx)
	if err != nil {
		return nil, s.fail(fmt.Errorf("mcp server %q: the connection was lost and reconnecting failed: %w", s.name, err))
	}
	if !s.adopt(c) {
		_ = c.close()
		return nil, fmt.Errorf("mcp server %q: closed", s.name)
	}
	s.log.Info("mcp server reconnected")
	return c, nil
}

// call runs one tool call for the model.
func (s *server) call(ctx context.Context, tool string, raw json.RawMessage) (string, error) {
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
					text = "the tool failed without saying why"
				}
				return "", errors.New(text)
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
		return "", s.callError(ctx, c, tool, err)
	}
}

// callError explains a failed call, naming the server.
func (s *server) callError(ctx context.Context, c *conn, tool string, err error) error {
	var rpcErr *jsonrpc.Error
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("mcp server %q: call %s: %w", s.name, tool, ctx.Err())
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("mcp server %q: %s did not answer within %s", s.name, tool, s.timeout)
	case errors.As(err, &rpcErr):
		// The server answered with a protocol error (unknown tool, bad
		// arguments); the session is fine.
		return s.redact(fmt.Errorf("mcp server %q: call %s: %w", s.name, tool, err))
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
	return ServerStatus{
		Name:      s.name,
		Transport: s.transport,
		Connected: !s.closed && s.cur != nil && !s.cur.isLost(),
		Tools:     s.tools,
		LastError: s.lastErr,
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

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.header) > 0 {
		r = r.Clone(r.Context())
		for k, vs := range t.header {
			r.Header[k] = append([]string(nil), vs...)
		}
	}
	return t.base.RoundTrip(r)
}

// buildVersion is the module version we announce to servers.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
