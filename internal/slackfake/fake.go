// Package slackfake is an in-process fake of Slack for tests: the Web API,
// Socket Mode and the Events API sender, served over HTTP and websocket on
// 127.0.0.1. It speaks Slack's wire format (form-encoded and JSON request
// bodies, {"ok":…} answers, 429 with Retry-After, Socket Mode envelopes),
// so the real github.com/slack-go/slack client and its socketmode package
// run against it unchanged:
//
//	f := slackfake.New(t) // closed by t.Cleanup
//	api := slack.New(slackfake.BotToken, slack.OptionAPIURL(f.APIURL()),
//		slack.OptionAppLevelToken(slackfake.AppToken))
//	sm := socketmode.New(api)
//
// The workspace: TeamID "T0FAKE", the bot user BotUserID "UBOT" with
// BotID "BBOT" in app AppID "AFAKE"; BotToken (xoxb-…) and AppToken
// (xapp-…). Conversation ids tell their kind: "D…" a DM, "C…" a public
// channel, "G…" a private one.
//
// # Web API
//
// {APIURL}{method} for auth.test, apps.connections.open, chat.postMessage,
// chat.update, chat.delete, reactions.add, users.info, conversations.info,
// files.getUploadURLExternal (its upload_url is served too),
// files.completeUploadExternal and assistant.threads.setStatus; any other
// method answers unknown_method. The token comes from "Authorization:
// Bearer …" or the token argument: missing → not_authed, wrong →
// invalid_auth, the app token on a bot method (or the bot token on
// apps.connections.open) → not_allowed_token_type, with HTTP 200 as on
// Slack. Bot calls carry X-OAuth-Scopes; SetScopes takes scopes away
// (missing_scope with needed/provided; DefaultScopes is the full set).
// Messages: text over MaxMessageText characters → msg_too_long; neither
// text nor blocks → no_text; blocks past Block Kit's limits (50 blocks,
// section text 3000, header 150, markdown blocks 12,000 together, button
// text 75, value 2000, ids 255 and unique) → invalid_blocks with a
// response_metadata message. chat.update keeps the blocks when none are
// sent ("blocks=[]" clears them); only the bot's own messages may be
// updated or deleted (cant_update_message), a deleted one is
// message_not_found. reactions.add twice → already_reacted. Unknown users
// and conversations are made up from their id (AddUser, AddChannel name
// them); a DM's member is whoever wrote in it.
//
// # Limits and failures
//
// Limits (Tier1…Tier4, DefaultLimits, NoLimits; SetLimits, f.NoLimits())
// answer 429 with Retry-After in whole seconds, which slack-go turns into
// *slack.RateLimitedError; chat.postMessage is limited per channel (1/s,
// burst 3), the others per method by their tier. Throttled lists the
// refusals. Injected failures, per method or "*" for all, answered before
// the token check and without effect: Fail(method, status, n) (5xx with an
// HTML body → slack.StatusCodeError; 429 with Retry-After: 1),
// Outage(method, status) until its end func runs, RateLimit(method,
// retryAfter, n), FailError(method, code, n) (HTTP 200 ok:false).
// Calls/WaitCalls count every request of a method, failed ones included.
//
// # Socket Mode
//
// apps.connections.open (app token) hands out a one-use
// ws://127.0.0.1:PORT/link/?ticket=… URL (SocketURL). A socket gets a
// hello, then every unacknowledged envelope whose socket is gone, and a
// websocket ping every SetPingInterval (default 10 s; slack-go reconnects
// after 30 s without one). Envelopes go to the newest live socket:
//
//   - Say(UserMessage) → ts: a user's message, stored in History, as a
//     message event (channel_type im/channel/group; subtype file_share
//     with Files; bot_id with BotID), plus an app_mention outside DMs when
//     Text contains <@UBOT>. EnvelopesOf(ts) lists its envelopes.
//   - UserEdit / UserDelete: message_changed / message_deleted.
//   - Click(Click) → envelope id: block_actions on a bot message's button
//     (by action_id, or by value), with user, channel, container, the
//     message and the action (action_id, block_id, value).
//   - SlashCommand(SlashCommand) → envelope id; the ack's payload is kept.
//   - The bot's own posts come back as message events with bot_id, as
//     Slack sends them to a subscribed app, once a socket has connected
//     (so not in Events API tests); SetEchoBot(false) stops them.
//
// An envelope not acknowledged within SetRedelivery's after (default 1 s)
// is sent again with retry_attempt+1 and retry_reason "timeout", until
// acknowledged unless SetRedelivery caps the retries (Slack gives up after
// 3; then Envelope.Dropped). Acked, WaitAcked, WaitAllAcked, Envelopes
// report them. Refresh sends a disconnect (refresh_requested);
// DropConnections closes every socket without a close frame. Connected,
// Connects, WaitConnected and Pings report the sockets.
//
// # Events API
//
// SetEventsURL(eventsURL, interactivityURL, secret) moves delivery to
// HTTP: Say, UserEdit, UserDelete, Click and SlashCommand then POST
// their envelopes' payloads, signed, to the app's Request URLs; a 2xx answer within 3 s is
// the acknowledgement, else the delivery is retried after SetRedelivery's
// after with X-Slack-Retry-Num 1 to 3 (Slack's cap). By hand: SayEvents
// records a user's message like Say but returns the
// event_callback bodies instead of queueing envelopes; PostEvent(ctx,
// url, secret, body, retryNum) sends one signed with X-Slack-Signature v0
// (HMAC-SHA256 of "v0:timestamp:body") and X-Slack-Request-Timestamp,
// adding X-Slack-Retry-Num/Reason when retryNum > 0; ClickPayload and
// PostInteraction do the same for interactivity (form field payload);
// Challenge checks the url_verification handshake. Sign computes the
// headers for hand-made (stale, forged) requests.
//
// # Files
//
// AddFile stores a file that a UserMessage can share; its url_private is
// on the fake's host (slack-go's GetFile only sends the token to Slack's
// hosts or the API URL's host) and is served only with the bot token and
// files:read, else redirected to a sign-in page as files.slack.com does.
// Uploads are the files the bot uploaded with files.getUploadURLExternal,
// a POST to the upload URL and files.completeUploadExternal (slack-go's
// UploadFileContext), with channel, thread and comment; they are not
// BotMessages.
//
// # Recorded state
//
// History(channel) and BotMessages(channel or "" for all), in ts order:
// Message with edits applied (Edits, Versions), Deleted marked, ThreadTS,
// Blocks raw as posted; WaitBotMessages. Reactions(channel, ts),
// Statuses, Uploads. WaitFor(ctx, cond) re-evaluates cond whenever
// recorded state changes: no polling, no sleeps.
//
// Not modelled: other Web API methods (conversations.history,
// chat.postEphemeral…), response_url, message_changed echoes of the bot's
// own edits, the message Slack posts for a shared upload, Enterprise
// Grid, and Slack's retry timing (1 and 5 minutes between Events API
// retries; here SetRedelivery's after).
package slackfake

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

