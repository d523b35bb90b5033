// Package discordfake is an in-process fake of the Discord REST API (v9) and
// gateway, served over HTTP and websocket on 127.0.0.1 for tests.
//
// It speaks the wire format (JSON shapes, routes, status and error codes,
// gateway opcodes and sequence numbers) rather than any SDK's types, so a
// client library is tested against what Discord sends. What it models:
//
//   - REST: GET /gateway, GET /users/@me, POST/PATCH channel messages (JSON
//     and multipart with files, the 2000-character limit, a nonce of at
//     most 25 characters with enforce_nonce: the same author's message with
//     that nonce in the past NonceWindow is returned, none created), a channel's history (GET messages with after, before
//     and limit, newest first; every MESSAGE_CREATE dispatched, queued or
//     dropped, every message the bot sent, and Post), typing, reactions, GET /channels/{id}, bulk overwrite of
//     application commands and interaction callbacks. Any route can be made to
//     fail once (429 with retry_after, 5xx), also after the change was applied.
//   - Buttons: message components are checked as Discord checks them (action
//     rows of at most 5 buttons, custom_id of 1-100 characters, unique in the
//     message) and kept with the message; ClickButton dispatches a press
//     (INTERACTION_CREATE type 3 with the message). An interaction callback is
//     accepted once per interaction (then 40060), only for interactions the
//     fake dispatched (else 10062), and type 6 only for component ones.
//   - Gateway: HELLO, IDENTIFY → READY, RESUME → replay of the events after the
//     client's seq → RESUMED, heartbeat ACK, op 7 reconnect, op 9 for an
//     unknown session or one the client closed with 1000 or 1001 (which
//     ends a session on Discord). Dispatches made while no connection is
//     live are queued and replayed on RESUME, as Discord does. Messages the
//     bot sends are echoed back as MESSAGE_CREATE, as Discord does.
//   - Sharding: an IDENTIFY may carry shard [shard_id, num_shards]; each
//     shard is its own session (own session id, seq and backlog). An event
//     of a guild goes to the sessions whose shard is
//     (guild_id >> 22) % num_shards, an event without a guild (a DM) to
//     shard 0, as on Discord; an unsharded session gets everything. An
//     invalid shard is closed with 4010.
//   - Attachments: files added with AddFile are served under /attachments/ and
//     referenced by a cdn.discordapp.com URL, so a client must route CDN
//     downloads to the fake the same way it routes REST calls.
package discordfake

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// Routes, as net/http patterns, for FailNext and Requests.
const (
	RouteGateway             = "GET /api/v9/gateway"
	RouteMe                  = "GET /api/v9/users/@me"
	RouteChannel             = "GET /api/v9/channels/{channel}"
	RouteCreateMessage       = "POST /api/v9/channels/{channel}/messages"
	RouteMessages            = "GET /api/v9/channels/{channel}/messages"
	RouteEditMessage         = "PATCH /api/v9/channels/{channel}/messages/{message}"
	RouteDeleteMessage       = "DELETE /api/v9/channels/{channel}/messages/{message}"
	RouteTyping              = "POST /api/v9/channels/{channel}/typing"
	RouteReaction            = "PUT /api/v9/channels/{channel}/messages/{message}/reactions/{emoji}/{user}"
	RouteCommands            = "PUT /api/v9/applications/{app}/commands"
	RouteInteractionCallback = "POST /api/v9/interactions/{id}/{token}/callback"
)

// Channel types as Discord numbers them.
const (
	ChannelTypeGuildText    = 0
	ChannelTypeDM           = 1
	ChannelTypePublicThread = 11
)

// MaxContent is Discord's limit on message content, in characters.
const MaxContent = 2000

// maxNonce is Discord's limit on a message nonce, in characters.
const maxNonce = 25

// CDNBase is where attachment URLs point, as on Discord. Clients under test
// rewrite this host to the fake.
const CDNBase = "https://cdn.discordapp.com"

