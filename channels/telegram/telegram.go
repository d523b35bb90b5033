// Package telegram is the Telegram adapter. It receives updates by long
// polling (or a webhook), normalises them into channels.Inbound, and sends
// the model's Markdown rendered as Telegram HTML, split to the length limit.
//
// It talks to the Bot API through tgbotapi v5.5.1, which has no
// context.Context: every call goes through a copy of the BotAPI whose HTTP
// client injects the caller's context, so cancelling a 30 s long poll takes
// effect at once. That version also predates forum topics, quotes, reply
// parameters and reactions; the adapter reads and sends those fields itself.
//
// Ask shows buttons as an inline keyboard; a press arrives as a
// callback_query update, is delivered as an Inbound with Action set, and is
// answered (answerCallbackQuery) once delivered.
package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/waitfor"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/transport"
)

const (
	name = "telegram"

	// Telegram's public Bot API server; override it for a local server or a fake.
	defaultEndpoint = "https://api.telegram.org"
	// Long-poll length: Telegram answers at once when there is news, so a
	// longer poll only means fewer idle requests. 30s stays under common
	// proxy idle timeouts.
	defaultPollTimeout = 30 * time.Second
	// The HTTP client must outlive a long poll, or every idle poll would end
	// in a client timeout instead of an empty answer.
	httpTimeoutSlack   = 15 * time.Second
	defaultMaxDownload = 10 << 20 // bigger files are described, not downloaded
	defaultTextFileMax = 64 << 10 // small text documents are inlined as Text
)

// WebhookOptions switches the adapter from long polling to a webhook.
type WebhookOptions struct {
	// URL is the public HTTPS address Telegram posts updates to. Its path is
	// the path the adapter serves.
	URL string
	// Listen is the local address to serve on, e.g. ":8443".
	Listen string
	// SecretToken is sent by Telegram in X-Telegram-Bot-Api-Secret-Token
	// and checked on every request (1-256 of A-Z a-z 0-9 _ -). A random one
	// is generated when empty.
	SecretToken string
	// Listener, if set, is served instead of listening on Listen (tests,
	// socket activation). Run closes it.
	Listener net.Listener
}

// Options configures an Adapter. Zero values get the defaults noted.
type Options struct {
	Token       string
	APIEndpoint string        // base URL of the Bot API server, default "https://api.telegram.org"
	PollTimeout time.Duration // long-poll timeout, default 30s
	HTTPClient  *http.Client  // default: a client whose timeout exceeds PollTimeout
	Logger      *slog.Logger  // default slog.Default()
	Webhook     *WebhookOptions
	// PollOnRun keeps the first long poll for Run instead of New (see
	// prefetch): among replicas another process may hold the poller role,
	// and a poll of this one would end that one's.
	PollOnRun bool
	// Sleep waits between retries; tests inject it. Default: a timer that
	// returns ctx.Err() when ctx ends first.
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxDownloadBytes caps downloads of photos, voice notes and documents,
	// default 10 MiB.
	MaxDownloadBytes int64
	// TextFileMaxBytes is the largest text document inlined as
	// Attachment.Text, default 64 KiB.
	TextFileMaxBytes int64
	// Pacing is the outbound rate limiting, default DefaultPacing
	// (Telegram's documented limits); NoPacing turns it off.
	Pacing *Pacing
	// OnPaced, if set, is told of every call pacing held back: outcome
	// "waited" (a reply) or "dropped" (a preview); for the metrics.
	OnPaced func(outcome string)
}

// Adapter is a Telegram bot. It implements channels.Channel, Typer,
// Reactor, Editor, FileSender, Asker and Drafter. Its calls to chats are
// paced to stay within Telegram's limits (see Pacing).
type Adapter struct {
	opts    Options
	bot     *tgbotapi.BotAPI // template; each call uses a copy bound to its ctx
	hc      *http.Client
	log     *slog.Logger
	sleep   func(ctx context.Context, d time.Duration) error
	fileURL string // base of file downloads, without the token
	self    tgbotapi.User
	norm    *normalizer
	pace    *pacer

	// first is the first long poll, which New starts (see prefetch); the
	// poll loop takes it. nil in webhook mode, with PollOnRun, and once
	// taken.
	first atomic.Pointer[firstPoll]

	running     atomic.Bool
	pollFailing atomic.Bool // the last getUpdates failed (see Connected)
	typingOff   atomic.Bool // the server rejected sendChatAction; stop calling it
	reactOff    atomic.Bool // the server lacks setMessageReaction
	reactLogged atomic.Bool
	draftsOff   atomic.Bool // the server lacks sendMessageDraft
}

