// Package tgfake is an in-process fake of the Telegram Bot API for tests.
//
// It serves real HTTP on 127.0.0.1 (httptest) under /bot<token>/<method>,
// accepts form-encoded, multipart and JSON requests like the real server, and
// answers {"ok":true,"result":...} or {"ok":false,"error_code":N,...}, so the
// unmodified tgbotapi client works against it. Long polling follows the real
// offset semantics: updates below the requested offset are forgotten, a poll
// blocks until an update arrives or its timeout ends, a newer poll ends an
// older one with 409, and a set webhook makes getUpdates fail with 409.
//
// Outgoing text is checked as Telegram checks it: HTML is validated with
// internal/tghtml, length is counted in UTF-16 units after entity parsing,
// and empty text is refused. allowed_updates is recorded but not applied.
//
// Inline keyboards are checked (callback_data of 1-64 bytes, a text on every
// button) and kept with the message; like Telegram, editMessageText without
// reply_markup removes the keyboard. PushCallback presses a button: it
// queues a callback_query update carrying the bot's message, and
// answerCallbackQuery accepts each query id once.
//
// Telegram's flood limits are enforced (see Limits; on by default,
// SetLimits changes or removes them): past them a call is answered 429 with
// parameters.retry_after, and Throttled lists such answers.
// sendMessageDraft is served for private chats and recorded (Drafts).
package tgfake

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/time/rate"

	"github.com/switchboard-gateway/switchboard/internal/tghtml"
)

// Limits enforced by the fake, as documented for the Bot API.
const (
	MaxTextUnits    = 4096              // message text, UTF-16 units after entity parsing
	MaxCaptionUnits = 1024              // media caption
	MaxDownload     = 20 << 20          // getFile refuses bigger files
	firstDate       = 1_700_000_000     // unix time of the first fake message
	defaultUsername = "switchboard_bot" // the fake bot's @handle
)

// SentMessage is a message the bot sent or edited successfully.
type SentMessage struct {
	Method          string // sendMessage, sendPhoto, sendDocument or editMessageText
	ChatID          int64
	MessageThreadID int
	MessageID       int    // id assigned by the fake (or the edited message)
	Text            string // text or caption exactly as sent
	ParseMode       string
	ReplyTo         int    // reply_to_message_id or reply_parameters.message_id
	AllowNoReply    bool   // allow_sending_without_reply, either form
	ReplyMarkup     string // the reply_markup parameter as sent (JSON); see Buttons
	FileName        string // uploaded file name (multipart)
	FileData        []byte // uploaded file content (multipart)
	FileRef         string // file_id or URL when nothing was uploaded
}

// InlineButton is a button of an inline keyboard.
type InlineButton struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data,omitempty"`
	URL          string `json:"url,omitempty"`
}

// Buttons returns the rows of the inline keyboard sent with the message,
// or nil if it had none.
func (s SentMessage) Buttons() [][]InlineButton { return inlineButtons(s.ReplyMarkup) }

func inlineButtons(markup string) [][]InlineButton {
	var m struct {
		InlineKeyboard [][]InlineButton `json:"inline_keyboard"`
	}
	if markup == "" || json.Unmarshal([]byte(markup), &m) != nil {
		return nil
	}
	return m.InlineKeyboard
}

// Callback is a button press made with PushCallback (or found in an update
// given to PushUpdate).
type Callback struct {
	ID        string // callback_query id
	UpdateID  int
	ChatID    int64
	MessageID int
	UserID    int64
	Data      string
	Answered  bool // answerCallbackQuery succeeded for it
}

// CallbackAnswer is a successful answerCallbackQuery call.
type CallbackAnswer struct {
	CallbackQueryID string
	Text            string
	ShowAlert       bool
}

// Reaction is a setMessageReaction call that succeeded.
type Reaction struct {
	ChatID    int64
	MessageID int
	Emoji     []string
}

// BotCommand is one command registered with setMyCommands.
type BotCommand struct {
	Command     string `json:"command"`
	Description string `json:"description"`
}

type failure struct {
	code        int
	description string
	retryAfter  int
	rawBody     string // if set, answer this non-JSON body with status code
	reset       bool   // reset the connection without an answer
}

type pending struct {
	id int
	u  map[string]any
}

type msgKey struct {
	chat int64
	id   int
}

type storedFile struct {
	path string
	data []byte
}

// Fake is a fake Telegram Bot API server.
type Fake struct {
	URL         string // base URL: the adapter's APIEndpoint
	Token       string
	BotID       int64
	BotUsername string

	srv       *httptest.Server
	done      chan struct{}
	closeOnce sync.Once

	mu         sync.Mutex
	changed    chan struct{} // closed and replaced on every state change
	updates    []pending
	nextUpdate int
	nextMsg    int
	clock      int64
	pollGen    int
	sent       []SentMessage
	edits      []SentMessage
	reactions  []Reaction
	deleted    []SentMessage // deleteMessage calls that deleted a message, with its last text
	commands   []BotCommand
	calls      map[string]int
	requests   map[string][]url.Values
	failures   map[string][]failure
	outages    map[string]*outage // method → how every call fails until EndOutage
	disabled   map[string]bool
	files      map[string]storedFile
	offsets    []int
	texts      map[msgKey]string         // current text+parse mode of known messages
	markups    map[msgKey]string         // current reply_markup of the bot's messages
	botMsgs    map[msgKey]map[string]any // the bot's messages as Telegram shows them; replaced, never mutated
	chats      map[int64]map[string]any  // chat objects seen in pushed messages
	callbacks  []Callback
	answers    []CallbackAnswer
	nextQuery  int64
	webhookURL string
	webhookKey string
	drafts     []Draft

	limits       Limits                  // see SetLimits
	botBucket    *rate.Limiter           // nil: no limit
	chatBuckets  map[int64]*rate.Limiter // per chat id
	groupBuckets map[int64]*rate.Limiter // per group (negative chat id)
	throttled    []Throttle
}

// New starts a fake for token (e.g. "123:ABC"; the part before ':' becomes
// the bot's user id) and stops it when the test ends.
func New(t testing.TB, token string) *Fake {
	t.Helper()
	f := Start(token)
	t.Cleanup(f.Close)
	return f
}

