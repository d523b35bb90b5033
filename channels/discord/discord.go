// Package discord is the Discord adapter: it receives messages, slash
// commands and button presses from the gateway through
// github.com/bwmarrin/discordgo, normalises them to channels.Inbound, and
// sends (with buttons, for Ask), edits and reacts over REST.
//
// discordgo owns the gateway: heartbeats, reconnects and resumes. After a
// dropped connection it resumes the session and Discord replays the events
// missed meanwhile, so they are delivered late but not lost; every message
// keeps its Discord id as MessageID, so the router's dedup absorbs a replay.
// A new session (a restart, or an invalid session) gets no replay; the
// adapter catches up over REST instead (see startCatchUp).
//
// With Options.ShardCount > 1 the adapter serves one gateway shard (fixed,
// or claimed by each Run): Discord sends it only the events of its guilds,
// and DMs only to shard 0; its catch-up skips the chats of other shards.
package discord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/switchboard-gateway/switchboard/channels"
)

const name = "discord"

// DefaultAPIBase is Discord's REST base.
const DefaultAPIBase = "https://discord.com/api/v9"

// DefaultMaxAttachments caps the attachments read per message: Discord
// allows 10 per message, so more is a crafted message (300 were seen).
const DefaultMaxAttachments = 10

// defaultMaxDownload caps image downloads; Discord's own upload limit for
// users without Nitro is 10 MiB, and a model rarely needs more than a few.
const defaultMaxDownload = 8 << 20

// intents are the gateway events the adapter needs. MessageContent is a
// privileged intent: without it (enabled in the developer portal) guild
// messages arrive with empty content.
const intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages |
	discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent

// Options configure an Adapter.
type Options struct {
	// Token is the bot token, without the "Bot " prefix.
	Token string
	// APIBase is the REST base, default DefaultAPIBase. Set to a fake's base,
	// REST calls and CDN downloads go there.
	APIBase string
	// GatewayURL, if set, overrides the gateway URL (ws:// or wss://).
	GatewayURL string
	// HTTPClient is copied, not changed; default: a 30 s timeout.
	HTTPClient *http.Client
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Sleep waits between retries; default: a timer that ends with ctx.
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxDownloadBytes caps image downloads (default 8 MiB); larger images
	// are described, not downloaded.
	MaxDownloadBytes int64
	// MaxAttachments caps the attachments read per message (default
	// DefaultMaxAttachments); the rest are only counted, in a note.
	MaxAttachments int
	// DownloadTransport carries attachment downloads: the gateway's
	// outbound guard (tools.GuardedTransport), which refuses loopback,
	// private and metadata addresses. Nil: the REST client's transport.
	// Downloads go only to Discord's CDN hosts (or, for tests, to an
	// APIBase other than Discord's) whatever the transport.
	DownloadTransport http.RoundTripper
	// LastSeen returns, per chat (channel id), the id of the newest message
	// already taken in. With it, each new gateway session first catches up
	// on the messages posted after those (see startCatchUp); without it,
	// messages sent while the bot was disconnected are not recovered.
	LastSeen func(ctx context.Context) (map[string]string, error)
	// CatchUpLimit caps the messages recovered per chat (default 500).
	CatchUpLimit int
	// CatchUpMaxAge: older messages are not recovered (default 24 h).
	CatchUpMaxAge time.Duration

	// ShardCount splits the bot's gateway into shards, each its own
	// connection (0 or 1: one connection gets every event). With more, the
	// adapter serves one shard: Discord sends it the events of the guilds
	// whose (guild_id >> 22) % ShardCount is the shard, and DMs only to
	// shard 0. Every shard must be served by some process.
	ShardCount int
	// ShardID is the shard to serve, 0 to ShardCount-1 (config shard_id).
	// Nil with ShardCount > 1: ClaimShard gives it.
	ShardID *int
	// ClaimShard gives the shard to serve when ShardCount > 1 and ShardID
	// is nil; New refuses that case without it. Each Run calls it before
	// connecting and does not connect until it returns: it may block until
	// a shard is free, and should return ctx's error when ctx ends. See
	// ShardClaim for losing and releasing a claim.
	ClaimShard func(ctx context.Context) (ShardClaim, error)
}

