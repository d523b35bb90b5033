// Package chatapi is the OpenAI-compatible chat API as a channel: each
// request to POST /v1/chat/completions becomes an inbound message of the
// chat named by its user, goes through the router and the agent like a
// Telegram or Discord message, and is answered, streaming or not, with what
// the turn sends. GET /v1/models lists the agent as a model.
//
// The HTTP server (httpapi) mounts its Routes behind the bearer token and
// calls Abandon when it shuts down; this package knows no token and no
// server.
package chatapi

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/httpjson"
	"github.com/switchboard-gateway/switchboard/llm"
)

// ChannelName is the channel name of the OpenAI-compatible API, as it
// appears in Inbound.Channel, the store and the metrics.
const ChannelName = "http"

const (
	// UserHeader selects the session when the request has no "user" field.
	UserHeader = "X-Switchboard-User"
	// defaultUser is the session of requests that name no user.
	defaultUser = "api"
	// maxImageBody is the part of a request's byte limit left for images,
	// which come inline as base64 data URLs: 10 MiB carries about 7.5 MB
	// of images, a few photos (the Discord adapter downloads at most 8 MiB
	// a file).
	maxImageBody = 10 << 20
	// textBytesPerChar is the part of a request's byte limit per character
	// of channels.max_input_chars: the last message at worst-case JSON
	// escaping (6 bytes a character) and the earlier messages clients send
	// with it (the gateway keeps its own history and ignores them), about
	// 1 MiB at the default.
	textBytesPerChar = 32
	// maxUserLen bounds the user name, which becomes the chat's key.
	maxUserLen = 128
	// keepAliveEvery sends an SSE comment while a streamed turn works, so
	// proxies do not cut an idle connection.
	keepAliveEvery = 15 * time.Second
	// deliverTimeout bounds storing the message; the turn itself runs as
	// long as agent.turn_timeout allows.
	deliverTimeout = 10 * time.Second
)

// API is the OpenAI-compatible chat API as a channel: each request becomes
// an inbound message of the chat named by its user, goes through the router
// and the agent like any other, and is answered with what the turn sends.
// Register it with the router (AddChannel), run it, feed it the router's
// events (Observe), and let the HTTP server mount its Routes.
type API struct {
	modelID  string
	created  int64
	log      *slog.Logger
	shutdown func(error) bool // reports whether a Deliver error means shutting down

	mu   sync.Mutex
	sink channels.Sink
	// waiters are the requests waiting for their turns, by inbound message
	// id; a request that answers an approval question is also listed under
	// the id of the message whose turn it resumes and under resumeKey.
	waiters map[string]*waiter
	// asked is the approval question delivered to each user (chat) and not
	// answered since: only then is a bare "yes" or "no" an answer.
	asked   map[string]askedQuestion
	seq     atomic.Int64
	started chan struct{} // closed when Run first takes requests
	// maxInput caps the last user message, in characters
	// (channels.max_input_chars; SetMaxInputChars); maxBody, derived from
	// it, caps the request body before it is decoded.
	maxInput int
	maxBody  int64
	once     sync.Once
}

// New returns the API channel; agentName becomes the model id that
// /v1/models lists. isShutdown tells a Deliver error that means the router
// is shutting down (router.ErrShuttingDown) from other failures.
func New(agentName string, isShutdown func(error) bool, log *slog.Logger) *API {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if isShutdown == nil {
		isShutdown = func(error) bool { return false }
	}
	a := &API{modelID: ModelID(agentName), created: time.Now().Unix(), shutdown: isShutdown,
		log: log.With("channel", ChannelName), waiters: map[string]*waiter{}, asked: map[string]askedQuestion{},
		started: make(chan struct{})}
	a.SetMaxInputChars(channels.DefaultMaxInputChars)
	return a
}

// SetMaxInputChars sets channels.max_input_chars (call it before serving):
// a last user message longer than n characters is answered 413, and the
// body is read no further than textBytesPerChar bytes a character plus
// maxImageBody. n <= 0 keeps the default.
func (a *API) SetMaxInputChars(n int) {
	if n <= 0 {
		n = channels.DefaultMaxInputChars
	}
	a.maxInput, a.maxBody = n, int64(n)*textBytesPerChar+maxImageBody
}

