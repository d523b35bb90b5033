// Package httpapi is Switchboard's HTTP server: health and readiness
// checks, Prometheus metrics and a web dashboard (which reads, and
// approves or denies pairing requests) whose assets are
// embedded in the binary. It also mounts the OpenAI-compatible chat API,
// which is a channel of its own (channels/chatapi) and reaches the server
// only through the ChatAPI interface.
//
// Routes:
//
//	GET  /healthz               the process is up: "ok" (never needs the token; with it, JSON with version and uptime)
//	GET  /readyz                store writable, channels connected, model reachable recently
//	GET  /metrics               Prometheus text format
//	POST /v1/chat/completions   the chat API (ChatAPI), OpenAI-compatible, streaming or not
//	GET  /v1/models             the chat API: lists the agent as a model
//	GET  /                      the dashboard (and /turns/{id}, /chats, /chats/{id}, /sessions/{id},
//	                            /pairing, /dashboard/metrics)
//	GET  /webchat, POST /webchat/messages   the dashboard's web chat (webchat.go)
//	GET  /search                the dashboard's search over chats and turns
//	POST /logout                the dashboard's sign-out (CSRF token)
//	POST /pairing/{code}/approve, /pairing/{code}/deny   the dashboard's forms (CSRF token)
//	POST /pairing/revoke        the paired users' Revoke buttons (CSRF token)
//
// When a token is configured every route but /healthz requires it, as
// "Authorization: Bearer TOKEN" (the dashboard also accepts a cookie set by
// its login form). Without a token the server refuses to listen anywhere
// but on a loopback address. Wrong tokens slow their client down, and a
// request without the token never has its body read (limit.go); every body
// must arrive within Options.BodyTimeout.
//
// Token or not, no web page can use the server through a browser
// (guard.go): the Host header must be a loopback name, an IP address or one
// of the configured public names (421 otherwise; GET /healthz is exempt);
// state-changing requests from another origin are refused (403); the chat
// API takes only JSON bodies (415) and the dashboard's forms a CSRF token.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-gateway/switchboard/cluster"
	"github.com/switchboard-gateway/switchboard/mcpclient"
	"github.com/switchboard-gateway/switchboard/metrics"
	"github.com/switchboard-gateway/switchboard/pricing"
	"github.com/switchboard-gateway/switchboard/store"
)

// Defaults.
const (
	// DefaultModelWindow is how recent a successful model call must be for
	// the model to count as reachable without probing it again.
	DefaultModelWindow = 10 * time.Minute
	// modelFailures is how many chat completions in a row must fail for
	// want of the model server (within ModelWindow) for /readyz to fail
	// whatever the probe says: GET /models can answer while every
	// completion fails. One failure may be a blip; three, each after the
	// client's retries, are an outage.
	modelFailures = 3
	// probeEvery limits probes of the model server made by /readyz.
	probeEvery = 30 * time.Second
	// probeTimeout bounds one probe, so a hung model server cannot hang
	// the readiness check.
	probeTimeout = 5 * time.Second
	// pingTimeout bounds the store check.
	pingTimeout = 2 * time.Second
	// readHeaderTimeout closes connections that never finish their headers.
	readHeaderTimeout = 10 * time.Second
	// idleTimeout closes idle keep-alive connections.
	idleTimeout = 2 * time.Minute
)

// Store is what the server reads from the store.
type Store interface {
	Ping(ctx context.Context) error
	RecentTurns(ctx context.Context, limit int) ([]store.Turn, error)
	Turn(ctx context.Context, id int64) (store.Turn, error)
	TurnMessages(ctx context.Context, turnID int64) ([]store.Message, error)
	Chats(ctx context.Context, limit int) ([]store.ChatSummary, error)
	ChatByID(ctx context.Context, id int64) (store.Chat, error)
	Sessions(ctx context.Context, chatID int64) ([]store.Session, error)
	Session(ctx context.Context, id int64) (store.Session, error)
	Messages(ctx context.Context, sessionID int64) ([]store.Message, error)
	UsageSeries(ctx context.Context, since time.Time, bucket time.Duration) ([]store.UsagePoint, error)
	UsageByDay(ctx context.Context, since time.Time) ([]store.DayUsage, error) // the cost chart (cost.go)
	StepUsages(ctx context.Context, turnID int64) ([]store.StepUsage, error)   // a turn's tokens by step
	Turns(ctx context.Context, chatID int64, limit int) ([]store.Turn, error)
	LastInbound(ctx context.Context, chatID int64) ([]byte, error)
	// Search (the dashboard's search box).
	SearchTurns(ctx context.Context, text string, limit int) ([]store.Turn, error)
	SearchChats(ctx context.Context, text string, limit int) ([]store.ChatSummary, error)

	// Pairing requests, which the dashboard approves or denies as
	// `switchboard pairing approve` does.
	PendingPairings(ctx context.Context) ([]store.Pairing, error)
	ApprovePairing(ctx context.Context, code string) (store.Pairing, error)
	DenyPairing(ctx context.Context, code string) (store.Pairing, error)
	// The users admitted by pairing, listed with a Revoke button as
	// `switchboard pairing revoke` does (paired.go).
	ApprovedUsers(ctx context.Context) ([]store.ApprovedUser, error)
	RevokeUser(ctx context.Context, channel, userID string) (bool, error)
}