// New starts the first long poll (see prefetch), connects to the Bot API
// (getMe) and registers the bot's commands. A failed command registration
// is logged, not fatal.
func New(ctx context.Context, o Options) (*Adapter, error) {
	if o.Token == "" {
		return nil, errors.New("telegram: token is empty")
	}
	if o.APIEndpoint == "" {
		o.APIEndpoint = defaultEndpoint
	}
	o.APIEndpoint = strings.TrimRight(o.APIEndpoint, "/")
	if o.PollTimeout <= 0 {
		o.PollTimeout = defaultPollTimeout
	}
	if o.PollTimeout < time.Second {
		o.PollTimeout = time.Second // the API counts whole seconds; 0 would busy-poll
	}
	if o.MaxDownloadBytes <= 0 {
		o.MaxDownloadBytes = defaultMaxDownload
	}
	if o.TextFileMaxBytes <= 0 {
		o.TextFileMaxBytes = defaultTextFileMax
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Sleep == nil {
		o.Sleep = waitfor.Sleep
	}
	if o.Pacing == nil {
		o.Pacing = &DefaultPacing
	}
	a := &Adapter{
		opts:    o,
		hc:      httpClient(o.HTTPClient, o.PollTimeout),
		log:     o.Logger.With("channel", name),
		sleep:   o.Sleep,
		fileURL: o.APIEndpoint + "/file/bot",
		pace:    newPacer(*o.Pacing, o.OnPaced),
	}
	// tgbotapi builds URLs with Sprintf(endpoint, token, method).
	endpoint := strings.ReplaceAll(o.APIEndpoint, "%", "%%") + "/bot%s/%s"
	var first *firstPoll
	if o.Webhook == nil && !o.PollOnRun {
		first = a.prefetch(ctx, endpoint)
	}
	bot, err := tgbotapi.NewBotAPIWithClient(o.Token, endpoint, a.client(ctx))
	if err != nil {
		if first != nil {
			first.cancel()
		}
		if e, ok := asAPIError(err); ok && e.Code == http.StatusUnauthorized {
			return nil, a.redactErr(fmt.Errorf("telegram: getMe: the bot token was rejected: %w", err))
		}
		return nil, a.redactErr(fmt.Errorf("telegram: getMe: %w", err))
	}
	a.bot, a.self = bot, bot.Self
	a.norm = &normalizer{
		botID:       bot.Self.ID,
		botName:     bot.Self.UserName,
		fetch:       a.download,
		maxDownload: o.MaxDownloadBytes,
		textMax:     o.TextFileMaxBytes,
		log:         a.log,
	}
	a.first.Store(first)
	a.setCommands(ctx)
	return a, nil
}

// Name returns "telegram".
func (a *Adapter) Name() string { return name }

// BotUsername returns the bot's @handle without the @.
func (a *Adapter) BotUsername() string { return a.self.UserName }

func httpClient(c *http.Client, poll time.Duration) *http.Client {
	want := poll + httpTimeoutSlack
	if c == nil {
		return &http.Client{Timeout: want, Transport: transport.Reusing()}
	}
	if c.Timeout < want { // also 0: no timeout at all
		cc := *c
		cc.Timeout = want
		return &cc
	}
	return c
}

// botCommands are registered with setMyCommands; the router implements them.
var botCommands = []tgbotapi.BotCommand{
	{Command: "start", Description: "Start talking to the bot"},
	{Command: "help", Description: "Show what the bot can do"},
	{Command: "new", Description: "Start a new conversation"},
	{Command: "stop", Description: "Stop the current reply"},
	{Command: "status", Description: "Show the conversation status"},
}

func (a *Adapter) setCommands(ctx context.Context) {
	cmds, _ := json.Marshal(botCommands)
	if _, err := a.call(ctx, "setMyCommands", tgbotapi.Params{"commands": string(cmds)}); err != nil {
		a.log.Warn("telegram: could not register bot commands; continuing without the command menu", "err", err)
	}
}

// ---- Bot API plumbing ----

// ctxClient binds requests to a context, scrubs the token from the URL of
// transport errors (a *url.Error prints its URL, which holds the token), and
// turns a failed answer that is not the Bot API's (a proxy's 502 page) into
// an *httpError naming the status (see checkAnswer).
type ctxClient struct {
	ctx    context.Context
	hc     *http.Client
	redact func(string) string
}

func (c ctxClient) Do(r *http.Request) (*http.Response, error) {
	resp, err := c.hc.Do(r.WithContext(c.ctx))
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = c.redact(ue.URL)
		}
		return resp, err
	}
	return checkAnswer(resp, c.redact)
}

func (a *Adapter) client(ctx context.Context) ctxClient {
	return ctxClient{ctx: ctx, hc: a.hc, redact: a.redact}
}

// api returns a BotAPI whose requests run under ctx. Copying the struct is
// cheap and keeps concurrent calls with different contexts apart.
func (a *Adapter) api(ctx context.Context) *tgbotapi.BotAPI {
	b := *a.bot
	b.Client = a.client(ctx)
	return &b
}

// call performs one Bot API request and returns its raw result.
func (a *Adapter) call(ctx context.Context, method string, p tgbotapi.Params) (json.RawMessage, error) {
	return a.callWith(a.api(ctx), method, p)
}

// callWith is call with a BotAPI bound to its context.
func (a *Adapter) callWith(b *tgbotapi.BotAPI, method string, p tgbotapi.Params) (json.RawMessage, error) {
	resp, err := b.MakeRequest(method, p)
	if err != nil {
		return nil, a.redactErr(fmt.Errorf("telegram: %s: %w", method, err))
	}
	return resp.Result, nil
}