// Fake is a fake Discord. Create it with New; it stops when the test ends.
type Fake struct {
	// URL is the server's base, e.g. http://127.0.0.1:41234.
	URL string
	// Token is the bot token the fake accepts (without "Bot ").
	Token string
	// Bot is the bot's user; AppID its application id.
	Bot   User
	AppID string
	// HeartbeatInterval is announced in HELLO; change it before a client
	// connects.
	HeartbeatInterval time.Duration
	// EchoSent makes messages the bot posts come back as MESSAGE_CREATE
	// dispatches, as on Discord (default true).
	EchoSent bool
	// NonceWindow is how long a nonce sent with enforce_nonce is
	// remembered: Discord checks it "for uniqueness in the past few
	// minutes" (default 5 minutes). Change it before the sends.
	NonceWindow time.Duration

	srv *httptest.Server
	mux *http.ServeMux

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced whenever recorded state changes
	idNext   int64
	failures map[string][]failure
	requests map[string]int
	sent     []Sent
	edits    []Edit
	deleted  []Edit // the messages the bot deleted, with their last content
	typing   []string
	reacts   []Reaction
	commands []Command
	cbs      []InteractionResponse
	issued   map[string]*issued // interaction id → what the callback route accepts
	channels map[string]channelInfo
	users    map[string]User
	files    map[string]File
	history  map[string][]Message // channel id → its messages, oldest first

	// gateway
	conns      map[*gwConn]struct{} // every open websocket
	sessions   map[string]*session  // session id → session, one per shard
	current    *session             // the last session identified
	nsessions  int
	identifies []Identify
	resumes    []Resume
}

// Sent is a message the bot posted.
type Sent struct {
	ID              string
	ChannelID       string
	Content         string // as it is now (edits change it)
	Posted          string // the content as posted, before any edit
	Nonce           string
	Reference       *MessageReference
	AllowedMentions json.RawMessage
	Files           []File
	Components      []Component // action rows, as posted

	at time.Time // when it was created, for enforce_nonce
}

// Buttons returns the buttons of the message, row by row.
func (s Sent) Buttons() [][]Component {
	var rows [][]Component
	for _, r := range s.Components {
		rows = append(rows, r.Components)
	}
	return rows
}

// issued is an interaction the fake dispatched, for its callback.
type issued struct {
	token     string
	component bool // a message component interaction (type 3)
	answered  bool
}

// File is an uploaded or served file.
type File struct {
	Name        string
	ContentType string
	Data        []byte
}

// Edit is a PATCH of a message's content.
type Edit struct{ ChannelID, MessageID, Content string }

// Reaction is a reaction the bot added.
type Reaction struct{ ChannelID, MessageID, Emoji string }

// Command is a registered application command.
type Command struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Type        int    `json:"type,omitempty"`
}

// InteractionResponse is a callback the bot made for an interaction. Type
// 4 is a message (Content, Flags), 6 a deferred update of the message the
// pressed component is on.
type InteractionResponse struct {
	InteractionID string
	Token         string
	Type          int
	Content       string
	Flags         int
}

// Identify is a recorded op 2.
type Identify struct {
	Token    string
	Intents  int
	Compress bool
	// Shard is the IDENTIFY's shard array [shard_id, num_shards]; nil when
	// it had none (unsharded: one session gets every event).
	Shard *[2]int
	// SessionID is the session the READY started.
	SessionID string
}

// Resume is a recorded op 6.
type Resume struct {
	Token     string
	SessionID string
	Seq       int64
}

type channelInfo struct {
	Type     int
	GuildID  string
	ParentID string
}

type failure struct {
	status      int
	body        string
	afterCommit bool
}

// New starts a fake on 127.0.0.1 and stops it when the test ends.
func New(t testing.TB) *Fake {
	f := Start()
	t.Cleanup(f.Close)
	return f
}