// MaxBodyBytes is the largest request body read (SetMaxInputChars).
func (a *API) MaxBodyBytes() int64 { return a.maxBody }

// ModelID turns the agent's name into the model id the API lists:
// lower case, spaces as dashes.
func ModelID(agentName string) string {
	id := strings.ToLower(strings.Join(strings.Fields(agentName), "-"))
	if id == "" {
		return "switchboard"
	}
	return id
}

// Name implements channels.Channel.
func (a *API) Name() string { return ChannelName }

// RepliesInProcess implements channels.InProcessReplier: a reply goes out on
// the request's open connection, in this process.
func (a *API) RepliesInProcess() bool { return true }

// Run implements channels.Channel: requests are taken until ctx ends.
func (a *API) Run(ctx context.Context, sink channels.Sink) error {
	a.mu.Lock()
	if a.sink != nil {
		a.mu.Unlock()
		return errors.New("chatapi: Run is already running")
	}
	a.sink = sink
	a.mu.Unlock()
	a.once.Do(func() { close(a.started) })
	<-ctx.Done()
	a.mu.Lock()
	a.sink = nil
	a.mu.Unlock()
	return nil
}

// startWait bounds how long a request that comes while the gateway starts
// (the HTTP server listens a moment before the channels run) waits for the
// chat API to run, rather than being refused.
const startWait = 5 * time.Second

// startWaiters counts the requests that waited for the chat API to start
// (for the tests).
var startWaiters atomic.Int64

// awaitSink returns the sink requests go to: at once while Run runs; while
// the gateway starts, once Run first runs (up to startWait); nil when the
// chat API is not running (shutting down, or it did not start in time).
func (a *API) awaitSink(ctx context.Context) channels.Sink {
	a.mu.Lock()
	sink := a.sink
	a.mu.Unlock()
	if sink != nil {
		return sink
	}
	select {
	case <-a.started:
		return nil // it ran and stopped: shutting down
	default:
	}
	startWaiters.Add(1)
	t := time.NewTimer(startWait)
	defer t.Stop()
	select {
	case <-a.started:
	case <-t.C:
	case <-ctx.Done():
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sink
}

// Started is closed when Run first takes requests.
func (a *API) Started() <-chan struct{} { return a.started }

// Connected implements channels.Connecter: whether the API takes requests.
func (a *API) Connected() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sink != nil
}

// Send implements channels.Channel: the text goes to the request the
// message answers (the router marks the context with it). A reply whose
// request has gone (the client hung up) is kept only in the transcript.
func (a *API) Send(ctx context.Context, m channels.Outbound) (string, error) {
	id := fmt.Sprintf("http-%d", a.seq.Add(1))
	a.mu.Lock()
	var w *waiter
	if in, ok := channels.InboundOf(ctx); ok && in.Channel == ChannelName {
		w = a.waiters[waiterKey(in)]
	}
	a.mu.Unlock()
	if w == nil {
		a.log.Debug("reply for a request that is no longer waiting", "chat", m.ChatID)
		return id, nil
	}
	w.send(m.Text)
	return id, nil
}

// TurnEvent implements channels.TurnWatcher: it follows the turns of API
// requests, streaming the reply to the waiting request and answering it
// when the turn ends.
func (a *API) TurnEvent(in channels.Inbound, ev agent.Event) {
	switch ev.Kind {
	case agent.EventTurnStart, agent.EventDone, agent.EventReplyDelta, agent.EventToolStart, agent.EventToolEnd,
		agent.EventTextDelta, agent.EventInterimText, agent.EventRetry:
	default:
		return
	}
	a.mu.Lock()
	w := a.waiters[in.MessageID]
	a.mu.Unlock()
	if w == nil {
		return
	}
	switch ev.Kind {
	case agent.EventTurnStart:
		w.start()
		return
	case agent.EventReplyDelta:
		w.speculate(ev.CallID, ev.Text)
		return
	case agent.EventTextDelta:
		w.plainDelta(ev.Step, ev.Text)
		return
	case agent.EventInterimText, agent.EventRetry:
		w.interim()
		return
	case agent.EventToolStart:
		w.progressed(ev)
		return
	case agent.EventToolEnd:
		w.progressed(ev)
		w.settled(ev.CallID)
		return
	}
	a.mu.Lock()
	stopped := a.sink == nil
	a.mu.Unlock()
	if ev.StopReason == agent.StopRequiresApproval {
		w.pause(ev.Usage) // the question follows (AskApproval)
		return
	}
	if ev.StopReason == agent.StopCancelled && stopped {
		// Shutting down: the router keeps the message pending, and the
		// turn resumes after the restart.
		w.finish(ev.Usage, ev.StopReason, errShutdownMsg)
		return
	}
	w.finish(ev.Usage, ev.StopReason, ev.Err)
}

