// Package wafake is an in-process fake of the WhatsApp Business Cloud API
// for tests: the Graph API endpoints a bot uses, served over HTTP on
// 127.0.0.1, and a webhook sender that delivers users' messages and
// status callbacks to the bot's webhook, signed as Meta signs them. It
// speaks Meta's wire format (JSON bodies, Bearer tokens, the
// {"error":{…}} answers with Graph error codes), so an adapter on plain
// net/http runs against it unchanged:
//
//	f := wafake.New(t) // closed by t.Cleanup (Start and Close outside tests)
//	// api_base: f.APIBase(), phone_number_id: wafake.PhoneNumberID,
//	// access_token: wafake.AccessToken, app_secret: wafake.AppSecret,
//	// verify_token: wafake.VerifyToken
//	f.SetWebhook("http://127.0.0.1:PORT/whatsapp/webhook")
//	wamid, _ := f.Say(wafake.UserMessage{From: "15551234567", Text: "hi"})
//	sent, _ := f.WaitSent(ctx, "15551234567", 1)
//
// The business: phone number PhoneNumberID (display DisplayPhoneNumber,
// verified name VerifiedName) of account BusinessAccountID. Users are
// wa_ids, E.164 digits without "+" (a send to "+1555…" is recorded under
// "1555…").
//
// # Graph API
//
// Any version (/v23.0/…, /v19.0/…); every call needs "Authorization:
// Bearer AccessToken" (missing or wrong: HTTP 401, code 190). By call kind,
// the name Calls, Fail and WaitCalls use:
//
//   - "messages": POST /{ver}/{phone_number_id}/messages. Types text,
//     interactive (type button), template, reaction, image, audio, video,
//     document and sticker (by uploaded media id), with an optional
//     context.message_id (ReplyTo); answers {"messaging_product",
//     "contacts":[{input,wa_id}], "messages":[{"id":"wamid.…"}]}. Tried
//     counts these calls by recipient, failed ones included.
//   - "read": the same endpoint with "status":"read": marks a user's
//     message read (Reads), with "typing_indicator" also shows typing
//     (Typing); it answers {"success":true}.
//   - "media_upload": POST /{ver}/{phone_number_id}/media, multipart with
//     messaging_product=whatsapp, type and file → {"id":"…"}.
//   - "media": GET /{ver}/{media_id} → {url, mime_type, sha256,
//     file_size, id}; "download": GET of that url, Bearer token needed
//     (else 401, as lookaside.fbsbx.com) → the bytes.
//   - "phone_number": GET /{ver}/{phone_number_id} → id,
//     display_phone_number, verified_name, quality_rating.
//
// Another phone number id answers 400 code 100 subcode 33 (unknown
// object), as Meta does.
//
// Limits, as documented, answered 400 code 100 with error_data.details:
// text body 1..4,096 characters; interactive body 1..1,024, 1..3 buttons
// with ids 1..256 and unique, titles 1..20 characters; captions 1,024;
// uploads past 5 MB (image), 16 MB (audio, video), 100 MB (document).
// Templates must exist in the language asked (code 132001; AddTemplate;
// "reminder" in "en" with one body parameter exists from the start) with
// as many body parameters as they have (code 132000), none with a new
// line, a tab or more than four spaces in a row (code 100).
//
// The 24-hour customer-service window: a send other than a template to a
// user whose last message (Say, or SetLastUserMessage) is older than 24 h
// by the fake's clock (SetNow), or who never wrote, answers 400 code
// 131047 (re-engagement) and sends nothing. (Meta may also accept such a
// send and report 131047 in a failed status callback; Status sends one.)
//
// Failures, per kind or "*" for all, answered before the token check and
// without effect: Fail(kind, status, code, n) the next n calls with a
// Graph error of that code; Outage(status) every call until its end func
// runs. Calls counts every request of a kind, failed ones included.
//
// # Webhook
//
// SetWebhook sets the callback URL. Say(UserMessage) makes a user write:
// a "messages" change (text, image, audio with voice:true, document,
// location, interactive button_reply, with context for replies and
// button taps) in a whatsapp_business_account body, POSTed with
// "X-Hub-Signature-256: sha256=HMAC-SHA256(AppSecret, body)". A delivery
// counts as taken when answered 2xx within DeliveryTimeout; otherwise it
// is POSTed again after SetRedeliverAfter's delay (default 200 ms; Meta
// backs off for up to 7 days), until taken or the fake closes. Meta does
// not promise order; the fake keeps each user's deliveries in order, one
// in flight per user, so a test can check per-chat order. Status(wamid,
// status, code) sends a status callback for one of the bot's messages the
// same way.
//
// By hand: Compose builds a message's body without sending it (nor
// counting it as the user's last message); Deliver POSTs any body with
// any signature ("" for none; Sign for a right one, with another secret
// for a wrong one) and returns the status; Redeliver POSTs a message's
// delivery once more, as Meta replays one; Verify runs the hub.challenge
// GET handshake.
//
// # Recorded state
//
// Sent(to) lists what the bot sent to a user, in order (WaitSent waits;
// Tried counts the sends to a user, refused ones included); Reads, Typing
// and Reactions(wamid) the rest; Deliveries, DeliveryOf and Pending each
// delivery's attempts and answers (WaitTaken waits for 2xx). A tap with
// UserMessage.ButtonOn names another user's message: a forged tap.
// WaitFor(ctx, cond) re-evaluates cond whenever recorded state changes: no
// polling, no sleeps.
//
// Not modelled: the pair and throughput rate limits (inject them with
// Fail and codes 131056, 130429), list and flow messages, contacts and
// sticker intake, message echoes, statuses Meta sends on its own (only
// Status sends them), and Meta's retry timing.
package wafake

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