// upload performs a multipart request with files.
func (a *Adapter) upload(ctx context.Context, method string, p tgbotapi.Params, files []tgbotapi.RequestFile) (json.RawMessage, error) {
	resp, err := a.api(ctx).UploadFiles(method, p, files)
	if err != nil {
		// UploadFiles forgets the error code; take it from the response.
		if e, ok := asAPIError(err); ok && e.Code == 0 && resp != nil {
			e.Code = resp.ErrorCode
		}
		return nil, a.redactErr(fmt.Errorf("telegram: %s: %w", method, err))
	}
	return resp.Result, nil
}

// redact removes the bot token from s.
func (a *Adapter) redact(s string) string {
	t := a.opts.Token
	if t == "" {
		return s
	}
	s = strings.ReplaceAll(s, t, "<redacted>")
	if e := url.PathEscape(t); e != t {
		s = strings.ReplaceAll(s, e, "<redacted>")
	}
	if e := url.QueryEscape(t); e != t {
		s = strings.ReplaceAll(s, e, "<redacted>")
	}
	return s
}

// redactedError keeps the chain of err (errors.Is/As still work) but prints
// a message without the token.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func (a *Adapter) redactErr(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if r := a.redact(msg); r != msg {
		return &redactedError{msg: r, err: err}
	}
	return err
}

func asAPIError(err error) (*tgbotapi.Error, bool) {
	var e *tgbotapi.Error
	ok := errors.As(err, &e)
	return e, ok
}

// chatRef is a parsed ChatID: a chat, and a forum topic within it.
type chatRef struct {
	id     int64
	thread int
}

const topicSep = ":topic:"

func parseChatID(s string) (chatRef, error) {
	idPart, threadPart, topic := strings.Cut(s, topicSep)
	id, err := strconv.ParseInt(idPart, 10, 64)
	if err != nil || id == 0 {
		return chatRef{}, fmt.Errorf("telegram: invalid chat id %q", s)
	}
	c := chatRef{id: id}
	if topic {
		if c.thread, err = strconv.Atoi(threadPart); err != nil || c.thread <= 0 {
			return chatRef{}, fmt.Errorf("telegram: invalid chat id %q", s)
		}
	}
	return c, nil
}

func (c chatRef) String() string {
	if c.thread != 0 {
		return strconv.FormatInt(c.id, 10) + topicSep + strconv.Itoa(c.thread)
	}
	return strconv.FormatInt(c.id, 10)
}

func (c chatRef) params() tgbotapi.Params {
	p := tgbotapi.Params{"chat_id": strconv.FormatInt(c.id, 10)}
	p.AddNonZero("message_thread_id", c.thread)
	return p
}

func parseMessageID(s string) (int, error) {
	id, err := strconv.Atoi(s)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("telegram: invalid message id %q", s)
	}
	return id, nil
}

// parseMessageRef parses a message of the bot's: its chat and its id.
func parseMessageRef(chatID, messageID string) (chatRef, int, error) {
	chat, err := parseChatID(chatID)
	if err != nil {
		return chatRef{}, 0, err
	}
	id, err := parseMessageID(messageID)
	return chat, id, err
}

// errTooLarge marks a file over the download cap.
var errTooLarge = errors.New("file too large")

// download fetches a file by id, refusing files over max bytes. known is
// the size from the message, 0 if unknown.
func (a *Adapter) download(ctx context.Context, fileID string, known, max int64) ([]byte, error) {
	if known > max {
		return nil, errTooLarge
	}
	raw, err := a.call(ctx, "getFile", tgbotapi.Params{"file_id": fileID})
	if err != nil {
		return nil, err
	}
	var f tgbotapi.File
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("telegram: getFile: decode: %w", err)
	}
	if int64(f.FileSize) > max {
		return nil, errTooLarge
	}
	if f.FilePath == "" {
		return nil, errors.New("telegram: getFile: no file path in answer")
	}
	req, err := http.NewRequest(http.MethodGet, a.fileURL+a.opts.Token+"/"+f.FilePath, nil)
	if err != nil {
		return nil, a.redactErr(fmt.Errorf("telegram: download: %w", err))
	}
	resp, err := a.client(ctx).Do(req)
	if err != nil {
		return nil, a.redactErr(fmt.Errorf("telegram: download: %w", err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("telegram: download: status %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, a.redactErr(fmt.Errorf("telegram: download: %w", err))
	}
	if int64(len(data)) > max {
		return nil, errTooLarge
	}
	return data, nil
}

var (
	_ channels.Channel    = (*Adapter)(nil)
	_ channels.Typer      = (*Adapter)(nil)
	_ channels.Reactor    = (*Adapter)(nil)
	_ channels.Editor     = (*Adapter)(nil)
	_ channels.FileSender = (*Adapter)(nil)
	_ channels.Asker      = (*Adapter)(nil)
	_ channels.Drafter    = (*Adapter)(nil)
	_ channels.Connecter  = (*Adapter)(nil)
)