// Abandon ends every waiting request: the server is going down and their
// turns were checkpointed, to be answered after a restart. The HTTP server
// calls it when it shuts down.
func (a *API) Abandon() {
	a.mu.Lock()
	ws := make([]*waiter, 0, len(a.waiters))
	for _, w := range a.waiters {
		ws = append(ws, w)
	}
	a.mu.Unlock()
	for _, w := range ws {
		w.finish(llm.Usage{}, agent.StopCancelled, errShutdownMsg)
	}
}

const errShutdownMsg = "switchboard is shutting down; the message is stored and its turn resumes after the restart (its answer will be in this session's history)"

// waiter collects what the turn answering one request sends, and, for a
// streamed request, decides what content the stream writes (stream.go).
type waiter struct {
	mu       sync.Mutex
	texts    []string
	live     *liveText // nil unless the request streams
	started  bool      // a turn began for the request
	done     bool
	usage    llm.Usage
	stop     agent.StopReason
	errMsg   string
	notify   chan struct{} // signalled (cap 1) on every change
	finished chan struct{} // closed when done
	// question is the approval question the turn paused on (it ends the
	// request); noQuestion answers the request if it never comes.
	question   *channels.ApprovalQuestion
	noQuestion *time.Timer
	// wantProgress: the request asked for tool progress (progress.go),
	// which waits in progress for the stream.
	wantProgress bool
	progress     []Progress
}

func newWaiter(stream bool) *waiter {
	w := &waiter{notify: make(chan struct{}, 1), finished: make(chan struct{})}
	if stream {
		w.live = &liveText{}
	}
	return w
}

func (w *waiter) poke() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func (w *waiter) start() {
	w.mu.Lock()
	w.started = true
	w.mu.Unlock()
}

// send adds a reply. A reply that comes before any turn started answers a
// command (/new, /status, /help): it is the whole answer.
func (w *waiter) send(text string) {
	started, ok := w.add(text, nil)
	if !ok {
		return
	}
	if command := !started; command {
		w.finish(llm.Usage{}, agent.StopEndTurn, "")
		return
	}
	w.poke()
}

// add adds a message the turn sent (q: it is that approval question),
// reporting whether a turn had started; ok is false once the request ended.
func (w *waiter) add(text string, q *channels.ApprovalQuestion) (started, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return false, false
	}
	if q != nil {
		w.question = q
	}
	w.texts = append(w.texts, text)
	if w.live != nil {
		w.live.confirm(text)
	}
	return w.started, true
}

func (w *waiter) finish(u llm.Usage, stop agent.StopReason, errMsg string) {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return
	}
	w.done, w.usage, w.stop, w.errMsg = true, u, stop, errMsg
	if w.noQuestion != nil {
		w.noQuestion.Stop()
	}
	w.mu.Unlock()
	close(w.finished)
	w.poke()
}

// changeLive changes a streamed answer's content and wakes its stream; a
// request that does not stream, or has ended, ignores it.
func (w *waiter) changeLive(change func(*liveText)) {
	w.mu.Lock()
	if w.done || w.live == nil {
		w.mu.Unlock()
		return
	}
	change(w.live)
	w.mu.Unlock()
	w.poke()
}

// speculate adds a fragment of a send_message call's text as it streams.
func (w *waiter) speculate(callID, frag string) {
	w.changeLive(func(l *liveText) { l.speculate(callID, frag) })
}

// plainDelta adds a fragment of the model's plain text as it streams.
func (w *waiter) plainDelta(step int, frag string) {
	w.changeLive(func(l *liveText) { l.plainDelta(step, frag) })
}