// ShardClaim is a shard claimed for one Run (see Options.ClaimShard).
type ShardClaim struct {
	// ID is the shard, 0 to ShardCount-1.
	ID int
	// Lost, if not nil, is closed when the claim ends before Run does (its
	// lease expired or was taken over): Run then closes the gateway and
	// returns an error, so that the supervisor runs it again and it claims
	// anew.
	Lost <-chan struct{}
	// Release, if not nil, is called once when Run has closed the gateway
	// (or failed to connect), so that another process may take the shard.
	Release func()
}

// Adapter is the Discord channel. Create it with New.
type Adapter struct {
	s           *discordgo.Session
	http        *http.Client
	files       *http.Client // attachment downloads (Options.DownloadTransport)
	fileHost    string       // a fake's host that serves attachments ("" on Discord)
	maxAttach   int
	log         *slog.Logger
	sleep       func(ctx context.Context, d time.Duration) error
	maxDownload int64
	redact      redactor
	libSink     *libSink
	lastSeen    func(ctx context.Context) (map[string]string, error)
	catchUpMax  int
	catchUpAge  time.Duration
	shardCount  int // > 1 when sharded
	shardID     *int
	claimShard  func(ctx context.Context) (ShardClaim, error)

	active   atomic.Bool // a Run is in progress (one at a time)
	running  atomic.Bool // the gateway should be connected
	cmdsDone atomic.Bool
	bg       sync.WaitGroup // command registration
	queues   chatQueues
	sends    chatLocks

	mu      sync.Mutex
	botID   string
	botName string
	titles  map[string]string // channel id → name
	shard   int               // the shard this Run serves
}

// New validates o and prepares a session; nothing connects until Run.
func New(o Options) (*Adapter, error) {
	token := strings.TrimSpace(strings.TrimPrefix(strings.TrimLeft(o.Token, " "), "Bot "))
	if token == "" {
		return nil, errors.New("discord: token is required (the bot token from the developer portal, without \"Bot \")")
	}
	if o.APIBase == "" {
		o.APIBase = DefaultAPIBase
	}
	api, err := url.Parse(o.APIBase)
	if err != nil || (api.Scheme != "http" && api.Scheme != "https") || api.Host == "" {
		return nil, fmt.Errorf("discord: api base %q must be an absolute http(s) URL", o.APIBase)
	}
	if o.GatewayURL != "" {
		gw, err := url.Parse(o.GatewayURL)
		if err != nil || (gw.Scheme != "ws" && gw.Scheme != "wss") || gw.Host == "" {
			return nil, fmt.Errorf("discord: gateway url %q must be an absolute ws(s) URL", o.GatewayURL)
		}
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("channel", name)
	if o.Sleep == nil {
		o.Sleep = sleepCtx
	}
	if o.MaxDownloadBytes <= 0 {
		o.MaxDownloadBytes = defaultMaxDownload
	}
	if o.MaxAttachments <= 0 {
		o.MaxAttachments = DefaultMaxAttachments
	}
	if o.CatchUpLimit <= 0 {
		o.CatchUpLimit = defaultCatchUpLimit
	}
	if o.CatchUpMaxAge <= 0 {
		o.CatchUpMaxAge = defaultCatchUpMaxAge
	}
	if err := checkShard(o); err != nil {
		return nil, err
	}

	client := &http.Client{Timeout: 30 * time.Second}
	if o.HTTPClient != nil {
		c := *o.HTTPClient
		client = &c
	}
	base := client.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	client.Transport = &rewriter{base: base, api: api, cdn: api.Host != "discord.com", gateway: o.GatewayURL}
	files := &http.Client{Timeout: client.Timeout, Transport: client.Transport}
	if o.DownloadTransport != nil {
		files.Transport = &rewriter{base: o.DownloadTransport, api: api, cdn: api.Host != "discord.com"}
	}

	s, err := discordgo.New("Bot " + token)
	if err != nil {
		return nil, fmt.Errorf("discord: new session: %w", err)
	}
	s.Client = client
	s.Dialer = &websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 15 * time.Second}
	s.Identify.Intents = intents
	s.SyncEvents = true // handlers only enqueue; ordering per chat is ours
	s.ShouldRetryOnRateLimit = false
	s.MaxRestRetries = 0
	s.ShouldReconnectVoiceOnSessionError = false
	s.LogLevel = discordgo.LogWarning
	if log.Enabled(context.Background(), slog.LevelDebug) {
		s.LogLevel = discordgo.LogInformational
	}
	s.State.MaxMessageCount = 0
	s.State.TrackEmojis, s.State.TrackMembers, s.State.TrackThreadMembers = false, false, false
	s.State.TrackRoles, s.State.TrackVoice, s.State.TrackPresences = false, false, false

	rd := newRedactor("Bot "+token, token)
	a := &Adapter{
		s: s, http: client, files: files, maxAttach: o.MaxAttachments, log: log, sleep: o.Sleep, maxDownload: o.MaxDownloadBytes,
		redact: rd, libSink: &libSink{log: log, redact: rd}, titles: map[string]string{},
		lastSeen: o.LastSeen, catchUpMax: o.CatchUpLimit, catchUpAge: o.CatchUpMaxAge,
		shardCount: max(o.ShardCount, 1), claimShard: o.ClaimShard,
	}
	if api.Host != "discord.com" {
		a.fileHost = api.Scheme + "://" + api.Host
	}
	files.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if len(via) >= 3 {
			return errors.New("stopped after 3 redirects")
		}
		return a.attachmentURL(r.URL)
	}
	if o.ShardID != nil {
		id := *o.ShardID
		a.shardID = &id
	}
	s.ShardCount = a.shardCount
	// A reconnect still in flight when Run stops may reopen the gateway
	// after Close; close it again.
	s.AddHandler(func(s *discordgo.Session, _ *discordgo.Connect) {
		if !a.running.Load() {
			go s.Close()
		}
	})
	return a, nil
}