// Start starts a fake like New for programs outside tests (benchmarks,
// demos); call Close when done.
func Start(token string) *Fake {
	id, _ := strconv.ParseInt(strings.SplitN(token, ":", 2)[0], 10, 64)
	if id == 0 {
		id = 1
	}
	f := &Fake{
		Token:       token,
		BotID:       id,
		BotUsername: defaultUsername,
		done:        make(chan struct{}),
		changed:     make(chan struct{}),
		nextUpdate:  1000,
		nextMsg:     100,
		clock:       firstDate,
		calls:       map[string]int{},
		requests:    map[string][]url.Values{},
		failures:    map[string][]failure{},
		outages:     map[string]*outage{},
		disabled:    map[string]bool{},
		files:       map[string]storedFile{},
		texts:       map[msgKey]string{},
		markups:     map[msgKey]string{},
		botMsgs:     map[msgKey]map[string]any{},
		chats:       map[int64]map[string]any{},
		nextQuery:   4_382_000_000_000_000_000,
	}
	f.SetLimits(DefaultLimits)
	f.srv = httptest.NewServer(f)
	f.URL = f.srv.URL
	return f
}

// Close stops the fake, ending long polls first. It is safe to call twice.
func (f *Fake) Close() {
	f.closeOnce.Do(func() {
		close(f.done) // release long polls before Close waits for them
		f.srv.Close()
	})
}

// notifyLocked wakes everybody waiting for a change. f.mu must be held.
func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// ---- test API: inputs ----

// PushUpdate queues an update. It assigns update_id when u has none and
// returns it. Messages inside become known to the fake (for replies, edits
// and reactions).
func (f *Fake) PushUpdate(u map[string]any) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := u["update_id"].(int)
	if !ok {
		f.nextUpdate++
		id = f.nextUpdate
		u["update_id"] = id
	} else if id > f.nextUpdate {
		f.nextUpdate = id
	}
	for _, k := range []string{"message", "edited_message"} {
		if m, ok := u[k].(map[string]any); ok {
			f.rememberLocked(m)
		}
	}
	if cb, ok := u["callback_query"].(map[string]any); ok {
		f.rememberCallbackLocked(id, cb)
	}
	f.updates = append(f.updates, pending{id: id, u: u})
	f.notifyLocked()
	return id
}

func (f *Fake) rememberLocked(m map[string]any) {
	chat, _ := m["chat"].(map[string]any)
	cid, mid := toInt64(chat["id"]), int(toInt64(m["message_id"]))
	if cid != 0 && mid != 0 {
		text, _ := m["text"].(string)
		f.texts[msgKey{cid, mid}] = text
	}
	if cid != 0 {
		f.chats[cid] = maps.Clone(chat)
	}
}

// rememberCallbackLocked makes a callback query answerable.
func (f *Fake) rememberCallbackLocked(updateID int, cb map[string]any) {
	id, _ := cb["id"].(string)
	if id == "" {
		return
	}
	c := Callback{ID: id, UpdateID: updateID}
	c.Data, _ = cb["data"].(string)
	if from, ok := cb["from"].(map[string]any); ok {
		c.UserID = toInt64(from["id"])
	}
	if m, ok := cb["message"].(map[string]any); ok {
		chat, _ := m["chat"].(map[string]any)
		c.ChatID, c.MessageID = toInt64(chat["id"]), int(toInt64(m["message_id"]))
	}
	f.callbacks = append(f.callbacks, c)
}

func toInt64(v any) int64 {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return 0
}

// PushMessage queues a "message" update and returns its update_id.
func (f *Fake) PushMessage(msg map[string]any) int {
	return f.PushUpdate(map[string]any{"message": msg})
}

// PushEdited queues an "edited_message" update for msg with edit_date set.
func (f *Fake) PushEdited(msg map[string]any) int {
	f.mu.Lock()
	f.clock++
	msg["edit_date"] = f.clock
	f.mu.Unlock()
	return f.PushUpdate(map[string]any{"edited_message": msg})
}

// PushText queues a text message from a user, as Telegram would deliver it,
// and returns the update and message ids.
func (f *Fake) PushText(chatID, userID int64, username, text string, opts ...MsgOption) (updateID, messageID int) {
	m := f.NewMessage(chatID, userID, username, text, opts...)
	return f.PushMessage(m), m["message_id"].(int)
}

// MsgOption adjusts a message built by NewMessage.
type MsgOption func(*msgSpec)

type msgSpec struct {
	f       *Fake
	msg     map[string]any
	chat    map[string]any
	caption bool
	topic   int
}

// InGroup makes the chat a supergroup with a title (use a negative chat id).
func InGroup(title string) MsgOption {
	return func(s *msgSpec) {
		s.chat["type"] = "supergroup"
		s.chat["title"] = title
		delete(s.chat, "first_name")
		delete(s.chat, "username")
	}
}

// InTopic puts the message in forum topic threadID. Like Telegram, a topic
// message that is not an explicit reply carries reply_to_message pointing at
// the topic's creation message.
func InTopic(threadID int) MsgOption {
	return func(s *msgSpec) {
		s.chat["is_forum"] = true
		s.msg["message_thread_id"] = threadID
		s.msg["is_topic_message"] = true
		s.topic = threadID
	}
}

// ReplyTo makes the message a reply to another message (built with
// NewMessage, or a map shaped like one).
func ReplyTo(target map[string]any) MsgOption {
	return func(s *msgSpec) { s.msg["reply_to_message"] = target }
}

// ReplyToBot makes the message a reply to a message the bot sent.
func ReplyToBot(messageID int, text string) MsgOption {
	return func(s *msgSpec) {
		s.msg["reply_to_message"] = map[string]any{
			"message_id": messageID,
			"from":       s.f.botUser(),
			"chat":       s.chat,
			"date":       firstDate,
			"text":       text,
		}
	}
}

// WithQuote adds the quoted part of the replied-to message (Bot API 7.0).
func WithQuote(text string) MsgOption {
	return func(s *msgSpec) {
		s.msg["quote"] = map[string]any{"text": text, "position": 0}
	}
}

// WithPhoto attaches a photo in several sizes (smallest first, as Telegram
// sends them); the text becomes the caption. Register the data with AddFile.
func WithPhoto(fileIDs ...string) MsgOption {
	return func(s *msgSpec) {
		var sizes []any
		for i, id := range fileIDs {
			sizes = append(sizes, map[string]any{
				"file_id": id, "file_unique_id": "u" + id,
				"width": 90 * (i + 1), "height": 90 * (i + 1), "file_size": s.f.fileSize(id),
			})
		}
		s.msg["photo"] = sizes
		s.caption = true
	}
}