// Identities and tokens of the fake workspace.
const (
	BotToken          = "xoxb-1-fake-bot-token"
	AppToken          = "xapp-1-AFAKE-1-fake-app-token"
	TeamID            = "T0FAKE"
	TeamDomain        = "fake"
	BotUserID         = "UBOT"
	BotID             = "BBOT"
	AppID             = "AFAKE"
	VerificationToken = "fake-verification-token"
)

// MaxMessageText is Slack's hard limit on a message's text, in characters;
// past it chat.postMessage and chat.update answer msg_too_long.
const MaxMessageText = 40000

// maxBlocks is Slack's limit on blocks in a message.
const maxBlocks = 50

// Fake is a fake Slack workspace. Create it with New (or Start).
type Fake struct {
	// URL is the server's base, e.g. http://127.0.0.1:41234.
	URL string

	t   testing.TB
	srv *httptest.Server

	mu      sync.Mutex
	changed waitfor.Changed // notified whenever recorded state changes
	closed  bool
	lastTS  int64 // microseconds of the last ts handed out
	seq     int

	calls     map[string]int
	failures  map[string][]*failure
	scopes    []string
	limits    Limits
	buckets   map[string]*rate.Limiter
	throttled []Throttle

	history   map[string][]*message // channel → its messages in ts order
	reactions map[string][]string   // channel/ts → reaction names
	statuses  []Status
	users     map[string]User
	channels  map[string]Channel
	files     map[string]*storedFile // file id → file
	uploads   []Upload

	// Events API mode (SetEventsURL)
	eventsURL, interactURL, signingSecret string
	ctx                                   context.Context // ends with Close, for HTTP deliveries
	cancel                                context.CancelFunc
	wg                                    sync.WaitGroup

	// Socket Mode
	redeliverAfter time.Duration
	maxRetries     int
	pingInterval   time.Duration
	echoBot        bool
	tickets        map[string]bool // issued, not yet used
	conns          map[*sockConn]struct{}
	newest         *sockConn
	connects       int
	pings          int
	envelopes      []*envelope
	byID           map[string]*envelope
	acked          []string
}