// The fake business and its secrets.
const (
	AccessToken        = "EAAfake0access0token0for0the0whatsapp0fake"
	AppSecret          = "fake-app-secret-5f2b8c0d9e7a41b3"
	VerifyToken        = "fake-verify-token-3c9d"
	PhoneNumberID      = "1000000001"
	BusinessAccountID  = "2000000002"
	DisplayPhoneNumber = "15550001111"
	VerifiedName       = "Switchboard Test"
)

// Documented limits.
const (
	MaxText        = 4096 // characters of a text message's body
	MaxButtonBody  = 1024 // characters of an interactive message's body
	MaxButtons     = 3    // reply buttons of an interactive message
	MaxButtonTitle = 20   // characters of a button's title
	MaxButtonID    = 256  // characters of a button's id
	MaxCaption     = 1024 // characters of a media caption
)

// Window is the customer-service window: free-form messages only within
// it after the user's last message.
const Window = 24 * time.Hour

// DeliveryTimeout is how long the fake waits for the webhook's answer.
const DeliveryTimeout = 10 * time.Second

// Fake is a fake WhatsApp Cloud API. Create it with New.
type Fake struct {
	// URL is the server's base, e.g. http://127.0.0.1:41234.
	URL string

	srv *httptest.Server

	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	changed waitfor.Changed
	closed  bool
	seq     int
	now     func() time.Time

	calls     map[string]int
	tried     map[string]int // wa_id → sends to it, failed ones included
	failures  []*failure
	outage    int // the status of every call during an Outage; 0: none
	templates map[string]Template

	webhook        string
	appSecret      string
	redeliverAfter time.Duration

	deliveries []*delivery
	byWamid    map[string]*delivery // a user's message → its delivery
	queues     map[string]*queue    // wa_id → deliveries waiting, in order
	users      map[string]string    // wamid of a user's message → its sender
	lastUser   map[string]time.Time // wa_id → time of the user's last message

	sent      map[string][]Message // wa_id → what the bot sent
	reads     []string
	typing    []string
	reactions map[string][]string
	media     map[string]*media
}

// Message is what the bot sent to a user.
type Message struct {
	ID   string // wamid
	To   string // wa_id
	Type string // text, interactive, template, image, audio, video, document, sticker
	// Text is the text body; for interactive the body text; for a
	// template its body parameters joined by "\n"; for media the caption.
	Text       string
	PreviewURL bool
	ReplyTo    string // context.message_id
	Template   string // template name
	Language   string // template language code
	Params     []string
	Buttons    []Button
	Media      []byte // the uploaded bytes of a media message
	MIMEType   string
	Filename   string
	At         time.Time // by the fake's clock
}

// Button is a reply button of an interactive message.
type Button struct{ ID, Title string }

// Template is a message template the business has.
type Template struct {
	Name, Language string
	Params         int // body parameters
}

type media struct {
	id, mime, sha string
	data          []byte
}

// failure is a failure Fail injected.
type failure struct {
	kind               string
	status, code, left int
}

// New starts a fake on 127.0.0.1 and stops it when the test ends.
func New(t testing.TB) *Fake {
	f := Start()
	t.Cleanup(f.Close)
	return f
}

// Start starts a fake like New for programs outside tests (benchmarks);
// call Close.
func Start() *Fake {
	f := &Fake{
		now:            time.Now,
		calls:          map[string]int{},
		tried:          map[string]int{},
		templates:      map[string]Template{},
		appSecret:      AppSecret,
		redeliverAfter: 200 * time.Millisecond,
		byWamid:        map[string]*delivery{},
		queues:         map[string]*queue{},
		users:          map[string]string{},
		lastUser:       map[string]time.Time{},
		sent:           map[string][]Message{},
		reactions:      map[string][]string{},
		media:          map[string]*media{},
	}
	f.templates[templateKey("reminder", "en")] = Template{Name: "reminder", Language: "en", Params: 1}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.HandleFunc("POST /{ver}/{id}/messages", f.handleMessages)
	mux.HandleFunc("POST /{ver}/{id}/media", f.handleUpload)
	mux.HandleFunc("GET /{ver}/{id}", f.handleObject)
	mux.HandleFunc("GET /download/{id}", f.handleDownload)
	f.srv = httptest.NewServer(mux)
	f.URL = f.srv.URL
	return f
}