// WithDocument attaches a document; the text becomes the caption.
func WithDocument(fileID, name, mimeType string, size int) MsgOption {
	return func(s *msgSpec) {
		s.msg["document"] = map[string]any{
			"file_id": fileID, "file_unique_id": "u" + fileID,
			"file_name": name, "mime_type": mimeType, "file_size": size,
		}
		s.caption = true
	}
}

// WithVoice attaches a voice note.
func WithVoice(fileID string, size int) MsgOption {
	return func(s *msgSpec) {
		s.msg["voice"] = map[string]any{
			"file_id": fileID, "file_unique_id": "u" + fileID,
			"duration": 3, "mime_type": "audio/ogg", "file_size": size,
		}
		s.caption = true
	}
}

// NewMessage builds a message map shaped like Telegram's, with a fresh
// message_id and mention/bot_command entities computed from the text.
func (f *Fake) NewMessage(chatID, userID int64, username, text string, opts ...MsgOption) map[string]any {
	f.mu.Lock()
	f.nextMsg++
	f.clock++
	id, date := f.nextMsg, f.clock
	f.mu.Unlock()
	from := userObject(userID, username)
	chat := map[string]any{"id": chatID, "type": "private", "first_name": from["first_name"]}
	if username != "" {
		chat["username"] = username
	}
	s := &msgSpec{f: f, chat: chat, msg: map[string]any{
		"message_id": id, "from": from, "chat": chat, "date": date,
	}}
	for _, o := range opts {
		o(s)
	}
	if s.topic != 0 {
		if _, ok := s.msg["reply_to_message"]; !ok {
			s.msg["reply_to_message"] = map[string]any{
				"message_id": s.topic, "from": from, "chat": chat, "date": firstDate,
				"message_thread_id": s.topic, "is_topic_message": true,
				"forum_topic_created": map[string]any{"name": "Topic", "icon_color": 7322096},
			}
		}
	}
	textKey, entKey := "text", "entities"
	if s.caption {
		textKey, entKey = "caption", "caption_entities"
	}
	if text != "" {
		s.msg[textKey] = text
		if ents := Entities(text); len(ents) > 0 {
			s.msg[entKey] = ents
		}
	}
	return s.msg
}

// userObject is a user as Telegram describes the sender of a message.
func userObject(userID int64, username string) map[string]any {
	from := map[string]any{"id": userID, "is_bot": false, "first_name": "User", "last_name": strconv.FormatInt(userID, 10)}
	if username != "" {
		from["username"] = username
		from["first_name"] = strings.ToUpper(username[:1]) + username[1:]
	}
	return from
}

// NewCallback builds a callback_query update (without update_id) for a
// press of the button with data on message messageID in chatID, by user
// userID, as Telegram delivers it: with a fresh query id and the message
// the keyboard is on, as the bot sent it (current text and keyboard, forum
// topic). A message the bot did not send, or that is gone, is given as an
// InaccessibleMessage: chat, message_id and date 0. The fake does not check
// that data belongs to one of the message's buttons.
func (f *Fake) NewCallback(chatID, userID int64, username string, messageID int, data string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextQuery++
	msg, ok := f.botMsgs[msgKey{chatID, messageID}]
	if !ok {
		msg = map[string]any{"message_id": messageID, "chat": f.chatLocked(chatID), "date": 0}
	}
	return map[string]any{"callback_query": map[string]any{
		"id":            strconv.FormatInt(f.nextQuery, 10),
		"from":          userObject(userID, username),
		"message":       msg,
		"chat_instance": strconv.FormatInt(-chatID*7919, 10),
		"data":          data,
	}}
}

// PushCallback queues the press of a button (see NewCallback) and returns
// its update_id; Callbacks tells its query id.
func (f *Fake) PushCallback(chatID, userID int64, username string, messageID int, data string) (updateID int) {
	return f.PushUpdate(f.NewCallback(chatID, userID, username, messageID, data))
}

var entityRe = regexp.MustCompile(`(^|[^\w@/])(@[A-Za-z0-9_]{5,32}|/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{5,32})?)`)

// Entities computes the mention and bot_command entities Telegram would
// attach to text, with offsets in UTF-16 units.
func Entities(text string) []any {
	var out []any
	for _, m := range entityRe.FindAllStringSubmatchIndex(text, -1) {
		start, end := m[4], m[5]
		typ := "mention"
		if text[start] == '/' {
			typ = "bot_command"
		}
		out = append(out, map[string]any{
			"type":   typ,
			"offset": len(utf16.Encode([]rune(text[:start]))),
			"length": len(utf16.Encode([]rune(text[start:end]))),
		})
	}
	return out
}

// AddFile makes fileID downloadable: getFile answers path, and
// /file/bot<token>/<path> serves data.
func (f *Fake) AddFile(fileID, path string, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[fileID] = storedFile{path: path, data: data}
}

func (f *Fake) fileSize(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.files[id].data)
}

// FailNext makes the next call of method fail with an API error. For 429
// pass retryAfter (seconds); an empty description gets Telegram's wording.
func (f *Fake) FailNext(method string, code int, description string, retryAfter int) {
	if description == "" {
		switch code {
		case http.StatusTooManyRequests:
			description = fmt.Sprintf("Too Many Requests: retry after %d", retryAfter)
		case http.StatusBadRequest:
			description = "Bad Request"
		case http.StatusForbidden:
			description = "Forbidden: bot was blocked by the user"
		case http.StatusConflict:
			description = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
		default:
			description = http.StatusText(code)
		}
	}
	f.addFailure(method, failure{code: code, description: description, retryAfter: retryAfter})
}

// FailNextRaw makes the next call of method answer a non-JSON body, like a
// proxy's 502 page.
func (f *Fake) FailNextRaw(method string, status int, body string) {
	f.addFailure(method, failure{code: status, rawBody: body})
}

// Outage makes every call of method answer status with a non-JSON body
// (like a proxy's 502 page while Telegram is down) until EndOutage; calls
// failing this way have no effect. Failures armed with FailNext and the
// like come first.
func (f *Fake) Outage(method string, status int, body string) {
	f.OutageAfter(method, 0, status, body)
}