// Start starts a fake like New for programs outside tests (benchmarks,
// demos); call Close when done.
func Start() *Fake {
	f := &Fake{
		Token:             "fake-bot-token.XYZ-secret-0123456789",
		Bot:               User{ID: "111111111111111111", Username: "switchboard", Bot: true},
		AppID:             "111111111111111111",
		HeartbeatInterval: 41250 * time.Millisecond,
		EchoSent:          true,
		NonceWindow:       5 * time.Minute,
		changed:           make(chan struct{}),
		idNext:            (time.Now().UnixMilli() - 1420070400000) << 22,
		failures:          map[string][]failure{},
		requests:          map[string]int{},
		channels:          map[string]channelInfo{},
		users:             map[string]User{},
		files:             map[string]File{},
		history:           map[string][]Message{},
		issued:            map[string]*issued{},
		conns:             map[*gwConn]struct{}{},
		sessions:          map[string]*session{},
	}
	f.users[f.Bot.ID] = f.Bot
	f.mux = http.NewServeMux()
	f.route(RouteGateway, false, f.handleGateway)
	f.route(RouteMe, true, f.handleMe)
	f.route(RouteChannel, true, f.handleChannel)
	f.route(RouteCreateMessage, true, f.handleCreateMessage)
	f.route(RouteMessages, true, f.handleMessages)
	f.route(RouteEditMessage, true, f.handleEditMessage)
	f.route(RouteDeleteMessage, true, f.handleDeleteMessage)
	f.route(RouteTyping, true, f.handleTyping)
	f.route(RouteReaction, true, f.handleReaction)
	f.route(RouteCommands, true, f.handleCommands)
	f.route(RouteInteractionCallback, false, f.handleCallback)
	f.mux.HandleFunc("GET /attachments/{path...}", f.handleAttachment)
	f.mux.HandleFunc("GET /gw/", f.handleWebsocket)
	f.srv = httptest.NewServer(f.mux)
	f.URL = f.srv.URL
	return f
}

// Close stops the fake and drops its gateway connections.
func (f *Fake) Close() { f.close() }

// APIBase is the REST base, URL + "/api/v9".
func (f *Fake) APIBase() string { return f.URL + "/api/v9" }

// GatewayURL is the websocket URL /gateway returns.
func (f *Fake) GatewayURL() string { return "ws" + strings.TrimPrefix(f.URL, "http") + "/gw/" }

func (f *Fake) close() {
	f.mu.Lock()
	for c := range f.conns {
		c.ws.Close()
	}
	for _, ss := range f.sessions {
		ss.live = nil
	}
	f.mu.Unlock()
	f.srv.Close()
}

// notify wakes waiters; f.mu must be held.
func (f *Fake) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// WaitFor blocks until cond returns true or ctx ends. cond may call the
// fake's accessors; it is re-evaluated whenever recorded state changes.
func (f *Fake) WaitFor(ctx context.Context, cond func() bool) error {
	for {
		f.mu.Lock()
		ch := f.changed
		f.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("discordfake: wait: %w", context.Cause(ctx))
		}
	}
}

// NewID returns a fresh snowflake.
func (f *Fake) NewID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.newIDLocked()
}

func (f *Fake) newIDLocked() string {
	f.idNext++
	return strconv.FormatInt(f.idNext, 10)
}

// AddChannel registers a channel for GET /channels/{id}; its name is
// "channel-<id>". Use the ChannelType constants.
func (f *Fake) AddChannel(id string, typ int, guildID, parentID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.channels[id] = channelInfo{Type: typ, GuildID: guildID, ParentID: parentID}
}

// AddUser makes a user known so that <@id> in MessageCreate content is
// listed in the message's mentions. Authors are added automatically.
func (f *Fake) AddUser(u User) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.users[u.ID] = u
}

// AddFile stores a file and returns an attachment that points at it through
// CDNBase.
func (f *Fake) AddFile(name, contentType string, data []byte) Attachment {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.newIDLocked()
	path := "attachments/" + id + "/" + name
	f.files[path] = File{Name: name, ContentType: contentType, Data: slices.Clone(data)}
	return Attachment{
		ID: id, Filename: name, ContentType: contentType, Size: len(data),
		URL: CDNBase + "/" + path, ProxyURL: CDNBase + "/" + path,
	}
}

// FailNext makes the next request to route answer status with body (a JSON
// error such as RateLimitBody or ErrorBody) without applying it.
func (f *Fake) FailNext(route string, status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[route] = append(f.failures[route], failure{status: status, body: body})
}

// FailNextAfterCommit makes the next request to route be applied (a message
// is recorded) and then answer status with body, as when Discord stored a
// message but the response was lost.
func (f *Fake) FailNextAfterCommit(route string, status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[route] = append(f.failures[route], failure{status: status, body: body, afterCommit: true})
}

// RateLimitBody is a 429 body with retry_after in float seconds.
func RateLimitBody(retryAfter float64, global bool) string {
	b, _ := json.Marshal(map[string]any{"message": "You are being rate limited.", "retry_after": retryAfter, "global": global})
	return string(b)
}

