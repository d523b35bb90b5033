// Package slack is the Slack adapter, on github.com/slack-go/slack: it
// receives messages, mentions, button presses and slash commands through
// Socket Mode (or, with an events path, the HTTP Events API), normalises
// them to channels.Inbound, and posts, edits, deletes, reacts and uploads
// over the Web API.
//
// Intake is at-least-once: a Socket Mode envelope is acknowledged, and an
// Events API request answered 200, only after Sink.Deliver returned nil
// (the message is stored). Otherwise Slack delivers it again, and the
// message keeps its ts as MessageID, so the store's intake takes a
// redelivery, a retry or the app_mention twin of a message event as the
// one message it is.
//
// Slack resends an unacknowledged event only for a few minutes; after a
// longer outage the adapter catches up from the conversations' history
// (catchup.go). See inbound.go for how conversations and threads map to
// chats.
package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

// Options configure an Adapter.
type Options struct {
	BotToken string // xoxb-…
	AppToken string // xapp-…, for Socket Mode
	// SigningSecret verifies Events API requests (EventsPath).
	SigningSecret string
	// APIURL is the Web API base, default DefaultAPIURL; a fake's in tests.
	// With another host than Slack's, files are fetched from that host too.
	APIURL string
	// EventsPath, when set, is the path Handler serves the Events API on;
	// Run then opens no Socket Mode connection.
	EventsPath string
	// AllowTeams are the workspaces whose events are taken; empty: the
	// bot token's own workspace only.
	AllowTeams []string
	// HTTPClient is copied, not changed; default: a 30 s timeout.
	HTTPClient *http.Client
	// DownloadTransport carries file downloads (the gateway's outbound
	// guard); nil: the Web API client's transport. Downloads go only to
	// Slack's file host (or the APIURL's host) whatever the transport.
	DownloadTransport http.RoundTripper
	// MaxDownloadBytes caps image downloads (default 8 MiB).
	MaxDownloadBytes int64
	// MaxRateLimitWait is the longest Retry-After a send waits out
	// (default one minute); longer, the send fails as unavailable.
	MaxRateLimitWait time.Duration
	// Sleep waits between retries; default: a timer that ends with ctx.
	Sleep func(ctx context.Context, d time.Duration) error
	// LastSeen returns, per chat, the newest MessageID taken in. With it,
	// each Socket Mode connection first catches up on what was written
	// after those (see catchUp); without it, messages Slack gave up
	// resending during an outage are not recovered.
	LastSeen func(ctx context.Context) (map[string]string, error)
	// CatchUpLimit caps the messages read per conversation (default 200).
	CatchUpLimit int
	// CatchUpMaxAge: older messages are not recovered (default 24 h).
	CatchUpMaxAge time.Duration
	// Now is the clock for the Events API's timestamps; default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Adapter is the Slack channel. Create it with New.
type Adapter struct {
	api         *slack.Client
	files       *http.Client
	fileHost    string // a fake's scheme://host that serves files ("" on Slack)
	botToken    string
	appToken    string
	secret      string
	eventsPath  string
	allowTeams  []string
	maxDownload int64
	maxWait     time.Duration
	sleep       func(ctx context.Context, d time.Duration) error
	now         func() time.Time
	log         *slog.Logger
	redactor    *strings.Replacer
	lastSeen    func(ctx context.Context) (map[string]string, error)
	catchUpMax  int
	catchUpAge  time.Duration
	catching    atomic.Bool    // a catch-up is running
	bg          sync.WaitGroup // catch-ups

	active    atomic.Bool                   // a Run is in progress
	connected atomic.Bool                   // Socket Mode said hello; or Events API mode ready
	sink      atomic.Pointer[channels.Sink] // Events API mode: Run's sink
	noStatus  atomic.Bool                   // assistant.threads.setStatus is not available
	sends     chatLocks
	ready     chan struct{} // closed the first time events can arrive
	readyOnce sync.Once

	mu     sync.Mutex
	me     self
	users  map[string]userInfo // user id → names, cached
	titles map[string]string   // conversation id → name, cached
	// noStatusIn are the chats where Slack refused a thinking status.
	noStatusIn map[string]bool
	// threads are the channel threads the bot takes part in (a mention
	// started them, or it posted there): a reply in one needs no mention.
	// Seeded once from the stored chats (Options.LastSeen).
	threads     map[string]bool
	threadsSeed sync.Once
}

type userInfo struct{ name, display string }

// New checks o and prepares the client; nothing is contacted until Run.
func New(o Options) (*Adapter, error) {
	o.BotToken = strings.TrimSpace(o.BotToken)
	if !strings.HasPrefix(o.BotToken, "xoxb-") {
		return nil, errors.New("slack: bot token is required and must start with xoxb-")
	}
	if o.EventsPath == "" && !strings.HasPrefix(strings.TrimSpace(o.AppToken), "xapp-") {
		return nil, errors.New("slack: Socket Mode needs an app-level token starting with xapp- (or set an events path)")
	}
	if o.EventsPath != "" && o.SigningSecret == "" {
		return nil, errors.New("slack: the Events API needs the signing secret")
	}
	if o.APIURL == "" {
		o.APIURL = DefaultAPIURL
	}
	api, err := url.Parse(o.APIURL)
	if err != nil || (api.Scheme != "http" && api.Scheme != "https") || api.Host == "" {
		return nil, fmt.Errorf("slack: api url %q must be an absolute http(s) URL", o.APIURL)
	}
	if !strings.HasSuffix(o.APIURL, "/") {
		o.APIURL += "/"
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("channel", Name)
	if o.Sleep == nil {
		o.Sleep = waitfor.Sleep
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxDownloadBytes <= 0 {
		o.MaxDownloadBytes = defaultMaxDownload
	}
	if o.CatchUpLimit <= 0 {
		o.CatchUpLimit = defaultCatchUpLimit
	}
	if o.CatchUpMaxAge <= 0 {
		o.CatchUpMaxAge = defaultCatchUpMaxAge
	}
	if o.MaxRateLimitWait <= 0 {
		o.MaxRateLimitWait = time.Minute
	}
	client := &http.Client{Timeout: 30 * time.Second}
	if o.HTTPClient != nil {
		c := *o.HTTPClient
		client = &c
	}
	a := &Adapter{
		botToken: o.BotToken, appToken: strings.TrimSpace(o.AppToken), secret: o.SigningSecret, eventsPath: o.EventsPath,
		allowTeams: slices.Clone(o.AllowTeams), maxDownload: o.MaxDownloadBytes, maxWait: o.MaxRateLimitWait,
		sleep: o.Sleep, now: o.Now, log: log, lastSeen: o.LastSeen, catchUpMax: o.CatchUpLimit, catchUpAge: o.CatchUpMaxAge, users: map[string]userInfo{}, titles: map[string]string{}, noStatusIn: map[string]bool{}, threads: map[string]bool{}, ready: make(chan struct{}),
	}
	a.redactor = strings.NewReplacer(secretPairs(o.BotToken, o.AppToken, o.SigningSecret)...)
	a.api = slack.New(o.BotToken, slack.OptionAPIURL(o.APIURL), slack.OptionHTTPClient(client),
		slack.OptionAppLevelToken(a.appToken), slack.OptionLog(libLogger{log}))
	a.files = &http.Client{Timeout: client.Timeout, Transport: client.Transport}
	if o.DownloadTransport != nil {
		a.files.Transport = o.DownloadTransport
	}
	if api.Host != "slack.com" {
		a.fileHost = api.Scheme + "://" + api.Host
	}
	a.files.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if len(via) >= 3 {
			return errors.New("stopped after 3 redirects")
		}
		return a.fileURL(r.URL)
	}
	return a, nil
}

func secretPairs(secrets ...string) []string {
	var pairs []string
	for _, s := range secrets {
		if s = strings.TrimSpace(s); s != "" {
			pairs = append(pairs, s, "[redacted]")
		}
	}
	return pairs
}

// redact removes the tokens from s.
func (a *Adapter) redact(s string) string { return a.redactor.Replace(s) }

// Name is "slack".
func (a *Adapter) Name() string { return Name }

// Connected reports whether events can arrive: Socket Mode's connection
// said hello (and has not dropped since), or the Events API handler is
// ready.
func (a *Adapter) Connected() bool { return a.active.Load() && a.connected.Load() }

// setConnected records whether events can arrive.
func (a *Adapter) setConnected(up bool) {
	a.connected.Store(up)
	if up {
		a.readyOnce.Do(func() { close(a.ready) })
	}
}

// identity is who the bot is (auth.test), once Run has asked.
func (a *Adapter) identity() self {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.me
}

// Run asks Slack who the bot is (auth.test), then takes events until ctx
// ends: over Socket Mode, reconnecting with backoff, or, with an events
// path, from Handler. It returns an error when the tokens are refused.
func (a *Adapter) Run(ctx context.Context, sink channels.Sink) error {
	if !a.active.CompareAndSwap(false, true) {
		return errors.New("slack: run: already running")
	}
	defer a.active.Store(false)
	defer a.connected.Store(false)
	if err := a.authenticate(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if a.eventsPath != "" {
		a.sink.Store(&sink)
		defer a.sink.Store(nil)
		a.setConnected(true)
		a.log.Info("slack: taking events over HTTP", "path", a.eventsPath)
		if a.lastSeen != nil {
			a.bg.Go(func() { a.catchUp(ctx, sink) })
		}
		<-ctx.Done()
		a.bg.Wait()
		return nil
	}
	return a.runSocket(ctx, sink)
}

// authenticate asks auth.test for the bot's ids, retrying while Slack is
// unreachable.
func (a *Adapter) authenticate(ctx context.Context) error {
	var res *slack.AuthTestResponse
	err := a.retry(ctx, "auth.test", func() error {
		var err error
		res, err = a.api.AuthTestContext(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("slack: auth.test: %s", a.redact(err.Error()))
	}
	a.mu.Lock()
	a.me = self{UserID: res.UserID, BotID: res.BotID, TeamID: res.TeamID}
	a.mu.Unlock()
	a.log.Info("slack: signed in", "bot", res.User, "user_id", res.UserID, "team", res.TeamID)
	return nil
}

// runSocket holds a Socket Mode connection until ctx ends. slack-go's
// client reconnects with backoff on its own (and when Slack asks it to);
// it returns only when the app token is refused.
func (a *Adapter) runSocket(ctx context.Context, sink channels.Sink) error {
	ctx, cancel := context.WithCancel(ctx)
	defer a.bg.Wait()
	defer cancel()
	smc := socketmode.New(a.api, socketmode.OptionLog(libLogger{a.log}))
	done := make(chan error, 1)
	go func() { done <- smc.RunContext(ctx) }()
	for {
		select {
		case <-ctx.Done():
			<-done
			return nil
		case err := <-done:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("slack: socket mode: %s", a.redact(err.Error()))
		case ev := <-smc.Events:
			a.onSocketEvent(ctx, smc, sink, ev)
		}
	}
}

// onSocketEvent handles one event of the Socket Mode client: connection
// state, and envelopes, acknowledged once delivered.
func (a *Adapter) onSocketEvent(ctx context.Context, smc *socketmode.Client, sink channels.Sink, ev socketmode.Event) {
	switch ev.Type {
	case socketmode.EventTypeHello:
		was := a.connected.Load()
		a.setConnected(true)
		if !was {
			a.log.Info("slack: socket mode connected")
			if a.lastSeen != nil && a.catching.CompareAndSwap(false, true) {
				a.bg.Go(func() {
					defer a.catching.Store(false)
					a.catchUp(ctx, sink)
				})
			}
		}
		return
	case socketmode.EventTypeConnecting:
		a.connected.Store(false)
		return
	case socketmode.EventTypeConnectionError, socketmode.EventTypeIncomingError, socketmode.EventTypeDisconnect:
		a.connected.Store(false)
		a.log.Debug("slack: socket mode connection lost", "event", string(ev.Type), "detail", a.redact(fmt.Sprint(ev.Data)))
		return
	case socketmode.EventTypeInvalidAuth:
		a.log.Error("slack: the app token was refused")
		return
	case socketmode.EventTypeErrorBadMessage:
		a.log.Warn("slack: unreadable socket mode message", "detail", a.redact(fmt.Sprint(ev.Data)))
		return
	}
	if ev.Request == nil {
		return
	}
	var err error
	var payload any
	switch ev.Type {
	case socketmode.EventTypeEventsAPI:
		e, ok := ev.Data.(slackevents.EventsAPIEvent)
		if !ok {
			return
		}
		err = a.handleEvent(ctx, sink, e)
	case socketmode.EventTypeInteractive:
		cb, ok := ev.Data.(slack.InteractionCallback)
		if !ok {
			return
		}
		err = a.handleInteraction(ctx, sink, cb)
	case socketmode.EventTypeSlashCommand:
		c, ok := ev.Data.(slack.SlashCommand)
		if !ok {
			return
		}
		payload, err = a.handleCommand(ctx, sink, c)
	default:
		return
	}
	if err != nil {
		// Not acknowledged: Slack sends the envelope again.
		a.log.Error("slack: event not delivered; Slack will send it again", "envelope", ev.Request.EnvelopeID,
			"retry", ev.Request.RetryAttempt, "err", err)
		return
	}
	if err := smc.AckCtx(ctx, ev.Request.EnvelopeID, payload); err != nil && ctx.Err() == nil {
		a.log.Warn("slack: acknowledge envelope", "envelope", ev.Request.EnvelopeID, "err", err)
	}
}

// teamAllowed reports whether events of team are taken: allow_teams, or
// the bot's own workspace when it is empty.
func (a *Adapter) teamAllowed(team string) bool {
	if team == "" {
		return true
	}
	if len(a.allowTeams) > 0 {
		return slices.Contains(a.allowTeams, team)
	}
	return team == a.identity().TeamID
}

// handleEvent delivers the message of an Events API callback. It returns
// nil for an event it ignores (so that it is acknowledged) and the sink's
// error for a message not stored.
func (a *Adapter) handleEvent(ctx context.Context, sink channels.Sink, e slackevents.EventsAPIEvent) error {
	if e.Type != slackevents.CallbackEvent {
		return nil
	}
	if !a.teamAllowed(e.TeamID) {
		a.log.Debug("slack: ignore event from another workspace", "team", e.TeamID)
		return nil
	}
	var p post
	switch ev := e.InnerEvent.Data.(type) {
	case *slackevents.MessageEvent:
		p = postOfMessage(e.TeamID, ev)
	case *slackevents.AppMentionEvent:
		p = postOfMention(e.TeamID, ev)
	default:
		return nil
	}
	me := a.identity()
	if why := ignorePost(p, me); why != "" {
		a.log.Debug("slack: ignore message", "why", why, "message", describe(p))
		return nil
	}
	in := inbound(p, me)
	if in.ChatType == channels.Group && !in.Mentioned && p.ThreadTS != "" && a.inThread(ctx, in.ChatID) {
		in.Mentioned = true // a thread the bot takes part in: no mention needed
	}
	var left int
	in.Attachments, left = attachments(ctx, p.Files, a.maxDownload, a.download)
	if left > 0 {
		in.Text = strings.TrimSpace(in.Text + fmt.Sprintf("\n[%d more files were left out: at most %d are read per message]", left, maxAttachments))
	}
	if in.Text == "" && len(in.Attachments) == 0 {
		a.log.Debug("slack: empty message ignored", "message", describe(p))
		return nil
	}
	in.UserName, in.DisplayName = a.userNames(ctx, in.UserID)
	if in.ChatType == channels.Group {
		in.ChatTitle = a.chatTitle(ctx, p.Channel)
	}
	if err := a.deliver(ctx, sink, in); err != nil {
		return err
	}
	if in.ChatType == channels.Group && in.Mentioned {
		a.joinThread(in.ChatID)
	}
	return nil
}

// inThread reports whether the bot takes part in the thread chatID.
func (a *Adapter) inThread(ctx context.Context, chatID string) bool {
	a.threadsSeed.Do(func() {
		if a.lastSeen == nil {
			return
		}
		seen, err := a.lastSeen(ctx)
		if err != nil {
			a.log.Warn("slack: read the stored chats (a reply in a thread the bot was in needs a mention until it posts there again)", "err", err)
			return
		}
		for chat := range seen {
			if _, thread := splitChat(chat); thread != "" {
				a.joinThread(chat)
			}
		}
	})
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.threads[chatID]
}

// joinThread records that the bot takes part in the thread chatID (a
// chat key with a thread; others are ignored).
func (a *Adapter) joinThread(chatID string) {
	if _, thread := splitChat(chatID); thread == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.threads[chatID] = true
}

// handleInteraction delivers a button press; other interactions are
// acknowledged and ignored.
func (a *Adapter) handleInteraction(ctx context.Context, sink channels.Sink, cb slack.InteractionCallback) error {
	in, ok := pressInbound(cb)
	if !ok {
		a.log.Debug("slack: ignore interaction", "type", string(cb.Type))
		return nil
	}
	if !a.teamAllowed(in.Space) {
		return nil
	}
	if in.UserName == "" || in.DisplayName == in.UserName {
		if name, display := a.userNames(ctx, in.UserID); name != "" {
			in.UserName, in.DisplayName = name, display
		}
	}
	return a.deliver(ctx, sink, in)
}

// handleCommand delivers a slash command and returns the acknowledgement's
// payload, a note only the user sees.
func (a *Adapter) handleCommand(ctx context.Context, sink channels.Sink, c slack.SlashCommand) (any, error) {
	in, ok := commandInbound(c)
	if !ok || !a.teamAllowed(in.Space) {
		return nil, nil
	}
	if err := a.deliver(ctx, sink, in); err != nil {
		return nil, err
	}
	return map[string]string{"response_type": "ephemeral", "text": "✓ " + in.Text}, nil
}

func (a *Adapter) deliver(ctx context.Context, sink channels.Sink, in channels.Inbound) error {
	if err := sink.Deliver(ctx, in); err != nil {
		return fmt.Errorf("slack: deliver message %s in %s: %w", in.MessageID, in.ChatID, err)
	}
	return nil
}

// userNames returns a user's handle and display name (users.info, cached;
// empty when it fails).
func (a *Adapter) userNames(ctx context.Context, id string) (string, string) {
	if id == "" {
		return "", ""
	}
	a.mu.Lock()
	u, ok := a.users[id]
	a.mu.Unlock()
	if ok {
		return u.name, u.display
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	info, err := a.api.GetUserInfoContext(ctx, id)
	if err != nil {
		a.log.Debug("slack: users.info", "user", id, "err", a.redact(err.Error()))
		return "", ""
	}
	u = userInfo{name: info.Name, display: firstNonEmpty(info.Profile.DisplayName, info.RealName, info.Profile.RealName, info.Name)}
	a.mu.Lock()
	if len(a.users) > 10_000 {
		clear(a.users)
	}
	a.users[id] = u
	a.mu.Unlock()
	return u.name, u.display
}

// chatTitle returns a conversation's name (conversations.info, cached;
// empty when it fails).
func (a *Adapter) chatTitle(ctx context.Context, channel string) string {
	a.mu.Lock()
	t, ok := a.titles[channel]
	a.mu.Unlock()
	if ok {
		return t
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := a.api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: channel})
	if err != nil {
		a.log.Debug("slack: conversations.info", "chat", channel, "err", a.redact(err.Error()))
		var se slack.SlackErrorResponse
		if errors.As(err, &se) { // refused (no channels:read): don't ask again
			a.mu.Lock()
			a.titles[channel] = ""
			a.mu.Unlock()
		}
		return ""
	}
	a.mu.Lock()
	if len(a.titles) > 10_000 {
		clear(a.titles)
	}
	a.titles[channel] = c.Name
	a.mu.Unlock()
	return c.Name
}

// libLogger sends slack-go's log lines to slog at debug level.
type libLogger struct{ log *slog.Logger }

func (l libLogger) Output(_ int, s string) error {
	l.log.Debug(strings.TrimSpace(s), "lib", "slack-go")
	return nil
}

var (
	_ channels.Channel     = (*Adapter)(nil)
	_ channels.Typer       = (*Adapter)(nil)
	_ channels.Reactor     = (*Adapter)(nil)
	_ channels.Editor      = (*Adapter)(nil)
	_ channels.Deleter     = (*Adapter)(nil)
	_ channels.Fitter      = (*Adapter)(nil)
	_ channels.FileSender  = (*Adapter)(nil)
	_ channels.Asker       = (*Adapter)(nil)
	_ channels.Connecter   = (*Adapter)(nil)
	_ channels.HTTPHandler = (*Adapter)(nil)
)