// OutageAfter is Outage beginning after the next ok calls of method
// succeed (a reply in parts cut off after its first part).
func (f *Fake) OutageAfter(method string, ok, status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outages[strings.ToLower(method)] = &outage{after: ok, failure: failure{code: status, rawBody: body}}
}

// outage is an Outage: after calls still succeed, then every call fails.
type outage struct {
	after int
	failure
}

// Flood makes every call of method answer 429 Too Many Requests with
// retry_after (seconds), as Telegram does during a flood ban, until
// EndOutage; calls refused this way have no effect.
func (f *Fake) Flood(method string, retryAfter int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outages[strings.ToLower(method)] = &outage{failure: failure{code: http.StatusTooManyRequests,
		description: fmt.Sprintf("Too Many Requests: retry after %d", retryAfter), retryAfter: retryAfter}}
}

// EndOutage ends an Outage or a Flood of method: its calls work again.
func (f *Fake) EndOutage(method string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.outages, strings.ToLower(method))
	f.notifyLocked()
}

// ResetNext makes the next call of method end in a connection reset (TCP
// RST) after its request was read, without an answer and without effect:
// the client sees "connection reset by peer".
func (f *Fake) ResetNext(method string) {
	f.addFailure(method, failure{reset: true})
}

func (f *Fake) addFailure(method string, fl failure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := strings.ToLower(method)
	f.failures[m] = append(f.failures[m], fl)
}

// Disable makes method answer 404 "Not Found", like a server without it.
func (f *Fake) Disable(method string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.disabled[strings.ToLower(method)] = true
}

// ---- test API: observations ----

// Sent returns the messages sent so far (sendMessage, sendPhoto,
// sendDocument), in order.
func (f *Fake) Sent() []SentMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sent)
}

// Edits returns the successful editMessageText calls.
func (f *Fake) Edits() []SentMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.edits)
}

// Reactions returns the successful setMessageReaction calls.
func (f *Fake) Reactions() []Reaction {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reactions)
}

// Callbacks returns the button presses pushed so far, in order.
func (f *Fake) Callbacks() []Callback {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.callbacks)
}

// CallbackAnswers returns the successful answerCallbackQuery calls.
func (f *Fake) CallbackAnswers() []CallbackAnswer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.answers)
}

// CurrentButtons returns the inline keyboard a message of the bot shows
// now (after edits), or nil.
func (f *Fake) CurrentButtons(chatID int64, messageID int) [][]InlineButton {
	f.mu.Lock()
	defer f.mu.Unlock()
	return inlineButtons(f.markups[msgKey{chatID, messageID}])
}

// Commands returns the commands last set with setMyCommands.
func (f *Fake) Commands() []BotCommand {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.commands)
}

// Calls returns how often method was called, failures included.
func (f *Fake) Calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[strings.ToLower(method)]
}

// Requests returns the parameters of every call of method.
func (f *Fake) Requests(method string) []url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests[strings.ToLower(method)])
}

// Offsets returns the offset parameter of every getUpdates call (0 when the
// client sent none).
func (f *Fake) Offsets() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.offsets)
}

// Pending returns how many updates are not yet confirmed.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.updates)
}

// WaitWebhook waits until a webhook is set. (WaitCalls counts a call when it
// arrives, before its handler has stored the webhook.)
func (f *Fake) WaitWebhook(ctx context.Context) error {
	return f.wait(ctx, "a webhook", func() bool { return f.webhookURL != "" })
}

// Webhook returns the webhook URL and secret token currently set.
func (f *Fake) Webhook() (url, secret string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.webhookURL, f.webhookKey
}

// wait blocks until cond (called with the fake locked) holds or ctx ends.
func (f *Fake) wait(ctx context.Context, what string, cond func() bool) error {
	for {
		f.mu.Lock()
		ok, ch := cond(), f.changed
		f.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("tgfake: waiting for %s: %w", what, ctx.Err())
		}
	}
}

// WaitSent waits until at least n messages were sent and returns them.
func (f *Fake) WaitSent(ctx context.Context, n int) ([]SentMessage, error) {
	err := f.wait(ctx, fmt.Sprintf("%d sent messages", n), func() bool { return len(f.sent) >= n })
	return f.Sent(), err
}

// WaitEdits waits until at least n edits went through and returns them.
func (f *Fake) WaitEdits(ctx context.Context, n int) ([]SentMessage, error) {
	err := f.wait(ctx, fmt.Sprintf("%d edits", n), func() bool { return len(f.edits) >= n })
	return f.Edits(), err
}

// WaitCalls waits until method was called at least n times.
func (f *Fake) WaitCalls(ctx context.Context, method string, n int) error {
	m := strings.ToLower(method)
	return f.wait(ctx, fmt.Sprintf("%d %s calls", n, method), func() bool { return f.calls[m] >= n })
}

// WaitAnswered waits until the callback query id was answered.
func (f *Fake) WaitAnswered(ctx context.Context, id string) error {
	return f.wait(ctx, "an answer to callback query "+id, func() bool {
		return slices.ContainsFunc(f.callbacks, func(c Callback) bool { return c.ID == id && c.Answered })
	})
}

// WaitOffset waits until a getUpdates call carried an offset ≥ offset, i.e.
// everything below it was confirmed.
func (f *Fake) WaitOffset(ctx context.Context, offset int) error {
	return f.wait(ctx, fmt.Sprintf("offset %d", offset), func() bool {
		return slices.ContainsFunc(f.offsets, func(o int) bool { return o >= offset })
	})
}