// Message is a message in a conversation: a user's (User set) or a bot's
// (BotID set). Text and Blocks are as they are now (edits applied).
type Message struct {
	Channel  string
	TS       string
	ThreadTS string
	User     string
	BotID    string
	Text     string
	Blocks   json.RawMessage // as posted, raw; nil when none
	Files    []File
	Edits    int  // chat.update calls (or user edits) applied
	Deleted  bool // chat.delete (or a user's deletion) happened
	// Versions are the texts the message has had, the first as posted
	// and one more per edit.
	Versions []string
}

type message struct{ Message }

// User is a workspace member for users.info. Users the fake has not been
// told about are made up from their id.
type User struct {
	ID       string
	Name     string
	RealName string
	TeamID   string // default TeamID
	IsBot    bool
}

// Channel is a conversation for conversations.info. Conversations the
// fake has not been told about are made up from their id: "D…" a DM, "G…"
// a private channel, "C…" a public channel.
type Channel struct {
	ID   string
	Name string
	User string // the other member of a DM
}

// Status is a recorded assistant.threads.setStatus call.
type Status struct{ Channel, ThreadTS, Status string }

// Throttle is a call refused with 429 because of the Limits.
type Throttle struct {
	Method     string
	Channel    string
	RetryAfter time.Duration
	Time       time.Time
}

type failure struct {
	status     int
	code       string // the error of an HTTP 200 failure
	left       int    // calls still to fail; -1 until ended
	retryAfter time.Duration
}

// New starts a fake on 127.0.0.1 and stops it when the test ends.
func New(t testing.TB) *Fake {
	f := Start()
	f.t = t
	t.Cleanup(f.Close)
	return f
}

