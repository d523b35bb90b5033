// Package whatsapp is the WhatsApp adapter, on the WhatsApp Business Cloud
// API with plain net/http (no SDK): Meta posts messages and delivery
// statuses to a signed webhook on the gateway's HTTP server
// (channels.HTTPHandler, webhook.go); the adapter normalises them to
// channels.Inbound (inbound.go) and sends text, buttons, templates,
// reactions, media and read receipts through the Graph API (outbound.go,
// graph.go).
//
// Intake is at-least-once: a delivery is answered 200 only after
// Sink.Deliver returned nil for each of its messages (they are stored);
// otherwise 503, and Meta delivers it again, with backoff, for up to
// seven days. A message keeps its wamid as MessageID, so the store takes a
// redelivery as the one message it is.
//
// WhatsApp lets a business write freely only within 24 hours of the
// user's last message (window.go); outside, a message goes out as the
// configured reminder template, or is refused for good with the reason
// and an ERROR. WhatsApp cannot edit messages: there are no live
// previews and no progress line.
package whatsapp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

// Options configure an Adapter.
type Options struct {
	PhoneNumberID string // the business number's id, not the number
	AccessToken   string // Bearer token of the Graph API
	AppSecret     string // signs the webhook's deliveries (X-Hub-Signature-256)
	VerifyToken   string // answers the webhook's GET handshake
	// APIBase is the Graph API, default DefaultAPIBase; a fake's in tests.
	// With another host than Meta's, media are fetched from that host too.
	APIBase    string
	APIVersion string // default DefaultAPIVersion
	// WebhookPath is the path Handler serves; default DefaultWebhookPath.
	WebhookPath string
	// Reminder, when set, is the template sent in place of a message
	// outside the 24-hour window, the text as its one body parameter;
	// nil: such a message is refused.
	Reminder *Template
	// LatestInboundAt returns when the chat's newest message was stored
	// (the window after a restart); nil: only what this process saw.
	LatestInboundAt func(ctx context.Context, chatID string) (time.Time, error)
	// OnStatus (nil: none) counts the delivery statuses Meta reports.
	OnStatus func(status string)
	// RecordStatus (nil: none) keeps each status with the delivery of its
	// message (BuildEnv.RecordDeliveryStatus).
	RecordStatus func(ctx context.Context, msgID, status, errText string, at time.Time) bool
	// HTTPClient is copied, not changed; default: a 30 s timeout.
	HTTPClient *http.Client
	// DownloadTransport carries media downloads (the gateway's outbound
	// guard); nil: the API client's transport.
	DownloadTransport http.RoundTripper
	// MaxDownloadBytes caps media downloads (default 16 MiB: WhatsApp's
	// limit for audio and video).
	MaxDownloadBytes int64
	// MaxRateLimitWait is the longest wait on a rate limit (default one
	// minute); longer, the send fails as unavailable.
	MaxRateLimitWait time.Duration
	// Sleep waits between retries; default: a timer that ends with ctx.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock of the 24-hour window; default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Adapter is the WhatsApp channel. Create it with New.
type Adapter struct {
	phoneID, token, secret, verify string
	base                           string // APIBase/APIVersion
	mediaHost                      string // scheme://host of a non-Meta APIBase, whose media are fetched
	path                           string
	reminder                       *Template
	latestAt                       func(ctx context.Context, chatID string) (time.Time, error)
	onStatus                       func(status string)
	recordStatus                   func(ctx context.Context, msgID, status, errText string, at time.Time) bool
	http, files                    *http.Client
	maxDownload                    int64
	maxWait                        time.Duration
	sleep                          func(ctx context.Context, d time.Duration) error
	now                            func() time.Time
	log                            *slog.Logger
	redactor                       *strings.Replacer

	active atomic.Bool
	sink   atomic.Pointer[channels.Sink]

	mu sync.Mutex
	// chats is what the adapter knows of each chat: the user's last
	// message (time and wamid), what was marked read, the typing shown.
	chats map[string]*chatState
	// failed counts the sent messages Meta reported failed.
	failed atomic.Int64
	// reads holds a token per read receipt in flight (markReadLater).
	reads chan struct{}
	// sentAt is when each message sent in the last statusGrace was
	// accepted (keepStatus).
	sentAt map[string]time.Time
	// sends numbers each Send and Ask; sending holds the numbers of those
	// whose answer from Meta has not come yet (keepStatus).
	sends   uint64
	sending map[uint64]bool
}

// chatState is what the adapter remembers of one chat.
type chatState struct {
	lastIn   time.Time // the user's newest message; zero: not seen by this process
	lastID   string    // its wamid
	closed   bool      // Meta refused a message as outside the window since lastIn
	readID   string    // the last wamid marked read
	typingID string    // the wamid the typing indicator was last shown for
	typingAt time.Time // … and when
}

// New checks o and prepares the client; nothing is contacted until Run.
func New(o Options) (*Adapter, error) {
	o.AccessToken, o.AppSecret, o.VerifyToken = strings.TrimSpace(o.AccessToken), strings.TrimSpace(o.AppSecret), strings.TrimSpace(o.VerifyToken)
	switch {
	case o.PhoneNumberID == "":
		return nil, errors.New("whatsapp: the phone number id is required")
	case o.AccessToken == "":
		return nil, errors.New("whatsapp: the access token is required")
	case o.AppSecret == "":
		return nil, errors.New("whatsapp: the app secret is required (it checks the webhook's signatures)")
	case o.VerifyToken == "":
		return nil, errors.New("whatsapp: the verify token is required (it answers the webhook's handshake)")
	}
	api, err := apiURL(o.APIBase)
	if err != nil {
		return nil, err
	}
	o.defaults()
	client := *cmp.Or(o.HTTPClient, &http.Client{Timeout: 30 * time.Second}) // a copy
	a := &Adapter{
		phoneID: o.PhoneNumberID, token: o.AccessToken, secret: o.AppSecret, verify: o.VerifyToken,
		base: api.String() + "/" + o.APIVersion, path: o.WebhookPath, reminder: o.Reminder,
		latestAt: o.LatestInboundAt, onStatus: o.OnStatus, recordStatus: o.RecordStatus, http: &client, maxDownload: o.MaxDownloadBytes,
		maxWait: o.MaxRateLimitWait, sleep: o.Sleep, now: o.Now, log: o.Logger.With("channel", Name),
		chats: map[string]*chatState{}, reads: make(chan struct{}, maxReadsInFlight), sentAt: map[string]time.Time{}, sending: map[uint64]bool{},
	}
	var pairs []string
	for _, secret := range []string{o.AccessToken, o.AppSecret, o.VerifyToken} {
		if len(secret) >= 6 { // shorter ones (a test's) would mangle every text
			pairs = append(pairs, secret, "[redacted]")
		}
	}
	a.redactor = strings.NewReplacer(pairs...)
	// Media come from Meta's media host (or a fake's, the api_base's host),
	// through the gateway's outbound guard, and never follow a redirect:
	// the token goes nowhere else.
	transport := o.DownloadTransport
	if transport == nil {
		transport = client.Transport
	}
	a.files = &http.Client{Timeout: client.Timeout, Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if api.String() != DefaultAPIBase {
		a.mediaHost = api.Scheme + "://" + api.Host
	}
	return a, nil
}

// defaults fills in what o leaves out.
func (o *Options) defaults() {
	o.APIVersion = cmp.Or(o.APIVersion, DefaultAPIVersion)
	o.WebhookPath = cmp.Or(o.WebhookPath, DefaultWebhookPath)
	o.MaxDownloadBytes = cmp.Or(max(o.MaxDownloadBytes, 0), 16<<20)
	o.MaxRateLimitWait = cmp.Or(max(o.MaxRateLimitWait, 0), time.Minute)
	o.Logger = cmp.Or(o.Logger, slog.Default())
	if o.Sleep == nil {
		o.Sleep = waitfor.Sleep
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// apiURL checks the Graph API base ("" is Meta's).
func apiURL(raw string) (*url.URL, error) {
	if raw == "" {
		raw = DefaultAPIBase
	}
	u, err := url.Parse(strings.TrimSuffix(raw, "/"))
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		return u, nil
	}
	return nil, fmt.Errorf("whatsapp: api base %q must be an absolute http(s) URL", raw)
}

// redact removes the secrets from s.
func (a *Adapter) redact(s string) string { return a.redactor.Replace(s) }

// Name is "whatsapp".
func (a *Adapter) Name() string { return Name }

// Connected reports whether deliveries are taken: Run is running.
func (a *Adapter) Connected() bool { return a.active.Load() && a.sink.Load() != nil }

// Run checks the access token once (GET of the phone number) and takes
// the webhook's deliveries until ctx ends. It returns an error when Meta
// refuses the token; when the Graph API cannot be reached it logs that
// and takes messages anyway (replies wait in the outbox).
func (a *Adapter) Run(ctx context.Context, sink channels.Sink) error {
	if !a.active.CompareAndSwap(false, true) {
		return errors.New("whatsapp: run: already running")
	}
	defer a.active.Store(false)
	var phone struct {
		Display string `json:"display_phone_number"`
		Name    string `json:"verified_name"`
	}
	err := a.call(ctx, http.MethodGet, a.phoneID+"?fields=display_phone_number,verified_name", nil, &phone)
	var ae *APIError
	switch {
	case ctx.Err() != nil:
		return nil
	case errors.As(err, &ae) && (ae.Code == codeToken || ae.Status == http.StatusUnauthorized):
		return a.wrap(err, "the access token was refused")
	case err != nil:
		a.log.Warn("whatsapp: could not look the phone number up; taking messages anyway", "err", a.redact(err.Error()))
	default:
		a.log.Info("whatsapp: signed in", "number", phone.Display, "name", phone.Name)
	}
	a.sink.Store(&sink)
	defer a.sink.Store(nil)
	a.log.Info("whatsapp: taking webhook deliveries", "path", a.path)
	<-ctx.Done()
	return nil
}

// running returns Run's sink.
func (a *Adapter) running() (channels.Sink, bool) {
	p := a.sink.Load()
	if p == nil {
		return nil, false
	}
	return *p, true
}

// chat returns the state of chatID; call with a.mu held.
func (a *Adapter) chat(chatID string) *chatState {
	c := a.chats[chatID]
	if c == nil {
		if len(a.chats) > 100_000 {
			clear(a.chats) // the store still knows every window
		}
		c = &chatState{}
		a.chats[chatID] = c
	}
	return c
}

var (
	_ channels.Channel     = (*Adapter)(nil)
	_ channels.Typer       = (*Adapter)(nil)
	_ channels.Reactor     = (*Adapter)(nil)
	_ channels.Fitter      = (*Adapter)(nil)
	_ channels.FileSender  = (*Adapter)(nil)
	_ channels.Asker       = (*Adapter)(nil)
	_ channels.Connecter   = (*Adapter)(nil)
	_ channels.HTTPHandler = (*Adapter)(nil)
)