// PostWebhook delivers update to the webhook registered with setWebhook, the
// way Telegram does (JSON POST with the secret token header), and returns
// the HTTP status.
func (f *Fake) PostWebhook(ctx context.Context, update map[string]any) (int, error) {
	f.mu.Lock()
	target, key := f.webhookURL, f.webhookKey
	f.mu.Unlock()
	if target == "" {
		return 0, fmt.Errorf("tgfake: no webhook set")
	}
	if _, ok := update["update_id"]; !ok {
		f.mu.Lock()
		f.nextUpdate++
		update["update_id"] = f.nextUpdate
		f.mu.Unlock()
	}
	body, err := json.Marshal(update)
	if err != nil {
		return 0, fmt.Errorf("tgfake: encode update: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(string(body)))
	if err != nil {
		return 0, fmt.Errorf("tgfake: webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("tgfake: post webhook: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// ---- HTTP ----

type apiError struct {
	code        int
	description string
	retryAfter  int
}

func badRequest(format string, args ...any) *apiError {
	return &apiError{code: http.StatusBadRequest, description: "Bad Request: " + fmt.Sprintf(format, args...)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeOK(w http.ResponseWriter, result any) {
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "result": result})
}

func writeErr(w http.ResponseWriter, e *apiError) {
	body := map[string]any{"ok": false, "error_code": e.code, "description": e.description}
	if e.retryAfter > 0 {
		body["parameters"] = map[string]any{"retry_after": e.retryAfter}
	}
	writeJSON(w, e.code, body)
}

// ServeHTTP routes /bot<token>/<method> and /file/bot<token>/<path>.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/file/bot"); ok {
		f.serveFile(w, r, rest)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	token, method, ok2 := strings.Cut(rest, "/")
	p, perr := params(r) // always drain the body before answering or blocking
	if !ok || !ok2 || method == "" {
		writeErr(w, &apiError{code: http.StatusNotFound, description: "Not Found"})
		return
	}
	if token != f.Token {
		writeErr(w, &apiError{code: http.StatusUnauthorized, description: "Unauthorized"})
		return
	}
	m := strings.ToLower(method)
	f.mu.Lock()
	f.calls[m]++
	f.requests[m] = append(f.requests[m], p)
	disabled := f.disabled[m]
	var fl *failure
	if q := f.failures[m]; len(q) > 0 && !disabled {
		fl = &q[0]
		f.failures[m] = q[1:]
	} else if o, ok := f.outages[m]; ok && !disabled {
		if o.after > 0 {
			o.after--
		} else {
			fl = &o.failure
		}
	}
	f.notifyLocked()
	f.mu.Unlock()

	switch {
	case disabled:
		writeErr(w, &apiError{code: http.StatusNotFound, description: "Not Found"})
		return
	case fl != nil && fl.reset:
		resetConn(w)
		return
	case fl != nil && fl.rawBody != "":
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(fl.code)
		_, _ = io.WriteString(w, fl.rawBody)
		return
	case fl != nil:
		writeErr(w, &apiError{code: fl.code, description: fl.description, retryAfter: fl.retryAfter})
		return
	case perr != nil:
		writeErr(w, badRequest("%v", perr))
		return
	}

	h, ok := f.handlers()[m]
	if !ok {
		writeErr(w, &apiError{code: http.StatusNotFound, description: "Not Found"})
		return
	}
	chat, _ := strconv.ParseInt(p.Get("chat_id"), 10, 64)
	f.mu.Lock()
	undo, aerr := f.admitLocked(m, chat)
	if aerr != nil {
		f.notifyLocked()
	}
	f.mu.Unlock()
	if aerr != nil {
		writeErr(w, aerr)
		return
	}
	result, aerr := h(r, p)
	if aerr != nil {
		undo() // refused for its contents: no message, no token
		writeErr(w, aerr)
		return
	}
	if result == nil { // the client went away during a long poll
		return
	}
	writeOK(w, result)
}

// resetConn closes the request's connection with a TCP RST (SO_LINGER 0).
func resetConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

type upload struct {
	name string
	data []byte
}

// request parameters, with uploads under the key "\x00file:<field>".
func params(r *http.Request) (url.Values, error) {
	defer func() {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}()
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "multipart/form-data":
		if err := r.ParseMultipartForm(32 << 20); err != nil {
			return url.Values{}, fmt.Errorf("parse multipart: %w", err)
		}
		p := url.Values{}
		for k, v := range r.MultipartForm.Value {
			p[k] = v
		}
		for field, hs := range r.MultipartForm.File {
			for _, h := range hs {
				fh, err := h.Open()
				if err != nil {
					return p, fmt.Errorf("open upload: %w", err)
				}
				data, err := io.ReadAll(fh)
				_ = fh.Close()
				if err != nil {
					return p, fmt.Errorf("read upload: %w", err)
				}
				p.Set("\x00file:"+field, h.Filename+"\x00"+string(data))
			}
		}
		return p, nil
	case "application/json":
		var m map[string]any
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			return url.Values{}, fmt.Errorf("parse json: %w", err)
		}
		p := url.Values{}
		for k, v := range m {
			if s, ok := v.(string); ok {
				p.Set(k, s)
				continue
			}
			b, _ := json.Marshal(v)
			p.Set(k, string(b))
		}
		return p, nil
	default:
		if err := r.ParseForm(); err != nil {
			return url.Values{}, fmt.Errorf("parse form: %w", err)
		}
		return r.Form, nil
	}
}

func uploaded(p url.Values, field string) (upload, bool) {
	v, ok := p["\x00file:"+field]
	if !ok || len(v) == 0 {
		return upload{}, false
	}
	name, data, _ := strings.Cut(v[0], "\x00")
	return upload{name: name, data: []byte(data)}, true
}

type handler func(r *http.Request, p url.Values) (any, *apiError)

func (f *Fake) handlers() map[string]handler {
	return map[string]handler{
		"getme":           f.getMe,
		"getupdates":      f.getUpdates,
		"sendmessage":     f.sendMessage,
		"editmessagetext": f.editMessageText,
		"deletemessage":   f.deleteMessage,
		"sendchataction":  f.sendChatAction,
		"setmycommands":   f.setMyCommands,
		"getfile":         f.getFile,
		"sendphoto":       func(r *http.Request, p url.Values) (any, *apiError) { return f.sendMedia("sendPhoto", "photo", p) },
		"senddocument": func(r *http.Request, p url.Values) (any, *apiError) {
			return f.sendMedia("sendDocument", "document", p)
		},
		"setmessagereaction":  f.setMessageReaction,
		"sendmessagedraft":    f.sendMessageDraft,
		"answercallbackquery": f.answerCallbackQuery,
		"deletewebhook":       f.deleteWebhook,
		"setwebhook":          f.setWebhook,
		"getwebhookinfo":      f.getWebhookInfo,
	}
}

func (f *Fake) botUser() map[string]any {
	return map[string]any{"id": f.BotID, "is_bot": true, "first_name": "Switchboard", "username": f.BotUsername}
}

func (f *Fake) getMe(*http.Request, url.Values) (any, *apiError) {
	u := f.botUser()
	u["can_join_groups"] = true
	u["can_read_all_group_messages"] = false
	u["supports_inline_queries"] = false
	return u, nil
}

// forgetLocked drops the updates a getUpdates offset confirms: those below
// a positive offset; all but the last -offset for a negative one. f.mu is
// held.
func (f *Fake) forgetLocked(offset int) {
	if offset < 0 { // the last -offset updates; everything before is forgotten
		if n := len(f.updates) + offset; n > 0 {
			f.updates = f.updates[n:]
		}
	} else if offset > 0 {
		kept := f.updates[:0]
		for _, u := range f.updates {
			if u.id >= offset {
				kept = append(kept, u)
			}
		}
		f.updates = kept
	}
}

func (f *Fake) getUpdates(r *http.Request, p url.Values) (any, *apiError) {
	offset, _ := strconv.Atoi(p.Get("offset"))
	timeout, _ := strconv.Atoi(p.Get("timeout"))
	limit, _ := strconv.Atoi(p.Get("limit"))
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	f.mu.Lock()
	if f.webhookURL != "" {
		f.mu.Unlock()
		return nil, &apiError{code: http.StatusConflict, description: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"}
	}
	f.offsets = append(f.offsets, offset)
	// Forgotten as the offset is recorded, so that a test that saw the
	// offset (WaitOffset) sees the confirmed updates gone (Pending).
	f.forgetLocked(offset)
	f.pollGen++
	gen := f.pollGen
	f.notifyLocked() // ends an older poll
	f.mu.Unlock()

	deadline := time.NewTimer(time.Duration(timeout) * time.Second)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		if f.pollGen != gen {
			f.mu.Unlock()
			return nil, &apiError{code: http.StatusConflict, description: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"}
		}
		f.forgetLocked(offset)
		out := make([]any, 0, limit)
		for _, u := range f.updates[:min(limit, len(f.updates))] {
			out = append(out, u.u)
		}
		wait := f.changed
		f.mu.Unlock()
		if len(out) > 0 || timeout <= 0 {
			return out, nil
		}
		select {
		case <-wait:
		case <-deadline.C:
			return []any{}, nil
		case <-r.Context().Done():
			return nil, nil
		case <-f.done:
			return []any{}, nil
		}
	}
}

func chatID(p url.Values) (int64, *apiError) {
	id, err := strconv.ParseInt(p.Get("chat_id"), 10, 64)
	if err != nil || id == 0 {
		return 0, badRequest("chat not found")
	}
	return id, nil
}

// checkText validates text as Telegram would and returns its visible form.
func checkText(text, parseMode string, maxUnits int, tooLong string) (string, *apiError) {
	visible := text
	switch parseMode {
	case "":
	case "HTML", "html":
		v, err := tghtml.Validate(text)
		if err != nil {
			return "", badRequest("can't parse entities: %v", err)
		}
		visible = v
	case "Markdown", "MarkdownV2":
		// Not modelled: accepted as is.
	default:
		return "", badRequest("unsupported parse_mode")
	}
	if tghtml.UTF16Len(visible) > maxUnits {
		return "", badRequest("%s", tooLong)
	}
	return visible, nil
}

type replyParams struct {
	MessageID    int  `json:"message_id"`
	AllowNoReply bool `json:"allow_sending_without_reply"`
}

func (f *Fake) replyTarget(p url.Values, chat int64) (int, bool, *apiError) {
	var rp replyParams
	if s := p.Get("reply_parameters"); s != "" {
		if err := json.Unmarshal([]byte(s), &rp); err != nil {
			return 0, false, badRequest("can't parse reply parameters JSON object")
		}
	}
	if s := p.Get("reply_to_message_id"); s != "" {
		rp.MessageID, _ = strconv.Atoi(s)
	}
	if p.Get("allow_sending_without_reply") == "true" {
		rp.AllowNoReply = true
	}
	if rp.MessageID != 0 {
		f.mu.Lock()
		_, known := f.texts[msgKey{chat, rp.MessageID}]
		f.mu.Unlock()
		if !known && !rp.AllowNoReply {
			return 0, false, badRequest("message to be replied not found")
		}
	}
	return rp.MessageID, rp.AllowNoReply, nil
}

func chatType(id int64) string {
	if id < 0 {
		return "supergroup"
	}
	return "private"
}

// chatLocked is the chat object of id: as seen in pushed messages, else
// a minimal one.
func (f *Fake) chatLocked(id int64) map[string]any {
	if c, ok := f.chats[id]; ok {
		return c
	}
	return map[string]any{"id": id, "type": chatType(id)}
}

// record stores a sent message and returns the Message Telegram answers.
func (f *Fake) record(s SentMessage, textKey, visible string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextMsg++
	f.clock++
	s.MessageID = f.nextMsg
	f.sent = append(f.sent, s)
	key := msgKey{s.ChatID, s.MessageID}
	f.texts[key] = s.ParseMode + "\x00" + s.Text
	f.markups[key] = s.ReplyMarkup
	f.notifyLocked()
	chat := f.chatLocked(s.ChatID)
	m := map[string]any{
		"message_id": s.MessageID,
		"from":       f.botUser(),
		"chat":       chat,
		"date":       f.clock,
	}
	if visible != "" {
		m[textKey] = visible
	}
	if s.MessageThreadID != 0 {
		m["message_thread_id"] = s.MessageThreadID
		m["is_topic_message"] = true
		// As for NewMessage: a topic message that replies to nothing points
		// at the topic's creation message.
		m["reply_to_message"] = map[string]any{
			"message_id": s.MessageThreadID, "chat": chat, "date": firstDate,
			"message_thread_id": s.MessageThreadID, "is_topic_message": true,
			"forum_topic_created": map[string]any{"name": "Topic", "icon_color": 7322096},
		}
	}
	if s.ReplyMarkup != "" {
		m["reply_markup"] = json.RawMessage(s.ReplyMarkup)
	}
	f.botMsgs[key] = m
	return m
}

// inlineActions are the fields of an inline keyboard button that give it
// something to do; a button needs exactly one.
var inlineActions = []string{"callback_data", "url", "login_url", "switch_inline_query",
	"switch_inline_query_current_chat", "switch_inline_query_chosen_chat", "callback_game", "pay", "web_app", "copy_text"}

// checkMarkup validates a reply_markup as Telegram does for inline
// keyboards; other keyboards are accepted as they are.
func checkMarkup(markup string) *apiError {
	if markup == "" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(markup), &m); err != nil {
		return badRequest("can't parse reply keyboard markup JSON object")
	}
	raw, ok := m["inline_keyboard"]
	if !ok {
		return nil
	}
	var rows [][]map[string]any
	if err := json.Unmarshal(raw, &rows); err != nil {
		return badRequest("can't parse inline keyboard button: field \"inline_keyboard\" must be an Array of Arrays")
	}
	for _, row := range rows {
		for _, b := range row {
			if text, _ := b["text"].(string); strings.TrimSpace(text) == "" {
				return badRequest("BUTTON_TEXT_INVALID")
			}
			n := 0
			for _, k := range inlineActions {
				if _, ok := b[k]; ok {
					n++
				}
			}
			if n != 1 {
				return badRequest("can't parse inline keyboard button: text buttons are unallowed in the inline keyboard")
			}
			if d, ok := b["callback_data"]; ok {
				if s, _ := d.(string); len(s) < 1 || len(s) > 64 {
					return badRequest("BUTTON_DATA_INVALID")
				}
			}
		}
	}
	return nil
}

func (f *Fake) sendMessage(_ *http.Request, p url.Values) (any, *apiError) {
	chat, aerr := chatID(p)
	if aerr != nil {
		return nil, aerr
	}
	text, mode := p.Get("text"), p.Get("parse_mode")
	visible, aerr := checkText(text, mode, MaxTextUnits, "message is too long")
	if aerr != nil {
		return nil, aerr
	}
	if strings.TrimSpace(visible) == "" {
		return nil, badRequest("message text is empty")
	}
	if aerr := checkMarkup(p.Get("reply_markup")); aerr != nil {
		return nil, aerr
	}
	replyTo, allow, aerr := f.replyTarget(p, chat)
	if aerr != nil {
		return nil, aerr
	}
	thread, _ := strconv.Atoi(p.Get("message_thread_id"))
	return f.record(SentMessage{
		Method: "sendMessage", ChatID: chat, MessageThreadID: thread, Text: text, ParseMode: mode,
		ReplyTo: replyTo, AllowNoReply: allow, ReplyMarkup: p.Get("reply_markup"),
	}, "text", visible), nil
}

func (f *Fake) sendMedia(method, field string, p url.Values) (any, *apiError) {
	chat, aerr := chatID(p)
	if aerr != nil {
		return nil, aerr
	}
	caption, mode := p.Get("caption"), p.Get("parse_mode")
	visible, aerr := checkText(caption, mode, MaxCaptionUnits, "message caption is too long")
	if aerr != nil {
		return nil, aerr
	}
	if aerr := checkMarkup(p.Get("reply_markup")); aerr != nil {
		return nil, aerr
	}
	s := SentMessage{Method: method, ChatID: chat, Text: caption, ParseMode: mode, ReplyMarkup: p.Get("reply_markup")}
	if up, ok := uploaded(p, field); ok {
		s.FileName, s.FileData = up.name, up.data
	} else if ref := p.Get(field); ref != "" {
		s.FileRef = ref
	} else {
		return nil, badRequest("there is no %s in the request", field)
	}
	if s.ReplyTo, s.AllowNoReply, aerr = f.replyTarget(p, chat); aerr != nil {
		return nil, aerr
	}
	s.MessageThreadID, _ = strconv.Atoi(p.Get("message_thread_id"))
	m := f.record(s, "caption", visible)
	file := map[string]any{"file_id": "sent-" + strconv.Itoa(m["message_id"].(int)), "file_unique_id": "s"}
	if field == "photo" {
		m["photo"] = []any{file}
	} else {
		file["file_name"] = s.FileName
		m["document"] = file
	}
	return m, nil
}

func (f *Fake) editMessageText(_ *http.Request, p url.Values) (any, *apiError) {
	chat, aerr := chatID(p)
	if aerr != nil {
		return nil, aerr
	}
	id, _ := strconv.Atoi(p.Get("message_id"))
	text, mode := p.Get("text"), p.Get("parse_mode")
	visible, aerr := checkText(text, mode, MaxTextUnits, "message is too long")
	if aerr != nil {
		return nil, aerr
	}
	if strings.TrimSpace(visible) == "" {
		return nil, badRequest("message text is empty")
	}
	markup := p.Get("reply_markup")
	if aerr := checkMarkup(markup); aerr != nil {
		return nil, aerr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := msgKey{chat, id}
	cur, ok := f.texts[key]
	if !ok {
		return nil, badRequest("message to edit not found")
	}
	if cur == mode+"\x00"+text && f.markups[key] == markup {
		return nil, badRequest("message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")
	}
	f.texts[key] = mode + "\x00" + text
	f.markups[key] = markup // without reply_markup, the keyboard goes
	f.edits = append(f.edits, SentMessage{Method: "editMessageText", ChatID: chat, MessageID: id, Text: text, ParseMode: mode, ReplyMarkup: markup})
	f.clock++
	f.notifyLocked()
	m := map[string]any{
		"message_id": id, "from": f.botUser(), "chat": f.chatLocked(chat),
		"date": f.clock, "edit_date": f.clock, "text": visible,
	}
	if old, ok := f.botMsgs[key]; ok {
		m["date"] = old["date"]
		for _, k := range []string{"message_thread_id", "is_topic_message", "reply_to_message"} {
			if v, ok := old[k]; ok {
				m[k] = v
			}
		}
	}
	if markup != "" {
		m["reply_markup"] = json.RawMessage(markup)
	}
	f.botMsgs[key] = m
	return m, nil
}

// answerCallbackQuery accepts each pushed callback query id once, as
// Telegram does (a second answer, or an unknown id, is "too old").
func (f *Fake) answerCallbackQuery(_ *http.Request, p url.Values) (any, *apiError) {
	id := p.Get("callback_query_id")
	if text := p.Get("text"); utf8.RuneCountInString(text) > 200 {
		return nil, badRequest("MESSAGE_TOO_LONG")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.IndexFunc(f.callbacks, func(c Callback) bool { return c.ID == id })
	if i < 0 || f.callbacks[i].Answered {
		return nil, badRequest("query is too old and response timeout expired or query ID is invalid")
	}
	f.callbacks[i].Answered = true
	f.answers = append(f.answers, CallbackAnswer{CallbackQueryID: id, Text: p.Get("text"), ShowAlert: p.Get("show_alert") == "true"})
	f.notifyLocked()
	return true, nil
}

var chatActions = map[string]bool{
	"typing": true, "upload_photo": true, "record_video": true, "upload_video": true,
	"record_voice": true, "upload_voice": true, "upload_document": true, "choose_sticker": true,
	"find_location": true, "record_video_note": true, "upload_video_note": true,
}

func (f *Fake) sendChatAction(_ *http.Request, p url.Values) (any, *apiError) {
	if _, aerr := chatID(p); aerr != nil {
		return nil, aerr
	}
	if !chatActions[p.Get("action")] {
		return nil, badRequest("wrong parameter action in request")
	}
	return true, nil
}

var commandRe = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

func (f *Fake) setMyCommands(_ *http.Request, p url.Values) (any, *apiError) {
	var cmds []BotCommand
	if err := json.Unmarshal([]byte(p.Get("commands")), &cmds); err != nil {
		return nil, badRequest("can't parse commands JSON object")
	}
	for _, c := range cmds {
		if !commandRe.MatchString(c.Command) {
			return nil, badRequest("BOT_COMMAND_INVALID")
		}
		if n := len([]rune(c.Description)); n < 1 || n > 256 {
			return nil, badRequest("BOT_COMMAND_DESCRIPTION_INVALID")
		}
	}
	f.mu.Lock()
	f.commands = cmds
	f.mu.Unlock()
	return true, nil
}

func (f *Fake) getFile(_ *http.Request, p url.Values) (any, *apiError) {
	id := p.Get("file_id")
	f.mu.Lock()
	file, ok := f.files[id]
	f.mu.Unlock()
	if !ok {
		return nil, badRequest("invalid file_id")
	}
	if len(file.data) > MaxDownload {
		return nil, badRequest("file is too big")
	}
	return map[string]any{"file_id": id, "file_unique_id": "u" + id, "file_size": len(file.data), "file_path": file.path}, nil
}

func (f *Fake) serveFile(w http.ResponseWriter, r *http.Request, rest string) {
	_, _ = io.Copy(io.Discard, r.Body)
	token, path, _ := strings.Cut(rest, "/")
	f.mu.Lock()
	var data []byte
	found := false
	for _, file := range f.files {
		if file.path == path {
			data, found = file.data, true
			break
		}
	}
	f.mu.Unlock()
	if token != f.Token || !found || r.Method != http.MethodGet {
		writeErr(w, &apiError{code: http.StatusNotFound, description: "Not Found"})
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
}

// reactionEmoji is a subset of the emoji Telegram allows as reactions.
var reactionEmoji = map[string]bool{
	"👍": true, "👎": true, "❤": true, "🔥": true, "🥰": true, "👏": true, "😁": true, "🤔": true,
	"🤯": true, "😱": true, "🎉": true, "🤩": true, "🙏": true, "👌": true, "👀": true, "💯": true,
	"😂": true, "⚡": true, "🏆": true, "✍": true, "🤝": true, "🫡": true, "😎": true, "🤷": true,
}

func (f *Fake) setMessageReaction(_ *http.Request, p url.Values) (any, *apiError) {
	chat, aerr := chatID(p)
	if aerr != nil {
		return nil, aerr
	}
	id, _ := strconv.Atoi(p.Get("message_id"))
	var rs []struct {
		Type  string `json:"type"`
		Emoji string `json:"emoji"`
	}
	if s := p.Get("reaction"); s != "" {
		if err := json.Unmarshal([]byte(s), &rs); err != nil {
			return nil, badRequest("can't parse reaction types JSON object")
		}
	}
	var emoji []string
	for _, r := range rs {
		if r.Type != "emoji" || !reactionEmoji[r.Emoji] {
			return nil, badRequest("REACTION_INVALID")
		}
		emoji = append(emoji, r.Emoji)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.texts[msgKey{chat, id}]; !ok {
		return nil, badRequest("message to react not found")
	}
	f.reactions = append(f.reactions, Reaction{ChatID: chat, MessageID: id, Emoji: emoji})
	f.notifyLocked()
	return true, nil
}

var secretRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

func (f *Fake) setWebhook(_ *http.Request, p url.Values) (any, *apiError) {
	u, secret := p.Get("url"), p.Get("secret_token")
	if secret != "" && !secretRe.MatchString(secret) {
		return nil, badRequest("secret token contains unallowed characters")
	}
	if u != "" {
		if pu, err := url.Parse(u); err != nil || pu.Host == "" {
			return nil, badRequest("bad webhook: invalid URL")
		}
	}
	f.mu.Lock()
	f.webhookURL, f.webhookKey = u, secret
	f.notifyLocked()
	f.mu.Unlock()
	return true, nil
}

func (f *Fake) deleteWebhook(_ *http.Request, p url.Values) (any, *apiError) {
	f.mu.Lock()
	f.webhookURL, f.webhookKey = "", ""
	if p.Get("drop_pending_updates") == "true" {
		f.updates = nil
	}
	f.notifyLocked()
	f.mu.Unlock()
	return true, nil
}

func (f *Fake) getWebhookInfo(*http.Request, url.Values) (any, *apiError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return map[string]any{"url": f.webhookURL, "has_custom_certificate": false, "pending_update_count": len(f.updates)}, nil
}

// deleteMessage deletes a message the bot sent: it joins Deleted (and
// stays in Sent, which lists what the bot sent).
func (f *Fake) deleteMessage(_ *http.Request, p url.Values) (any, *apiError) {
	chat, aerr := chatID(p)
	if aerr != nil {
		return nil, aerr
	}
	id, _ := strconv.Atoi(p.Get("message_id"))
	f.mu.Lock()
	defer f.mu.Unlock()
	key := msgKey{chat, id}
	cur, ok := f.texts[key]
	if !ok {
		return nil, badRequest("message to delete not found")
	}
	_, text, _ := strings.Cut(cur, "\x00")
	delete(f.texts, key)
	delete(f.markups, key)
	f.deleted = append(f.deleted, SentMessage{Method: "deleteMessage", ChatID: chat, MessageID: id, Text: text})
	f.notifyLocked()
	return true, nil
}

// Deleted returns the messages the bot deleted, with their last text.
func (f *Fake) Deleted() []SentMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.deleted)
}