// Start starts a fake like New for programs outside tests; call Close.
func Start() *Fake {
	f := &Fake{
		calls:          map[string]int{},
		failures:       map[string][]*failure{},
		history:        map[string][]*message{},
		reactions:      map[string][]string{},
		users:          map[string]User{},
		channels:       map[string]Channel{},
		files:          map[string]*storedFile{},
		redeliverAfter: time.Second,
		pingInterval:   10 * time.Second,
		echoBot:        true,
		tickets:        map[string]bool{},
		conns:          map[*sockConn]struct{}{},
		byID:           map[string]*envelope{},
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.setLimitsLocked(DefaultLimits.Clone())
	f.scopes = slices.Clone(DefaultScopes)
	f.users[BotUserID] = User{ID: BotUserID, Name: "switchboard", RealName: "Switchboard", IsBot: true}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/{method}", f.handleAPI)
	mux.HandleFunc("GET /link/", f.handleSocket)
	mux.HandleFunc("POST /upload/v1/{id}", f.handleUpload)
	mux.HandleFunc("GET /files-pri/{team}/{name...}", f.handleFile)
	mux.HandleFunc("GET /signin", f.handleSignin)
	f.srv = httptest.NewServer(mux)
	f.URL = f.srv.URL
	return f
}

// Close stops the fake: its timers, sockets and server.
func (f *Fake) Close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	for _, e := range f.envelopes {
		if e.timer != nil {
			e.timer.Stop()
		}
	}
	conns := make([]*sockConn, 0, len(f.conns))
	for c := range f.conns {
		conns = append(conns, c)
	}
	f.mu.Unlock()
	f.cancel()
	f.wg.Wait()
	for _, c := range conns {
		c.close()
	}
	f.srv.Close()
}

// APIURL is the Web API base for slack.OptionAPIURL, with its trailing
// slash: "http://127.0.0.1:PORT/api/".
func (f *Fake) APIURL() string { return f.URL + "/api/" }

// notify wakes waiters.
func (f *Fake) notify() { f.changed.Notify() }

// WaitFor blocks until cond returns true or ctx ends. cond may call the
// fake's accessors; it is re-evaluated whenever recorded state changes.
func (f *Fake) WaitFor(ctx context.Context, cond func() bool) error {
	if err := f.changed.Wait(ctx, cond); err != nil {
		return fmt.Errorf("slackfake: wait: %w", err)
	}
	return nil
}

// errorf reports a misuse of the fake to the test, or panics outside one.
func (f *Fake) errorf(format string, args ...any) {
	if f.t != nil {
		f.t.Helper()
		f.t.Errorf("slackfake: "+format, args...)
		return
	}
	panic(fmt.Sprintf("slackfake: "+format, args...))
}

// nextTSLocked returns a fresh message timestamp ("1712345678.000100"),
// later than every earlier one; f.mu must be held.
func (f *Fake) nextTSLocked() string {
	now := time.Now().UnixMicro()
	f.lastTS = max(now, f.lastTS+1)
	return fmt.Sprintf("%d.%06d", f.lastTS/1e6, f.lastTS%1e6)
}

// nextIDLocked returns prefix followed by a fresh number; f.mu must be held.
func (f *Fake) nextIDLocked(prefix string) string {
	f.seq++
	return fmt.Sprintf("%s%07d", prefix, f.seq)
}

// Calls counts the requests a Web API method received, failed ones
// included.
func (f *Fake) Calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// WaitCalls waits until method has received at least n requests.
func (f *Fake) WaitCalls(ctx context.Context, method string, n int) error {
	return f.WaitFor(ctx, func() bool { return f.Calls(method) >= n })
}

// Fail makes the next n calls of method ("*": any method) answer status
// without effect: a 5xx with an HTML body as Slack's front ends send, or
// 429 with Retry-After: 1.
func (f *Fake) Fail(method string, status, n int) {
	if n <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[method] = append(f.failures[method], &failure{status: status, left: n, retryAfter: time.Second})
}

// Outage makes every call of method ("*": any method) answer status until
// end is called.
func (f *Fake) Outage(method string, status int) (end func()) {
	fl := &failure{status: status, left: -1, retryAfter: time.Second}
	f.mu.Lock()
	f.failures[method] = append(f.failures[method], fl)
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.failures[method] = slices.DeleteFunc(f.failures[method], func(x *failure) bool { return x == fl })
			f.notify()
		})
	}
}

// FailError makes the next n calls of method ("*": any method) answer
// HTTP 200 {"ok":false,"error":code} without effect, e.g.
// "channel_not_found", "not_in_channel", "missing_scope".
func (f *Fake) FailError(method, code string, n int) {
	if n <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[method] = append(f.failures[method], &failure{status: http.StatusOK, code: code, left: n})
}