// ModelWatch tells how the model server has been answering
// (*metrics.Model implements it).
type ModelWatch interface {
	Health() metrics.ModelHealth
	Succeeded()
	Failed(err error)
}

// ChatAPI is the OpenAI-compatible chat API (channels/chatapi's *API),
// which the server mounts behind its token.
type ChatAPI interface {
	// Routes returns the API's handlers by http.ServeMux pattern.
	Routes() map[string]http.Handler
	// Abandon answers the requests still waiting for their turns: the
	// server is shutting down.
	Abandon()
}

// Channel states reported by ChannelStatus.State.
const (
	StateConnected = "connected"
	StateStarting  = "starting"
	StateRetrying  = "retrying"
	StateStopped   = "stopped"
	// StateStandby is a channel another replica runs (the Telegram poller,
	// a Discord shard): this one sends through it and takes over if that
	// replica dies. It counts as ready.
	StateStandby = "standby"
)

// ChannelStatus is one enabled channel as the supervisor sees it.
type ChannelStatus struct {
	Name      string
	State     string    // StateConnected, StateStarting, StateRetrying or StateStopped
	Since     time.Time // when it entered State
	LastError string    // why it last failed, if it did
	Restarts  int       // failed starts and drops so far
	NextRetry time.Time // in StateRetrying: when it tries again
}

// Skill is a loaded skill, for the dashboard.
type Skill struct {
	Name, Description, File string
	Builtin                 bool
}

// Skills is the skill registry as of now.
type Skills struct {
	Loaded   []Skill
	Problems []string // load errors, each naming file and line
}

// Job is a scheduled job with its last run, for the dashboard.
type Job struct {
	Name, Schedule, Chat string
	Next                 time.Time
	LastRun              time.Time
	LastOutcome          string
	LastError            string
}

// User is a person the bot knows, with what it learned about them.
type User struct {
	Channel, ID, Name string
	Profile           []string
	Memories          []string
}

// Options configure a Server. Store is required; every other provider may
// be nil, and the server then leaves that part out (or says it is not in
// this build).
type Options struct {
	Listen string // the address it will listen on, for the loopback rule
	Token  string // secret; empty: no authentication (loopback only)
	// PublicHosts are the names clients may use in Host besides loopback
	// names and IP addresses (http.public_hosts): "name" for any port,
	// "name:port" for that port only.
	PublicHosts []string
	AgentName   string
	ModelName   string
	Version     string

	Store   Store
	Metrics http.Handler // /metrics
	// Gatherer is the registry behind Metrics, for the dashboard's
	// readable metrics page; nil: the page says there are none.
	Gatherer prometheus.Gatherer
	API      ChatAPI   // /v1/...
	Activity *Activity // live turns for the dashboard

	Channels func() []ChannelStatus
	Model    ModelWatch
	// Probe contacts the model server (GET /models); /readyz calls it when
	// no model call succeeded within ModelWindow, at most every 30s.
	Probe       func(ctx context.Context) error
	ModelWindow time.Duration
	Skills      func() Skills
	MCP         func() []mcpclient.ServerStatus
	Jobs        func(ctx context.Context) ([]Job, error)
	Users       func(ctx context.Context) ([]User, error)
	Queue       func() (depth, busy int)
	// Serving reports whether the gateway has started taking messages
	// (unfinished ones reloaded); /readyz fails until it does. Nil:
	// from the start.
	Serving func() bool
	// Cluster reports this replica's place among replicas sharing the
	// store; nil for a single process.
	Cluster func(ctx context.Context) (cluster.Status, error)

	// ChannelHook (nil: none) returns the handler of a chat channel that
	// takes its platform's events by HTTP at path (channels.HTTPHandler),
	// or nil. It is served for POST and GET without http.token: the
	// channel authenticates its platform's requests itself.
	ChannelHook func(path string) http.Handler
	// Prices (llm.prices) add the estimated cost by day to the overview;
	// nil: tokens only.
	Prices *pricing.Table

	Now    func() time.Time
	Logger *slog.Logger
	// BodyTimeout bounds the time a request body takes to arrive;
	// default DefaultBodyTimeout.
	BodyTimeout time.Duration

	// Redact replaces the gateway's secrets in dashboard pages (a stored
	// transcript from before redaction, a user's pasted token); nil: pages
	// are served as rendered.
	Redact func(string) string

	// ModelStall fails /readyz when chat completions are in flight and
	// none finished or streamed a fragment for this long (a hung model
	// server); 0: not checked.
	ModelStall time.Duration
}