// ErrorBody is a Discord JSON error body.
func ErrorBody(code int, message string) string {
	b, _ := json.Marshal(map[string]any{"code": code, "message": message})
	return string(b)
}

// Requests counts the requests route received, failed ones included.
func (f *Fake) Requests(route string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[route]
}

// Sent returns every message the bot posted, in order.
func (f *Fake) Sent() []Sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sent)
}

// SentTo returns the messages the bot posted to one channel.
func (f *Fake) SentTo(channelID string) []Sent {
	var out []Sent
	for _, s := range f.Sent() {
		if s.ChannelID == channelID {
			out = append(out, s)
		}
	}
	return out
}

// WaitSent waits until at least n messages were posted in total.
func (f *Fake) WaitSent(ctx context.Context, n int) ([]Sent, error) {
	err := f.WaitFor(ctx, func() bool { return len(f.Sent()) >= n })
	return f.Sent(), err
}

// Edits returns the message edits, in order.
func (f *Fake) Edits() []Edit {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.edits)
}

// Typing returns the channel ids typing was triggered in, in order.
func (f *Fake) Typing() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.typing)
}

// Reactions returns the reactions added, in order.
func (f *Fake) Reactions() []Reaction {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reacts)
}

// Commands returns the application commands of the last bulk overwrite.
func (f *Fake) Commands() []Command {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.commands)
}

// InteractionResponses returns the interaction callbacks, in order.
func (f *Fake) InteractionResponses() []InteractionResponse {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.cbs)
}

// route registers a REST handler with request counting, failure injection
// and, if auth, a check of the bot token.
func (f *Fake) route(pattern string, auth bool, h http.HandlerFunc) {
	f.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests[pattern]++
		var fail *failure
		if q := f.failures[pattern]; len(q) > 0 {
			fail = &q[0]
			f.failures[pattern] = q[1:]
		}
		f.notify()
		f.mu.Unlock()

		if auth && r.Header.Get("Authorization") != "Bot "+f.Token {
			writeJSON(w, http.StatusUnauthorized, json.RawMessage(ErrorBody(0, "401: Unauthorized")))
			return
		}
		if fail != nil {
			if fail.afterCommit {
				h(httptest.NewRecorder(), r)
			}
			writeJSON(w, fail.status, json.RawMessage(fail.body))
			return
		}
		h(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *Fake) handleGateway(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"url": f.GatewayURL()})
}

func (f *Fake) handleMe(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, f.Bot)
}

func (f *Fake) handleChannel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("channel")
	f.mu.Lock()
	c, ok := f.channels[id]
	f.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, json.RawMessage(ErrorBody(10003, "Unknown Channel")))
		return
	}
	out := map[string]any{"id": id, "type": c.Type, "name": "channel-" + id}
	if c.GuildID != "" {
		out["guild_id"] = c.GuildID
	}
	if c.ParentID != "" {
		out["parent_id"] = c.ParentID
	}
	writeJSON(w, http.StatusOK, out)
}

// createMessage is the body of POST /channels/{id}/messages.
type createMessage struct {
	Content         string            `json:"content"`
	Nonce           json.RawMessage   `json:"nonce"`
	EnforceNonce    bool              `json:"enforce_nonce"`
	Reference       *MessageReference `json:"message_reference"`
	AllowedMentions json.RawMessage   `json:"allowed_mentions"`
	Components      []Component       `json:"components"`
}