// checkShard validates the sharding options.
func checkShard(o Options) error {
	switch {
	case o.ShardCount < 0:
		return fmt.Errorf("discord: shard count %d: use 0 or 1 for one gateway connection, or the number of shards", o.ShardCount)
	case o.ShardID != nil && (*o.ShardID < 0 || *o.ShardID >= max(o.ShardCount, 1)):
		return fmt.Errorf("discord: shard id %d: it must be from 0 to the shard count minus 1 (%d)", *o.ShardID, max(o.ShardCount, 1)-1)
	case o.ShardCount > 1 && o.ShardID == nil && o.ClaimShard == nil:
		return fmt.Errorf("discord: the gateway is split into %d shards, but this process has none: set shard_id, or let it claim one", o.ShardCount)
	}
	return nil
}

// Name is "discord".
func (a *Adapter) Name() string { return name }

// claim returns the shard this Run serves (0 when unsharded), from
// ShardID or ClaimShard.
func (a *Adapter) claim(ctx context.Context) (ShardClaim, error) {
	switch {
	case a.shardCount <= 1:
		return ShardClaim{}, nil
	case a.shardID != nil:
		return ShardClaim{ID: *a.shardID}, nil
	}
	c, err := a.claimShard(ctx)
	if err != nil {
		return ShardClaim{}, fmt.Errorf("discord: claim a gateway shard: %w", err)
	}
	if c.ID < 0 || c.ID >= a.shardCount {
		if c.Release != nil {
			c.Release()
		}
		return ShardClaim{}, fmt.Errorf("discord: claimed shard %d is not one of the %d shards", c.ID, a.shardCount)
	}
	a.log.Info("discord: claimed a gateway shard", "shard", c.ID, "shards", a.shardCount)
	return c, nil
}

// useShard sets the shard the session identifies with. discordgo reads it
// in Open, under the session lock.
func (a *Adapter) useShard(id int) {
	a.mu.Lock()
	a.shard = id
	a.mu.Unlock()
	a.s.Lock()
	a.s.ShardID = id
	a.s.Unlock()
}

// shardLogAttrs are the shard's log attributes; none when unsharded.
func (a *Adapter) shardLogAttrs() []any {
	if a.shardCount <= 1 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return []any{"shard", a.shard, "shards", a.shardCount}
}