// interim marks the plain text streamed so far as interim: tool calls
// came with it, or the model is asked again.
func (w *waiter) interim() { w.changeLive(func(l *liveText) { l.interim() }) }

// settled forgets a call that ran (sent or refused).
func (w *waiter) settled(callID string) {
	w.changeLive(func(l *liveText) { l.settled(callID) })
}

// takeLive returns the content pieces the stream writes next, and whether
// the turn is done (then nothing more comes).
func (w *waiter) takeLive() ([]string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.live.take(), w.done
}

// chatRequest is the part of an OpenAI chat completion request the API
// reads. Everything else (temperature, tools, ...) is accepted and ignored:
// the agent has its own model settings and tools.
type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	User string `json:"user"`
	// Progress asks a streamed answer for tool progress (progress.go).
	Progress bool `json:"switchboard_progress"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// input returns the text and images of the last user message.
func (r *chatRequest) input() (string, []channels.Attachment, error) {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		m := r.Messages[i]
		if m.Role != "user" {
			continue
		}
		var s string
		if err := json.Unmarshal(m.Content, &s); err == nil {
			return s, nil, nil
		}
		var parts []contentPart
		if err := json.Unmarshal(m.Content, &parts); err != nil {
			return "", nil, fmt.Errorf("messages[%d].content must be a string or a list of content parts", i)
		}
		var texts []string
		var atts []channels.Attachment
		for _, p := range parts {
			switch {
			case p.Type == "text":
				texts = append(texts, p.Text)
			case p.Type == "image_url" && p.ImageURL != nil:
				atts = append(atts, imageAttachment(p.ImageURL.URL))
			}
		}
		return strings.Join(texts, "\n"), atts, nil
	}
	return "", nil, errors.New("messages has no message with role \"user\"; the last one is the input")
}

// imageAttachment turns an image_url part into an attachment: data URLs
// are decoded, other URLs are described.
func imageAttachment(u string) channels.Attachment {
	att := channels.Attachment{Kind: channels.Image, Name: "image"}
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		att.Note = "(an image URL the gateway does not fetch: " + clip(u, 200) + ")"
		return att
	}
	meta, data, _ := strings.Cut(rest, ",")
	mime, enc, _ := strings.Cut(meta, ";")
	att.MIME = mime
	if enc != "base64" {
		att.Note = "(an image that was not base64-encoded)"
		return att
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil || len(b) == 0 {
		att.Note = "(an image whose data could not be decoded)"
		return att
	}
	att.Data, att.Size = b, int64(len(b))
	return att
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func newMessageID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Routes returns the API's handlers by http.ServeMux pattern, for the
// HTTP server to mount (behind its token).
func (a *API) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		"POST /v1/chat/completions": http.HandlerFunc(a.chatCompletions),
		"GET /v1/models":            http.HandlerFunc(a.models),
	}
}

func (a *API) models(w http.ResponseWriter, _ *http.Request) {
	httpjson.Write(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []map[string]any{{
			"id": a.modelID, "object": "model", "created": a.created, "owned_by": "switchboard",
		}},
	})
}

func (a *API) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, a.maxBody))
	if err := dec.Decode(&req); err != nil {
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			httpjson.Error(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large",
				fmt.Sprintf("the request body is larger than %d bytes: the last message may have at most %d characters (channels.max_input_chars), images as data URLs about %d MB; send a long text in parts",
					a.maxBody, a.maxInput, maxImageBody*3/4/1_000_000))
			return
		}
		httpjson.Error(w, http.StatusBadRequest, "invalid_request_error", "invalid_json", "the body is not a chat completion request: "+err.Error())
		return
	}
	text, atts, err := req.input()
	if err != nil {
		httpjson.Error(w, http.StatusBadRequest, "invalid_request_error", "invalid_messages", err.Error())
		return
	}
	if strings.TrimSpace(text) == "" && len(atts) == 0 {
		httpjson.Error(w, http.StatusBadRequest, "invalid_request_error", "empty_message", "the last user message is empty")
		return
	}
	if n := utf8.RuneCountInString(text); n > a.maxInput {
		httpjson.Error(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "message_too_long",
			fmt.Sprintf("the last user message is %d characters; the limit is %d (channels.max_input_chars): send it in parts", n, a.maxInput))
		return
	}
	user := strings.TrimSpace(req.User)
	if user == "" {
		user = strings.TrimSpace(r.Header.Get(UserHeader))
	}
	if user == "" {
		user = defaultUser
	}
	if len(user) > maxUserLen {
		httpjson.Error(w, http.StatusBadRequest, "invalid_request_error", "invalid_user", fmt.Sprintf("user is longer than %d bytes", maxUserLen))
		return
	}
	model := req.Model
	if model == "" {
		model = a.modelID
	}

	sink := a.awaitSink(r.Context())
	if sink == nil {
		httpjson.Error(w, http.StatusServiceUnavailable, "server_error", "not_running", "the chat API is not running (starting or shutting down); try again shortly")
		return
	}
	msgID := newMessageID()
	in := channels.Inbound{
		Channel: ChannelName, ChatID: user, ChatType: channels.DM, MessageID: msgID,
		UserID: user, DisplayName: user, Text: text, Attachments: atts, Mentioned: true, Time: time.Now(),
	}
	wt := newWaiter(req.Stream)
	wt.wantProgress = req.Progress
	keys := []string{msgID}
	if q, ok := a.takeAsked(user); ok {
		if action, ok := answerOf(q, text, atts); ok {
			// The answer to the question this client got: it waits for
			// the resumed turn, whose events name the paused request and
			// whose replies name none.
			in.Action = action
			keys = append(keys, q.origin, resumeKey(user))
		}
	}
	a.mu.Lock()
	for _, k := range keys {
		a.waiters[k] = wt
	}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		for _, k := range keys {
			if a.waiters[k] == wt {
				delete(a.waiters, k)
			}
		}
		a.mu.Unlock()
	}()
	log := a.log.With("chat", user, "message_id", msgID)

	dctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), deliverTimeout)
	err = sink.Deliver(dctx, in)
	cancel()
	switch {
	case err != nil && a.shutdown(err):
		httpjson.Error(w, http.StatusServiceUnavailable, "server_error", "shutting_down", "switchboard is shutting down; send the message again after the restart")
		return
	case err != nil:
		log.Error("could not store an API message", "err", err)
		httpjson.Error(w, http.StatusInternalServerError, "server_error", "intake_failed", "the message could not be stored; try again")
		return
	}
	log.Debug("API message accepted", "stream", req.Stream)

	c := completion{id: "chatcmpl-" + msgID, model: model, created: time.Now().Unix(), user: user, request: msgID}
	if req.Stream {
		a.stream(w, r, wt, c, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}
	select {
	case <-wt.finished:
	case <-r.Context().Done():
		log.Info("client went away before the answer; the turn goes on and its answer stays in the session")
		return
	}
	wt.mu.Lock()
	texts, usage, stop, errMsg, question := wt.texts, wt.usage, wt.stop, wt.errMsg, wt.question
	wt.mu.Unlock()
	if len(texts) == 0 && stop == agent.StopCancelled && errMsg == errShutdownMsg {
		httpjson.Error(w, http.StatusServiceUnavailable, "server_error", "shutting_down", errMsg)
		return
	}
	if code, errCode, msg, failed := turnFailure(texts, stop, question != nil); failed {
		httpjson.Error(w, code, "server_error", errCode, msg)
		return
	}
	body := map[string]any{
		"id": c.id, "object": "chat.completion", "created": c.created, "model": c.model,
		"choices": []map[string]any{{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": strings.Join(texts, "\n\n")},
			"finish_reason": finishReason(stop),
		}},
		"usage": usageJSON(usage),
	}
	if question != nil {
		body[ApprovalField] = question
	}
	a.deliverQuestion(user, msgID, question, func() bool {
		httpjson.Write(w, http.StatusOK, body)
		return flushed(w)
	})
}

// completion identifies one response.
type completion struct {
	id, model string
	created   int64
	// user and request are the chat and the message it answers.
	user, request string
}

func (c completion) chunk(delta map[string]any, finish any) map[string]any {
	return map[string]any{
		"id": c.id, "object": "chat.completion.chunk", "created": c.created, "model": c.model,
		"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}},
	}
}

// stream answers with server-sent events: a role chunk at once, content
// chunks as the turn's messages stream and are sent (liveText says which
// text goes out when), then the finish chunk, the usage chunk when asked
// for, and [DONE].
func (a *API) stream(w http.ResponseWriter, r *http.Request, wt *waiter, c completion, includeUsage bool) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	write := func(v any) bool {
		b, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write(c.chunk(map[string]any{"role": "assistant", "content": ""}, nil)) {
		return
	}
	keepAlive := time.NewTicker(keepAliveEvery)
	defer keepAlive.Stop()
	wrote := false
	for {
		pieces, done := wt.takeLive()
		for _, p := range wt.takeProgress() {
			ch := c.chunk(map[string]any{}, nil)
			ch[ProgressField] = p
			if !write(ch) {
				return
			}
		}
		for _, t := range pieces {
			wrote = true
			if !write(c.chunk(map[string]any{"content": t}, nil)) {
				return
			}
		}
		if done {
			break
		}
		select {
		case <-wt.notify:
		case <-keepAlive.C:
			if _, err := fmt.Fprint(w, ": working\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case <-r.Context().Done():
			a.log.Info("client went away before the answer; the turn goes on and its answer stays in the session")
			return
		}
	}
	wt.mu.Lock()
	texts, usage, stop, errMsg, question := wt.texts, wt.usage, wt.stop, wt.errMsg, wt.question
	wt.mu.Unlock()
	if !wrote && stop == agent.StopCancelled && errMsg == errShutdownMsg {
		write(map[string]any{"error": map[string]any{"message": errMsg, "type": "server_error", "code": "shutting_down"}})
		return
	}
	if _, errCode, msg, failed := turnFailure(texts, stop, question != nil); failed {
		write(map[string]any{"error": map[string]any{"message": msg, "type": "server_error", "code": errCode}})
		return
	}
	final := c.chunk(map[string]any{}, finishReason(stop))
	if question != nil {
		final[ApprovalField] = question
	}
	ok := false
	a.deliverQuestion(c.user, c.request, question, func() bool {
		ok = write(final)
		return ok
	})
	if !ok {
		return
	}
	if includeUsage {
		u := c.chunk(nil, nil)
		u["choices"] = []any{}
		u["usage"] = usageJSON(usage)
		if !write(u) {
			return
		}
	}
	if _, err := fmt.Fprint(w, "data: [DONE]\n\n"); err == nil {
		_ = rc.Flush()
	}
}

// turnFailure says how to answer a request whose turn ran past its time
// limit (504, with the sentence the user was told), or ended with nothing
// to say and no question (502): an error, never an empty 200.
func turnFailure(texts []string, stop agent.StopReason, asked bool) (code int, errCode, msg string, failed bool) {
	switch {
	case stop == agent.StopTurnTimeout:
		msg = "the turn ran past its time limit (agent.turn_timeout)"
		if len(texts) > 0 {
			msg = texts[len(texts)-1]
		}
		return http.StatusGatewayTimeout, "turn_timeout", msg, true
	case len(texts) == 0 && !asked && stop != agent.StopRequiresApproval && stop.Class() != agent.ClassCompleted:
		return http.StatusBadGateway, "no_reply", fmt.Sprintf("the turn ended without a reply (%s); its record is in the session's history", stop), true
	}
	return 0, "", "", false
}

// finishReason maps a stop reason to OpenAI's finish reasons.
func finishReason(stop agent.StopReason) string {
	switch stop {
	case agent.StopMaxTokensExceeded, agent.StopBudgetExceeded, agent.StopMaxSteps, agent.StopContextOverflow:
		return "length"
	}
	return "stop"
}

// usageJSON is the turn's usage as OpenAI writes one, with the prompt
// tokens served from the model's cache and the reasoning tokens in their
// details.
func usageJSON(u llm.Usage) map[string]any {
	return map[string]any{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens, "total_tokens": u.TotalTokens,
		"prompt_tokens_details":     map[string]int{"cached_tokens": u.CachedTokens},
		"completion_tokens_details": map[string]int{"reasoning_tokens": u.ReasoningTokens}}
}

var (
	_ channels.Channel          = (*API)(nil)
	_ channels.ApprovalAsker    = (*API)(nil)
	_ channels.TurnWatcher      = (*API)(nil)
	_ channels.InProcessReplier = (*API)(nil)
	_ channels.Connecter        = (*API)(nil)
)