// Close stops the fake: its deliveries and its server.
func (f *Fake) Close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	f.mu.Unlock()
	f.cancel()
	f.wg.Wait()
	f.srv.Close()
}

// APIBase is the Graph API base for api_base: "http://127.0.0.1:PORT";
// the client appends /{version}/….
func (f *Fake) APIBase() string { return f.URL }

// SetNow sets the fake's clock, for the 24-hour window and message times.
func (f *Fake) SetNow(now func() time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = now
}

// SetLastUserMessage sets when user to last wrote, as Meta counts the
// 24-hour window; the zero time: never.
func (f *Fake) SetLastUserMessage(to string, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	to = waID(to)
	if at.IsZero() {
		delete(f.lastUser, to)
		return
	}
	f.lastUser[to] = at
}

// AddTemplate adds an approved template.
func (f *Fake) AddTemplate(tpl Template) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.templates[templateKey(tpl.Name, tpl.Language)] = tpl
}

func templateKey(name, lang string) string { return name + "/" + lang }

// notify wakes waiters; f.mu may be held.
func (f *Fake) notify() { f.changed.Notify() }

// WaitFor blocks until cond returns true or ctx ends. cond may call the
// fake's accessors; it is re-evaluated whenever recorded state changes.
func (f *Fake) WaitFor(ctx context.Context, cond func() bool) error {
	if err := f.changed.Wait(ctx, cond); err != nil {
		return fmt.Errorf("wafake: wait: %w", err)
	}
	return nil
}

// nextIDLocked returns a fresh id with prefix; f.mu must be held.
func (f *Fake) nextIDLocked(prefix string) string {
	f.seq++
	return fmt.Sprintf("%s%08d", prefix, f.seq)
}

// nextWamidLocked returns a fresh message id, shaped as Meta's.
func (f *Fake) nextWamidLocked() string { return f.nextIDLocked("wamid.HBgLFAKE") }

// Calls counts the requests of a kind ("messages", "read",
// "media_upload", "media", "download", "phone_number"), failed ones
// included.
func (f *Fake) Calls(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[kind]
}

// Tried counts the sends ("messages" calls other than read receipts) to
// user to, failed ones included.
func (f *Fake) Tried(to string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tried[waID(to)]
}

// WaitCalls waits until kind has had at least n requests.
func (f *Fake) WaitCalls(ctx context.Context, kind string, n int) error {
	return f.WaitFor(ctx, func() bool { return f.Calls(kind) >= n })
}

// Fail makes the next n calls of kind ("*": any kind) answer status with
// a Graph error of code, without effect: e.g. (400, 131047), (429,
// 130429), (401, 190), (500, 131000).
func (f *Fake) Fail(kind string, status, code, n int) {
	if n <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, &failure{kind: kind, status: status, code: code, left: n})
}

// Outage makes every Graph API call answer status (a 5xx, with code 2,
// "service temporarily unavailable") until end is called.
func (f *Fake) Outage(status int) (end func()) {
	f.mu.Lock()
	f.outage = status
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.outage = 0
		f.notify()
	}
}

// failureLocked returns the status and code of the failure a call of
// kind answers (0: none) and counts it.
func (f *Fake) failureLocked(kind string) (status, code int) {
	if f.outage != 0 {
		return f.outage, 2
	}
	for i, fl := range f.failures {
		if fl.kind == kind || fl.kind == "*" {
			if fl.left--; fl.left == 0 {
				f.failures = slices.Delete(f.failures, i, i+1)
			}
			return fl.status, fl.code
		}
	}
	return 0, 0
}

// Sent returns what the bot sent to user to, in order.
func (f *Fake) Sent(to string) []Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return cloneMessages(f.sent[waID(to)])
}

// SentAll returns what the bot sent to anyone, by user.
func (f *Fake) SentAll() map[string][]Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string][]Message, len(f.sent))
	for to, ms := range f.sent {
		out[to] = cloneMessages(ms)
	}
	return out
}

// WaitSent waits until the bot has sent at least n messages to to and
// returns them.
func (f *Fake) WaitSent(ctx context.Context, to string, n int) ([]Message, error) {
	var got []Message
	err := f.WaitFor(ctx, func() bool {
		got = f.Sent(to)
		return len(got) >= n
	})
	return got, err
}

func cloneMessages(ms []Message) []Message {
	out := slices.Clone(ms)
	for i := range out {
		out[i].Params = slices.Clone(out[i].Params)
		out[i].Buttons = slices.Clone(out[i].Buttons)
		out[i].Media = slices.Clone(out[i].Media)
	}
	return out
}

// Reads returns the users' messages the bot marked read, in order.
func (f *Fake) Reads() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reads)
}

// Typing returns the users' messages under which the bot showed the
// typing indicator, in order.
func (f *Fake) Typing() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.typing)
}

// Reactions returns the emoji the bot set on message wamid, in order (""
// removes a reaction).
func (f *Fake) Reactions(wamid string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reactions[wamid])
}

// waID is a phone number as a wa_id: digits, no "+".
func waID(s string) string { return strings.TrimPrefix(strings.TrimSpace(s), "+") }