// ownsGuild reports whether the events of guildID ("" for a DM) come to
// this adapter's shard: (guild_id >> 22) % shards, DMs to shard 0. An id
// that is not a snowflake is taken as this shard's.
func (a *Adapter) ownsGuild(guildID string) bool {
	if a.shardCount <= 1 {
		return true
	}
	a.mu.Lock()
	shard := a.shard
	a.mu.Unlock()
	if guildID == "" {
		return shard == 0
	}
	id, err := strconv.ParseUint(guildID, 10, 64)
	return err != nil || int((id>>22)%uint64(a.shardCount)) == shard
}

// Run connects to the gateway and hands messages and slash commands to sink
// until ctx ends. Reconnects and resumes are discordgo's. When sharded
// without a ShardID, it first waits for ClaimShard. It returns an error
// only when no shard could be claimed, the first connection fails, or the
// claim was lost.
func (a *Adapter) Run(ctx context.Context, sink channels.Sink) error {
	if !a.active.CompareAndSwap(false, true) {
		return errors.New("discord: run: already running")
	}
	defer a.active.Store(false)
	claim, err := a.claim(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if claim.Release != nil {
		defer claim.Release()
	}
	// discordgo keeps the last session and resumes it on the next Open,
	// even if this Run's shard is another. But Close ends a session (code
	// 1000), so Discord answers that RESUME with op 9 and discordgo
	// identifies anew, with this shard.
	a.useShard(claim.ID)
	a.running.Store(true)
	defer a.running.Store(false)
	defer registerLibLog(a.libSink)()

	remove := []func(){
		a.s.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) { a.onReady(ctx, sink, r) }),
		a.s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) { a.onMessage(ctx, sink, m.Message) }),
		a.s.AddHandler(func(_ *discordgo.Session, i *discordgo.InteractionCreate) { a.onInteraction(ctx, sink, i.Interaction) }),
		a.s.AddHandler(func(_ *discordgo.Session, _ *discordgo.Resumed) { a.log.Info("discord: gateway session resumed") }),
		a.s.AddHandler(func(_ *discordgo.Session, _ *discordgo.Disconnect) { a.log.Debug("discord: gateway disconnected") }),
	}
	defer func() {
		for _, r := range remove {
			r()
		}
	}()

	a.setReconnect(true)
	if err := a.s.Open(); err != nil {
		return a.redact.wrap(err, "discord: connect to gateway")
	}
	var lost error
	select {
	case <-ctx.Done():
	case <-claim.Lost: // a nil channel (no claim, or no Lost) never fires
		lost = fmt.Errorf("discord: lost the claim on gateway shard %d; disconnected", claim.ID)
		a.log.Warn("discord: lost the claim on the gateway shard; disconnecting", "shard", claim.ID, "shards", a.shardCount)
	}
	a.running.Store(false)
	// Without this, a heartbeat goroutine that was waiting for the session
	// lock while Close held it writes to the closed socket afterwards and
	// starts discordgo's reconnect loop, which would outlive Run.
	a.setReconnect(false)
	if err := a.s.Close(); err != nil {
		a.log.Warn("discord: close gateway", "err", a.redact.string(err.Error()))
	}
	a.queues.wait()
	a.bg.Wait()
	return lost
}

// setReconnect switches discordgo's reconnect on error. The library reads
// the field after taking and releasing the session lock, so writing it
// under that lock orders the two.
func (a *Adapter) setReconnect(on bool) {
	a.s.Lock()
	a.s.ShouldReconnectOnError = on
	a.s.Unlock()
}

func (a *Adapter) self() (id, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.botID, a.botName
}