func (f *Fake) handleCreateMessage(w http.ResponseWriter, r *http.Request) {
	channelID := r.PathValue("channel")
	var body createMessage
	var files []File
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "multipart/form-data" {
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				writeJSON(w, http.StatusBadRequest, json.RawMessage(ErrorBody(50035, "Invalid Form Body")))
				return
			}
			data, _ := io.ReadAll(p)
			if p.FormName() == "payload_json" {
				if err := json.Unmarshal(data, &body); err != nil {
					writeJSON(w, http.StatusBadRequest, json.RawMessage(ErrorBody(50109, "The request body contains invalid JSON.")))
					return
				}
				continue
			}
			files = append(files, File{Name: p.FileName(), ContentType: p.Header.Get("Content-Type"), Data: data})
		}
	} else if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, json.RawMessage(ErrorBody(50109, "The request body contains invalid JSON.")))
		return
	}
	if n := utf8.RuneCountInString(body.Content); n > MaxContent {
		writeJSON(w, http.StatusBadRequest, map[string]any{
			"code": 50035, "message": "Invalid Form Body",
			"errors": map[string]any{"content": map[string]any{"_errors": []map[string]string{{
				"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}}}},
		})
		return
	}
	if msg := checkComponents(body.Components); msg != "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{
			"code": 50035, "message": "Invalid Form Body",
			"errors": map[string]any{"components": map[string]any{"_errors": []map[string]string{{
				"code": "COMPONENT_INVALID", "message": msg}}}},
		})
		return
	}
	if strings.TrimSpace(body.Content) == "" && len(files) == 0 && len(body.Components) == 0 {
		writeJSON(w, http.StatusBadRequest, json.RawMessage(ErrorBody(50006, "Cannot send an empty message")))
		return
	}
	nonce := strings.Trim(string(body.Nonce), `"`)
	if utf8.RuneCountInString(nonce) > maxNonce {
		writeJSON(w, http.StatusBadRequest, map[string]any{
			"code": 50035, "message": "Invalid Form Body",
			"errors": map[string]any{"nonce": map[string]any{"_errors": []map[string]string{{
				"code": "BASE_TYPE_BAD_LENGTH", "message": "Must be between 1 and 25 in length."}}}},
		})
		return
	}

	f.mu.Lock()
	// enforce_nonce, as documented: "If true and nonce is present, it will
	// be checked for uniqueness in the past few minutes. If another message
	// was created by the same author with the same nonce, that message will
	// be returned and no new message will be created." Every message in
	// sent has the bot as its author, whatever its channel.
	if body.EnforceNonce && nonce != "" {
		for _, s := range f.sent {
			if s.Nonce == nonce && time.Since(s.at) <= f.NonceWindow {
				msg := f.botMessageLocked(s)
				f.mu.Unlock()
				writeJSON(w, http.StatusOK, msg)
				return
			}
		}
	}
	s := Sent{
		ID: f.newIDLocked(), ChannelID: channelID, Content: body.Content, Posted: body.Content, Nonce: nonce,
		Reference: body.Reference, AllowedMentions: body.AllowedMentions, Files: files, Components: body.Components,
		at: time.Now(),
	}
	f.sent = append(f.sent, s)
	msg := f.botMessageLocked(s)
	f.recordLocked(msg)
	f.notify()
	f.mu.Unlock()

	writeJSON(w, http.StatusOK, msg)
	if f.EchoSent {
		f.Dispatch("MESSAGE_CREATE", msg)
	}
}

// botMessageLocked is the sent message as Discord would dispatch it.
func (f *Fake) botMessageLocked(s Sent) Message {
	m := Message{
		ID: s.ID, ChannelID: s.ChannelID, GuildID: f.channels[s.ChannelID].GuildID,
		Author: f.Bot, Content: s.Content, Timestamp: snowflakeTime(s.ID),
		Mentions: []User{}, Attachments: []Attachment{}, MessageReference: s.Reference, Components: s.Components,
	}
	if s.Reference != nil {
		m.Type = 19
	}
	for _, file := range s.Files {
		m.Attachments = append(m.Attachments, Attachment{ID: s.ID, Filename: file.Name, ContentType: file.ContentType, Size: len(file.Data)})
	}
	return m
}

// BotMessage returns a message the bot sent, as Discord would show it (for
// ReplyTo).
func (f *Fake) BotMessage(s Sent) Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.botMessageLocked(s)
}