// RateLimit makes the next n calls of method ("*": any method) answer 429
// with Retry-After (whole seconds, at least 1, as Slack sends it).
func (f *Fake) RateLimit(method string, retryAfter time.Duration, n int) {
	if n <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[method] = append(f.failures[method], &failure{status: http.StatusTooManyRequests, left: n, retryAfter: retryAfter})
}

// takeFailureLocked returns the injected failure the call answers, if any;
// f.mu must be held.
func (f *Fake) takeFailureLocked(method string) *failure {
	for _, key := range []string{method, "*"} {
		q := f.failures[key]
		if len(q) == 0 {
			continue
		}
		fl := q[0]
		if fl.left > 0 {
			fl.left--
			if fl.left == 0 {
				f.failures[key] = q[1:]
			}
		}
		return fl
	}
	return nil
}

// AddUser makes a user known to users.info.
func (f *Fake) AddUser(u User) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.users[u.ID] = u
}

// AddChannel makes a conversation known to conversations.info.
func (f *Fake) AddChannel(c Channel) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.channels[c.ID] = c
}

// History returns a conversation's messages (users' and bots', thread
// replies included) in ts order.
func (f *Fake) History(channel string) []Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Message
	for _, m := range f.history[channel] {
		out = append(out, m.clone())
	}
	return out
}

// BotMessages returns what the bot posted to channel ("" for every
// channel), in ts order, with edits applied and deletions marked.
func (f *Fake) BotMessages(channel string) []Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Message
	for ch, h := range f.history {
		if channel != "" && ch != channel {
			continue
		}
		for _, m := range h {
			if m.BotID == BotID {
				out = append(out, m.clone())
			}
		}
	}
	slices.SortFunc(out, func(a, b Message) int { return compareTS(a.TS, b.TS) })
	return out
}

// WaitBotMessages waits until the bot has posted at least n messages to
// channel ("" for any) and returns them.
func (f *Fake) WaitBotMessages(ctx context.Context, channel string, n int) ([]Message, error) {
	var got []Message
	err := f.WaitFor(ctx, func() bool {
		got = f.BotMessages(channel)
		return len(got) >= n
	})
	return got, err
}

// Reactions returns the reaction names the bot added to a message, in
// order.
func (f *Fake) Reactions(channel, ts string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reactions[channel+"/"+ts])
}

// Statuses returns the assistant.threads.setStatus calls, in order.
func (f *Fake) Statuses() []Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.statuses)
}

// Throttled returns the calls refused because of the Limits, in order.
func (f *Fake) Throttled() []Throttle {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.throttled)
}

// findLocked returns the message ts of channel, or nil; f.mu must be held.
func (f *Fake) findLocked(channel, ts string) *message {
	for _, m := range f.history[channel] {
		if m.TS == ts {
			return m
		}
	}
	return nil
}

// addLocked appends m to its channel's history; f.mu must be held. ts
// values only grow, so appending keeps the order.
func (f *Fake) addLocked(m Message) *message {
	m.Versions = []string{m.Text}
	mm := &message{Message: m}
	f.history[m.Channel] = append(f.history[m.Channel], mm)
	return mm
}

func (m *message) clone() Message {
	c := m.Message
	c.Blocks = slices.Clone(m.Blocks)
	c.Files = slices.Clone(m.Files)
	c.Versions = slices.Clone(m.Versions)
	return c
}

// compareTS orders Slack timestamps ("seconds.micros").
func compareTS(a, b string) int {
	as, af, _ := strings.Cut(a, ".")
	bs, bf, _ := strings.Cut(b, ".")
	if len(as) != len(bs) {
		return len(as) - len(bs)
	}
	if c := strings.Compare(as, bs); c != 0 {
		return c
	}
	return strings.Compare(af, bf)
}