// onReady runs on each READY (first connect, or a new session after an
// invalid one). It runs inside discordgo's Open, so it only records and
// starts work: the catch-up on messages the session missed, and the
// registration of slash commands.
func (a *Adapter) onReady(ctx context.Context, sink channels.Sink, r *discordgo.Ready) {
	if r.User == nil {
		a.log.Error("discord: READY without a user")
		return
	}
	a.mu.Lock()
	a.botID, a.botName = r.User.ID, r.User.Username
	a.mu.Unlock()
	a.log.Info("discord: connected", append([]any{"bot", r.User.Username, "bot_id", r.User.ID}, a.shardLogAttrs()...)...)
	a.startCatchUp(ctx, sink, r.User.ID)
	appID := r.User.ID
	if r.Application != nil && r.Application.ID != "" {
		appID = r.Application.ID
	}
	if a.cmdsDone.Load() {
		return
	}
	a.bg.Add(1)
	go func() {
		defer a.bg.Done()
		if err := a.registerCommands(ctx, appID); err != nil {
			a.log.Warn("discord: register slash commands (they will be missing from the menu; typed commands still work)", "err", err)
			return
		}
		a.cmdsDone.Store(true)
	}()
}

// commands are the router's commands, offered in Discord's slash menu.
var commands = []*discordgo.ApplicationCommand{
	{Name: "new", Description: "Start a new conversation"},
	{Name: "stop", Description: "Stop the current reply"},
	{Name: "status", Description: "Show the bot's status"},
	{Name: "help", Description: "Show what the bot can do"},
}

func (a *Adapter) registerCommands(ctx context.Context, appID string) error {
	err := a.retry(ctx, "register commands", func(opts ...discordgo.RequestOption) error {
		_, err := a.s.ApplicationCommandBulkOverwrite(appID, "", commands, opts...)
		return err
	})
	return a.redact.wrap(err, "discord: register commands")
}

// onMessage runs on discordgo's reader goroutine: it filters and enqueues.
func (a *Adapter) onMessage(ctx context.Context, sink channels.Sink, m *discordgo.Message) {
	botID, _ := a.self()
	if !a.accept(m, botID) {
		return
	}
	if ctx.Err() != nil {
		a.log.Warn("discord: message arrived while stopping; not delivered", "chat", m.ChannelID, "message", m.ID)
		return
	}
	a.queues.push(m.ChannelID, func() { a.handleMessage(ctx, sink, m, botID) })
}

// accept reports whether a message is for the bot, and logs why not.
func (a *Adapter) accept(m *discordgo.Message, botID string) bool {
	if why := ignoreMessage(m, botID); why != "" {
		a.log.Debug("discord: ignore message", "why", why, "chat", m.ChannelID, "message", m.ID)
		return false
	}
	return true
}

func (a *Adapter) handleMessage(ctx context.Context, sink channels.Sink, m *discordgo.Message, botID string) {
	in := inbound(m, botID)
	var left int
	in.Attachments, left = attachments(ctx, m, a.maxDownload, a.maxAttach, a.download)
	if left > 0 {
		a.log.Warn("discord: a message carries more attachments than are read", "chat", m.ChannelID, "message", m.ID,
			"read", a.maxAttach, "left_out", left)
		in.Text = strings.TrimSpace(in.Text + fmt.Sprintf("\n[%d more attachments were left out: at most %d are read per message]", left, a.maxAttach))
	}
	if in.Text == "" && len(in.Attachments) == 0 && strings.TrimSpace(m.Content) == "" {
		a.log.Debug("discord: empty message ignored (is the Message Content intent enabled?)", "chat", m.ChannelID, "message", m.ID)
		return
	}
	in.ChatTitle = a.chatTitle(ctx, m.ChannelID, m.GuildID)
	if err := a.deliver(ctx, sink, in); err != nil {
		a.log.Error("discord: message not delivered", "chat", in.ChatID, "message", in.MessageID, "err", err)
	}
}

func (a *Adapter) onInteraction(ctx context.Context, sink channels.Sink, i *discordgo.Interaction) {
	botID, _ := a.self()
	in, ok := interactionInbound(i, botID)
	if !ok {
		a.log.Debug("discord: ignore interaction", "type", i.Type.String())
		return
	}
	if ctx.Err() != nil {
		return
	}
	what := in.Text
	if in.Action != "" {
		what = "button " + in.Action
	}
	a.queues.push(in.ChatID, func() {
		in.ChatTitle = a.chatTitle(ctx, in.ChatID, in.Space)
		err := a.deliver(ctx, sink, in)
		if err != nil {
			a.log.Error("discord: interaction not delivered", "chat", in.ChatID, "interaction", what, "err", err)
		}
		a.ack(ctx, i, ackResponse(in, err), what)
	})
}