func (f *Fake) handleEditMessage(w http.ResponseWriter, r *http.Request) {
	channelID, messageID := r.PathValue("channel"), r.PathValue("message")
	var body struct {
		Content *string `json:"content"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, json.RawMessage(ErrorBody(50109, "The request body contains invalid JSON.")))
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.IndexFunc(f.sent, func(s Sent) bool { return s.ChannelID == channelID && s.ID == messageID })
	if i < 0 {
		writeJSON(w, http.StatusNotFound, json.RawMessage(ErrorBody(10008, "Unknown Message")))
		return
	}
	if body.Content != nil {
		if utf8.RuneCountInString(*body.Content) > MaxContent {
			writeJSON(w, http.StatusBadRequest, json.RawMessage(ErrorBody(50035, "Invalid Form Body")))
			return
		}
		f.sent[i].Content = *body.Content
		f.edits = append(f.edits, Edit{ChannelID: channelID, MessageID: messageID, Content: *body.Content})
		f.notify()
	}
	writeJSON(w, http.StatusOK, f.botMessageLocked(f.sent[i]))
}

// handleDeleteMessage deletes a message the bot sent: it joins Deleted
// (and stays in Sent, which lists what the bot posted).
func (f *Fake) handleDeleteMessage(w http.ResponseWriter, r *http.Request) {
	channelID, messageID := r.PathValue("channel"), r.PathValue("message")
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.IndexFunc(f.sent, func(s Sent) bool { return s.ChannelID == channelID && s.ID == messageID })
	gone := slices.ContainsFunc(f.deleted, func(e Edit) bool { return e.ChannelID == channelID && e.MessageID == messageID })
	if i < 0 || gone {
		writeJSON(w, http.StatusNotFound, json.RawMessage(ErrorBody(10008, "Unknown Message")))
		return
	}
	f.deleted = append(f.deleted, Edit{ChannelID: channelID, MessageID: messageID, Content: f.sent[i].Content})
	f.notify()
	w.WriteHeader(http.StatusNoContent)
}

// Deleted returns the messages the bot deleted, with their last content.
func (f *Fake) Deleted() []Edit {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.deleted)
}

func (f *Fake) handleTyping(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.typing = append(f.typing, r.PathValue("channel"))
	f.notify()
	f.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (f *Fake) handleReaction(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("user") != "@me" {
		writeJSON(w, http.StatusNotFound, json.RawMessage(ErrorBody(0, "404: Not Found")))
		return
	}
	f.mu.Lock()
	f.reacts = append(f.reacts, Reaction{ChannelID: r.PathValue("channel"), MessageID: r.PathValue("message"), Emoji: r.PathValue("emoji")})
	f.notify()
	f.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (f *Fake) handleCommands(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("app") != f.AppID {
		writeJSON(w, http.StatusForbidden, json.RawMessage(ErrorBody(50001, "Missing Access")))
		return
	}
	var cmds []Command
	if err := json.NewDecoder(r.Body).Decode(&cmds); err != nil {
		writeJSON(w, http.StatusBadRequest, json.RawMessage(ErrorBody(50109, "The request body contains invalid JSON.")))
		return
	}
	out := make([]map[string]any, 0, len(cmds))
	f.mu.Lock()
	f.commands = cmds
	for _, c := range cmds {
		out = append(out, map[string]any{"id": f.newIDLocked(), "application_id": f.AppID, "name": c.Name, "description": c.Description, "type": max(c.Type, 1), "version": "1"})
	}
	f.notify()
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (f *Fake) handleCallback(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Type int `json:"type"`
		Data *struct {
			Content string `json:"content"`
			Flags   int    `json:"flags"`
		} `json:"data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, json.RawMessage(ErrorBody(50109, "The request body contains invalid JSON.")))
		return
	}
	ir := InteractionResponse{InteractionID: r.PathValue("id"), Token: r.PathValue("token"), Type: body.Type}
	if body.Data != nil {
		ir.Content, ir.Flags = body.Data.Content, body.Data.Flags
	}
	f.mu.Lock()
	is, ok := f.issued[ir.InteractionID]
	switch {
	case !ok || is.token != ir.Token:
		f.mu.Unlock()
		writeJSON(w, http.StatusNotFound, json.RawMessage(ErrorBody(10062, "Unknown interaction")))
		return
	case is.answered:
		f.mu.Unlock()
		writeJSON(w, http.StatusBadRequest, json.RawMessage(ErrorBody(40060, "Interaction has already been acknowledged.")))
		return
	case (ir.Type == 6 || ir.Type == 7) && !is.component, ir.Type != 4 && ir.Type != 5 && ir.Type != 6 && ir.Type != 7:
		f.mu.Unlock()
		writeJSON(w, http.StatusBadRequest, json.RawMessage(ErrorBody(50035, "Invalid Form Body: interaction response type invalid")))
		return
	}
	is.answered = true
	f.cbs = append(f.cbs, ir)
	f.notify()
	f.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// issue makes an interaction answerable through the callback route.
func (f *Fake) issue(in Interaction) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.issued[in.ID] = &issued{token: in.Token, component: in.Type == 3}
}