// Server is the HTTP server. Create it with New.
type Server struct {
	opts    Options
	log     *slog.Logger
	handler http.Handler
	srv     *http.Server
	started time.Time
	hosts   hostSet

	draining atomic.Bool
	probe    probeState
	guesses  *guessLimiter // wrong tokens per client
	// signedOut are the dashboard sign-ins ended by the logout button.
	signedOut *signOuts
	// completions is the chat API's POST /v1/chat/completions, which the
	// web chat posts through; nil without the API.
	completions http.Handler
}

// New checks opts and builds the routes.
func New(opts Options) (*Server, error) {
	if opts.Store == nil {
		return nil, errors.New("httpapi: a store is required")
	}
	if opts.Token == "" && opts.Listen != "" && !IsLoopback(opts.Listen) {
		return nil, fmt.Errorf("httpapi: refusing to serve %s without a token: set http.token or listen on 127.0.0.1", opts.Listen)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	if opts.ModelWindow <= 0 {
		opts.ModelWindow = DefaultModelWindow
	}
	if opts.AgentName == "" {
		opts.AgentName = "Switchboard"
	}
	hosts, err := newHostSet(opts.PublicHosts)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger.With("component", "http"), started: opts.Now(), hosts: hosts,
		guesses: newGuessLimiter(opts.Now), signedOut: newSignOuts(opts.Now, opts.Store, opts.Logger)}
	s.handler = s.routes()
	s.srv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		// No write timeout: chat completions stream for as long as a turn
		// runs (agent.turn_timeout bounds it).
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// Handler returns the server's routes, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve accepts connections on ln until Shutdown; it returns nil after a
// Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	err := s.srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("httpapi: serve: %w", err)
}

// Drain marks the server as shutting down: /readyz answers 503 from now on,
// so a load balancer stops sending work while running turns finish.
func (s *Server) Drain() { s.draining.Store(true) }

// Shutdown answers the chat requests still waiting (their turns were
// checkpointed), then stops the server, waiting for open requests until
// ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.Drain()
	if s.opts.API != nil {
		s.opts.API.Abandon()
	}
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
		return fmt.Errorf("httpapi: shutdown: %w", err)
	}
	return nil
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.Handle("GET /readyz", s.bearer(http.HandlerFunc(s.readyz)))
	if s.opts.Metrics != nil {
		mux.Handle("GET /metrics", s.bearer(s.opts.Metrics))
	}
	if s.opts.API != nil {
		for pattern, h := range s.opts.API.Routes() {
			mux.Handle(pattern, s.bearer(jsonOnly(h)))
			if pattern == completionsRoute {
				s.completions = h // the web chat's way in (webchat.go)
			}
		}
	}
	s.dashboardRoutes(mux)
	var h http.Handler = mux
	if hook := s.opts.ChannelHook; hook != nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost || r.Method == http.MethodGet { // GET: a webhook's handshake (WhatsApp)
				if ch := hook(r.URL.Path); ch != nil {
					ch.ServeHTTP(w, r)
					return
				}
			}
			mux.ServeHTTP(w, r)
		})
	}
	return securityHeaders(bodyDeadline(s.opts.BodyTimeout, s.hostGuard(s.crossOrigin(h))))
}

// securityHeaders sets headers every response should carry.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// IsLoopback reports whether a host:port (or a bare host) names a
// loopback address: 127.0.0.0/8, ::1 or localhost.
func IsLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