// ackResponse is the answer to an interaction once Deliver returned. A
// slash command gets a short ephemeral note; the router's reply follows as
// an ordinary message. A delivered button press gets a deferred update,
// which only stops the spinner on the button (the message stays as it is).
// When delivery failed, the user is told so, visible only to them.
func ackResponse(in channels.Inbound, deliverErr error) *discordgo.InteractionResponse {
	note := func(s string) *discordgo.InteractionResponse {
		return &discordgo.InteractionResponse{
			Type: discordgo.InteractionResponseChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Content: s, Flags: discordgo.MessageFlagsEphemeral},
		}
	}
	switch {
	case in.Action != "" && deliverErr != nil:
		return note("Sorry, your choice did not go through. Please try again.")
	case in.Action != "":
		return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}
	case deliverErr != nil:
		return note("Sorry, " + in.Text + " did not go through. Please try again.")
	}
	return note("✓ " + in.Text)
}

// ack answers an interaction with resp. Discord wants the answer within
// 3 s; a failure is logged, never returned.
func (a *Adapter) ack(ctx context.Context, i *discordgo.Interaction, resp *discordgo.InteractionResponse, what string) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	err := a.s.InteractionRespond(i, resp, discordgo.WithContext(ctx), discordgo.WithRetryOnRatelimit(false), discordgo.WithRestRetries(0))
	if err != nil {
		msg := newRedactor(i.Token).string(a.redact.string(err.Error()))
		a.log.Warn("discord: acknowledge interaction", "interaction", what, "err", msg)
	}
}

// deliver hands in to the sink, retrying a failing sink a few times.
func (a *Adapter) deliver(ctx context.Context, sink channels.Sink, in channels.Inbound) error {
	wait := time.Second
	for attempt := 1; ; attempt++ {
		err := sink.Deliver(ctx, in)
		if err == nil || ctx.Err() != nil || attempt == 4 {
			if err != nil {
				return fmt.Errorf("discord: deliver message %s: %w", in.MessageID, err)
			}
			return nil
		}
		a.log.Warn("discord: deliver failed; retrying", "chat", in.ChatID, "message", in.MessageID, "attempt", attempt, "err", err)
		if err := a.sleep(ctx, wait); err != nil {
			return fmt.Errorf("discord: deliver message %s: %w", in.MessageID, err)
		}
		wait *= 2
	}
}

// chatTitle is the name of a guild channel or thread, from the gateway's
// state or else one cached REST lookup. DMs have none.
func (a *Adapter) chatTitle(ctx context.Context, channelID, guildID string) string {
	if guildID == "" {
		return ""
	}
	a.mu.Lock()
	t, ok := a.titles[channelID]
	a.mu.Unlock()
	if ok {
		return t
	}
	c, err := a.s.State.Channel(channelID)
	if err != nil {
		c, err = a.s.Channel(channelID, discordgo.WithContext(ctx), discordgo.WithRetryOnRatelimit(false), discordgo.WithRestRetries(0))
	}
	if err != nil {
		a.log.Debug("discord: look up channel name", "chat", channelID, "err", a.redact.string(err.Error()))
		var re *discordgo.RESTError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 && re.Response.StatusCode != http.StatusTooManyRequests {
			a.mu.Lock()
			a.titles[channelID] = "" // unknown or forbidden: don't ask again
			a.mu.Unlock()
		}
		return ""
	}
	a.mu.Lock()
	a.titles[channelID] = c.Name
	a.mu.Unlock()
	return c.Name
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return context.Cause(ctx)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

var (
	_ channels.Channel    = (*Adapter)(nil)
	_ channels.Typer      = (*Adapter)(nil)
	_ channels.Reactor    = (*Adapter)(nil)
	_ channels.Editor     = (*Adapter)(nil)
	_ channels.Deleter    = (*Adapter)(nil)
	_ channels.Fitter     = (*Adapter)(nil)
	_ channels.FileSender = (*Adapter)(nil)
	_ channels.Asker      = (*Adapter)(nil)
	_ channels.Connecter  = (*Adapter)(nil)
	_ channels.Standbyer  = (*Adapter)(nil)
)