// checkComponents validates a message's components as Discord does for
// buttons, and returns what is wrong, or "".
func checkComponents(rows []Component) string {
	if len(rows) > 5 {
		return "Must be 5 or fewer in length."
	}
	ids := map[string]bool{}
	for _, row := range rows {
		if row.Type != ComponentActionRow || len(row.Components) == 0 || len(row.Components) > 5 {
			return "Top-level components must be action rows of 1 to 5 components."
		}
		for _, b := range row.Components {
			if b.Type != ComponentButton {
				return "The component type is not supported here."
			}
			if utf8.RuneCountInString(b.Label) > 80 {
				return "Button label must be 80 or fewer in length."
			}
			if b.Style == ButtonLink {
				if b.URL == "" || b.CustomID != "" {
					return "A link button needs a url and no custom_id."
				}
				continue
			}
			if b.Style < ButtonPrimary || b.Style > ButtonDanger {
				return "Invalid button style."
			}
			if n := utf8.RuneCountInString(b.CustomID); n < 1 || n > 100 {
				return "custom_id must be between 1 and 100 in length."
			}
			if ids[b.CustomID] {
				return "Component custom id cannot be duplicated."
			}
			ids[b.CustomID] = true
		}
	}
	return ""
}

func (f *Fake) handleAttachment(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	file, ok := f.files["attachments/"+r.PathValue("path")]
	f.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", file.ContentType)
	http.ServeContent(w, r, file.Name, time.Time{}, bytes.NewReader(file.Data))
}

var mentionRE = regexp.MustCompile(`<@!?([\w-]+)>`)

// snowflakeTime is the RFC 3339 time encoded in a snowflake.
func snowflakeTime(id string) string {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return time.Now().UTC().Format(time.RFC3339Nano)
	}
	return time.UnixMilli(n>>22 + 1420070400000).UTC().Format(time.RFC3339Nano)
}

// Post puts m in its channel's history without dispatching it: a message
// posted while the bot had no gateway session, which only REST shows.
func (f *Fake) Post(m Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recordLocked(m)
	f.notify()
}

// recordLocked adds m to its channel's history once, in id order; f.mu
// must be held.
func (f *Fake) recordLocked(m Message) {
	h := f.history[m.ChannelID]
	i, found := slices.BinarySearchFunc(h, m.ID, func(x Message, id string) int { return compareIDs(x.ID, id) })
	if !found {
		f.history[m.ChannelID] = slices.Insert(h, i, m)
	}
}

// handleMessages serves a channel's history as Discord does: at most limit
// (1 to 100, default 50) messages, newest first; with after, the oldest
// ones after it, else the newest (before before, if given). Like Discord's
// REST message objects, they carry no guild_id and no member.
func (f *Fake) handleMessages(w http.ResponseWriter, r *http.Request) {
	channelID := r.PathValue("channel")
	q := r.URL.Query()
	limit := 50
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			writeJSON(w, http.StatusBadRequest, json.RawMessage(ErrorBody(50035, "Invalid Form Body: limit")))
			return
		}
		limit = n
	}
	after, before := q.Get("after"), q.Get("before")
	f.mu.Lock()
	_, known := f.channels[channelID]
	h := slices.Clone(f.history[channelID])
	f.mu.Unlock()
	if !known && len(h) == 0 {
		writeJSON(w, http.StatusNotFound, json.RawMessage(ErrorBody(10003, "Unknown Channel")))
		return
	}
	h = slices.DeleteFunc(h, func(m Message) bool {
		return (after != "" && compareIDs(m.ID, after) <= 0) || (before != "" && compareIDs(m.ID, before) >= 0)
	})
	if len(h) > limit {
		if after != "" && before == "" {
			h = h[:limit]
		} else {
			h = h[len(h)-limit:]
		}
	}
	slices.Reverse(h)
	for i := range h {
		h[i].GuildID, h[i].Member = "", nil
	}
	writeJSON(w, http.StatusOK, h)
}

// compareIDs orders snowflakes as numbers.
func compareIDs(x, y string) int {
	if len(x) != len(y) {
		return len(x) - len(y)
	}
	return strings.Compare(x, y)
}
