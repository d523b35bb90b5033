package telegram

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/switchboard-gateway/switchboard/channels"
)

const (
	pollLimit        = 100
	maxPollBackoff   = 60 * time.Second
	confirmTimeout   = time.Second // final offset confirmation at shutdown
	shutdownTimeout  = 5 * time.Second
	maxWebhookBody   = 1 << 20
	secretHeader     = "X-Telegram-Bot-Api-Secret-Token"
	webhookRetryWait = 5 * time.Second
	// answerTimeout bounds answerCallbackQuery, which holds up the next
	// update; Telegram forgets an unanswered press after about 15 s anyway.
	answerTimeout = 5 * time.Second
)

// allowedUpdates asks Telegram only for what the adapter handles:
// callback_query carries the presses of the buttons Ask shows.
var allowedUpdates = `["message","edited_message","callback_query"]`

// Run receives updates until ctx ends, by long polling or, with
// Options.Webhook, by serving a webhook. Each update is handed to sink and
// confirmed to Telegram only after Deliver returned nil. Run returns nil
// when ctx ends and an error when it cannot go on (the token was revoked,
// the webhook can't be served).
func (a *Adapter) Run(ctx context.Context, sink channels.Sink) error {
	if !a.running.CompareAndSwap(false, true) {
		return errors.New("telegram: Run is already running")
	}
	defer a.running.Store(false)
	if a.opts.Webhook != nil {
		return a.serveWebhook(ctx, sink)
	}
	return a.poll(ctx, sink)
}

// backoff is a capped exponential delay.
type backoff struct {
	next, max time.Duration
}

func newBackoff(max time.Duration) backoff { return backoff{next: time.Second, max: max} }

func (b *backoff) step() time.Duration {
	d := b.next
	b.next = min(b.next*2, b.max)
	return d
}

func (b *backoff) reset() { b.next = time.Second }

// polled is the answer to one getUpdates.
type polled struct {
	raws []json.RawMessage
	err  error
}

// firstPoll is the long poll New started.
type firstPoll struct {
	answer chan polled // buffered: the poll never waits for its taker
	cancel context.CancelFunc
}

// prefetch starts the first long poll (offset 0: every update Telegram
// still holds) under ctx, with getMe rather than after it, for the poll
// loop to take: the poll is out while getMe answers, the gateway's store
// opens and its router starts. Nothing is confirmed or lost by it: an
// update counts as received only when a later poll's offset passes it,
// after Deliver. endpoint is the BotAPI's (New's).
func (a *Adapter) prefetch(ctx context.Context, endpoint string) *firstPoll {
	pctx, cancel := context.WithCancel(ctx)
	f := &firstPoll{answer: make(chan polled, 1), cancel: cancel}
	b := &tgbotapi.BotAPI{Token: a.opts.Token, Client: a.client(pctx), Buffer: 100}
	b.SetAPIEndpoint(endpoint)
	go func() {
		raws, err := a.getUpdatesWith(b, 0)
		f.answer <- polled{raws, err}
	}()
	return f
}

// nextPoll is the answer of the prefetched first poll if it is not taken
// yet, or of a new getUpdates from offset.
func (a *Adapter) nextPoll(ctx context.Context, offset int) ([]json.RawMessage, error) {
	if f := a.first.Swap(nil); f != nil {
		defer f.cancel()
		select {
		case p := <-f.answer:
			return p.raws, p.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return a.getUpdates(ctx, offset)
}

// webhookSet reports whether err is Telegram's refusal to poll while a
// webhook is set.
func webhookSet(err error) bool {
	e, ok := asAPIError(err)
	return ok && e.Code == http.StatusConflict && strings.Contains(e.Message, "webhook is active")
}

// poll is the long-poll loop. offset is the first update not yet handed to
// the sink; Telegram forgets everything below the offset of a getUpdates
// call, so an update is confirmed only by the poll after its delivery.
// A webhook left set (by another program, or this bot's webhook mode)
// makes getUpdates fail with a conflict: the loop deletes it once and
// polls again at once.
func (a *Adapter) poll(ctx context.Context, sink channels.Sink) error {
	var (
		offset, confirmed int
		pollErrs          = newBackoff(maxPollBackoff)
		deliverErrs       = newBackoff(maxPollBackoff)
		webhookDeleted    bool
	)
	defer func() { a.confirm(ctx, offset, confirmed) }()
	for ctx.Err() == nil {
		raws, err := a.nextPoll(ctx, offset)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !webhookDeleted && webhookSet(err) {
				webhookDeleted = true
				a.log.Info("telegram: a webhook is set; deleting it to poll")
				if _, err := a.call(ctx, "deleteWebhook", nil); err != nil && ctx.Err() == nil {
					a.log.Warn("telegram: deleteWebhook failed; getUpdates fails while a webhook is set", "err", err)
				}
				continue
			}
			a.pollFailing.Store(true)
			e, api := asAPIError(err)
			if api && e.Code == http.StatusUnauthorized {
				return fmt.Errorf("telegram: getUpdates: the bot token was rejected: %w", err)
			}
			wait := pollErrs.step()
			if api && e.RetryAfter > 0 {
				wait = time.Duration(e.RetryAfter) * time.Second
			}
			if api && e.Code == http.StatusConflict {
				a.log.Error("telegram: getUpdates conflict: another process polls with this token, or a webhook is set; retrying",
					"wait", wait, "err", err)
			} else {
				a.log.Warn("telegram: getUpdates failed, retrying", "wait", wait, "err", err)
			}
			if a.sleep(ctx, wait) != nil {
				return nil
			}
			continue
		}
		pollErrs.reset()
		a.pollFailing.Store(false)
		confirmed = offset // this poll confirmed everything below offset
		before := offset
		next, failedID, err := a.deliverBatch(ctx, sink, raws, offset)
		offset = next // the deferred confirm tells Telegram, even at shutdown
		if ctx.Err() != nil {
			return nil
		}
		failed := err != nil
		if failed {
			wait := deliverErrs.step()
			a.log.Error("telegram: delivery failed; the update will be delivered again", "update_id", failedID, "wait", wait, "err", err)
			if a.sleep(ctx, wait) != nil {
				return nil
			}
		}
		if !failed {
			deliverErrs.reset()
		}
		if !failed && len(raws) > 0 && offset == before {
			// Only unreadable updates: Telegram will send them again at
			// once, so don't spin.
			if a.sleep(ctx, pollErrs.step()) != nil {
				return nil
			}
		}
	}
	return nil
}

// deliverBatch hands one poll's updates to sink: the updates of one chat in
// order, different chats at the same time, so that one chat's slow store
// write does not hold up the others. It returns the offset to poll from
// next: past every update when all were delivered, else the lowest update
// that failed (and, on an error, its id). Updates after a failure that were
// delivered anyway come again with that poll and are dropped as duplicates
// by the sink's idempotent intake.
func (a *Adapter) deliverBatch(ctx context.Context, sink channels.Sink, raws []json.RawMessage, offset int) (next, failedID int, err error) {
	type update struct {
		id  int
		raw json.RawMessage
	}
	var order []string
	groups := map[string][]update{}
	next = offset
	for _, raw := range raws {
		id, ok := updateID(raw)
		if !ok {
			a.log.Error("telegram: skipping an update without a readable update_id", "bytes", len(raw))
			continue
		}
		if id < offset {
			continue // already delivered (a server that ignores offset)
		}
		key := updateChat(raw)
		if _, seen := groups[key]; !seen {
			order = append(order, key)
		}
		groups[key] = append(groups[key], update{id, raw})
		next = max(next, id+1)
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	failedID = -1
	for _, key := range order {
		wg.Go(func() {
			for _, u := range groups[key] {
				if herr := a.handle(ctx, sink, u.raw); herr != nil {
					mu.Lock()
					defer mu.Unlock()
					if failedID < 0 || u.id < failedID {
						failedID = u.id
					}
					errs = append(errs, herr)
					return // this chat's later updates wait for the retry, in order
				}
			}
		})
	}
	wg.Wait()
	if failedID >= 0 {
		return failedID, failedID, errors.Join(errs...)
	}
	return next, 0, nil
}

// updateChat is the chat an update belongs to, for ordering deliveries;
// updates it cannot place share the key "".
func updateChat(raw json.RawMessage) string {
	type withChat struct {
		Chat struct {
			ID json.Number `json:"id"`
		} `json:"chat"`
	}
	var u struct {
		Message       *withChat `json:"message"`
		EditedMessage *withChat `json:"edited_message"`
		Callback      *struct {
			Message *withChat `json:"message"`
		} `json:"callback_query"`
	}
	if json.Unmarshal(raw, &u) != nil {
		return ""
	}
	switch {
	case u.Message != nil:
		return u.Message.Chat.ID.String()
	case u.EditedMessage != nil:
		return u.EditedMessage.Chat.ID.String()
	case u.Callback != nil && u.Callback.Message != nil:
		return u.Callback.Message.Chat.ID.String()
	}
	return ""
}

func (a *Adapter) getUpdates(ctx context.Context, offset int) ([]json.RawMessage, error) {
	return a.getUpdatesWith(a.api(ctx), offset)
}

// getUpdatesWith is getUpdates with a BotAPI bound to its context.
func (a *Adapter) getUpdatesWith(b *tgbotapi.BotAPI, offset int) ([]json.RawMessage, error) {
	p := tgbotapi.Params{
		"timeout":         strconv.Itoa(int(a.opts.PollTimeout / time.Second)),
		"limit":           strconv.Itoa(pollLimit),
		"allowed_updates": allowedUpdates,
	}
	p.AddNonZero("offset", offset)
	raw, err := a.callWith(b, "getUpdates", p)
	if err != nil {
		return nil, err
	}
	var updates []json.RawMessage
	if err := json.Unmarshal(raw, &updates); err != nil {
		return nil, fmt.Errorf("telegram: getUpdates: result is not a list: %w", err)
	}
	return updates, nil
}

// confirm tells Telegram, at shutdown, about deliveries no poll confirmed
// yet, so a restart does not receive them again (the sink would drop them
// as duplicates anyway). It is bounded by confirmTimeout.
func (a *Adapter) confirm(ctx context.Context, offset, confirmed int) {
	if offset <= confirmed {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), confirmTimeout)
	defer cancel()
	p := tgbotapi.Params{"offset": strconv.Itoa(offset), "limit": "1", "timeout": "0"}
	if _, err := a.call(cctx, "getUpdates", p); err != nil {
		a.log.Debug("telegram: final offset confirmation failed; some updates may be delivered again", "err", err)
	}
}

func updateID(raw json.RawMessage) (int, bool) {
	var u struct {
		UpdateID *int `json:"update_id"`
	}
	if err := json.Unmarshal(raw, &u); err != nil || u.UpdateID == nil {
		return 0, false
	}
	return *u.UpdateID, true
}

// handle normalises one update and hands it to sink. It returns an error
// only when the update must be retried: Deliver failed, or ctx ended while
// preparing it. Malformed and irrelevant updates are logged and dropped.
//
// A button press is answered (answerCallbackQuery, which stops the spinner
// on the user's button) once Deliver returned nil, or at once when it
// cannot be delivered; a failed delivery leaves it unanswered, for the
// retry to answer.
func (a *Adapter) handle(ctx context.Context, sink channels.Sink, raw json.RawMessage) error {
	in, callbackID, ok := a.inbound(ctx, raw)
	if !ok {
		if callbackID != "" {
			a.answerCallback(ctx, callbackID)
		}
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err // downloads were cut short; deliver it complete next time
	}
	if err := sink.Deliver(ctx, in); err != nil {
		return fmt.Errorf("telegram: deliver message %s in chat %s: %w", in.MessageID, in.ChatID, err)
	}
	if callbackID != "" {
		a.answerCallback(ctx, callbackID)
	}
	return nil
}

// answerCallback tells Telegram a button press was received. It is
// cosmetic: a failure (the press is too old, the network) is logged, never
// returned. It runs even if ctx ended right after the delivery, bounded by
// answerTimeout.
func (a *Adapter) answerCallback(ctx context.Context, callbackID string) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), answerTimeout)
	defer cancel()
	if _, err := a.call(actx, "answerCallbackQuery", tgbotapi.Params{"callback_query_id": callbackID}); err != nil {
		a.log.Warn("telegram: could not answer a button press; the user's button shows a spinner until it times out",
			"callback", callbackID, "err", err)
	}
}

// inbound decodes and normalises an update; ok is false for updates to
// skip. callbackID is set for a button press, delivered or skipped, so
// that it can be answered.
func (a *Adapter) inbound(ctx context.Context, raw json.RawMessage) (in channels.Inbound, callbackID string, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			a.log.Error("telegram: skipping an update that broke normalisation", "panic", a.redact(fmt.Sprint(p)))
			ok = false
		}
	}()
	var u update
	if err := json.Unmarshal(raw, &u); err != nil {
		a.log.Warn("telegram: skipping a malformed update", "err", err)
		return in, "", false
	}
	if cb := u.CallbackQuery; cb != nil {
		in, ok = a.press(ctx, u.UpdateID, cb)
		return in, cb.ID, ok
	}
	m, edited := u.Message, false
	if m == nil && u.EditedMessage != nil {
		m, edited = u.EditedMessage, true
	}
	if m == nil {
		a.log.Debug("telegram: ignoring an update without a message", "update_id", u.UpdateID, "kind", updateKind(raw))
		return in, "", false
	}
	if m.Chat == nil {
		a.log.Warn("telegram: skipping a message without a chat", "update_id", u.UpdateID)
		return in, "", false
	}
	if m.From != nil && m.From.ID == a.self.ID {
		return in, "", false // our own message
	}
	in = a.norm.inbound(ctx, m, edited)
	if m.Text == "" && m.Caption == "" && len(in.Attachments) == 0 {
		a.log.Debug("telegram: ignoring a message without content (service message)", "update_id", u.UpdateID, "chat", in.ChatID)
		return in, "", false
	}
	return in, "", true
}

// press checks and normalises a button press; ok is false for presses to
// skip (they are still answered).
func (a *Adapter) press(ctx context.Context, updateID int, cb *callbackQuery) (channels.Inbound, bool) {
	var why string
	switch {
	case cb.ID == "":
		why = "without an id"
	case cb.From == nil:
		why = "without a sender"
	case cb.Message == nil || cb.Message.Chat == nil:
		why = "not on a message in a chat (inline mode)"
	case cb.Data == "":
		why = "without data (not one of our buttons)"
	}
	if why != "" {
		a.log.Warn("telegram: skipping a button press "+why, "update_id", updateID)
		return channels.Inbound{}, false
	}
	return a.norm.press(ctx, cb), true
}

// updateKind names the payload field of an update, for logs.
func updateKind(raw json.RawMessage) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return "unknown"
	}
	for k := range fields {
		if k != "update_id" {
			return k
		}
	}
	return "empty"
}

// ---- webhook ----

func (a *Adapter) serveWebhook(ctx context.Context, sink channels.Sink) error {
	w := a.opts.Webhook
	u, err := url.Parse(w.URL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("telegram: webhook: invalid URL %q", w.URL)
	}
	if u.Scheme != "https" {
		a.log.Warn("telegram: Telegram only delivers webhooks to https URLs", "url", w.URL)
	}
	path := u.Path
	if path == "" {
		path = "/"
	}
	secret := w.SecretToken
	if secret == "" {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		secret = hex.EncodeToString(b)
	}
	ln := w.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", w.Listen); err != nil {
			return fmt.Errorf("telegram: webhook: listen on %q: %w", w.Listen, err)
		}
	}
	mux := http.NewServeMux()
	mux.Handle(path, a.webhookHandler(sink, secret))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}

	// Register only once we listen, so Telegram's first POST finds us.
	if err := a.setWebhook(ctx, w.URL, secret); err != nil {
		stop()
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	a.log.Info("telegram: webhook registered", "url", w.URL, "listen", ln.Addr().String())
	select {
	case <-ctx.Done():
		stop()
		return nil
	case err := <-served:
		return fmt.Errorf("telegram: webhook server: %w", err)
	}
}

// setWebhook registers the webhook, retrying transient failures until ctx
// ends; a refusal (bad URL, bad secret) is returned.
func (a *Adapter) setWebhook(ctx context.Context, hook, secret string) error {
	p := tgbotapi.Params{"url": hook, "secret_token": secret, "allowed_updates": allowedUpdates}
	for {
		_, err := a.call(ctx, "setWebhook", p)
		if err == nil {
			return nil
		}
		wait, retry := retryDelay(err, webhookRetryWait)
		if !retry || ctx.Err() != nil {
			return fmt.Errorf("telegram: webhook: %w", err)
		}
		a.log.Warn("telegram: setWebhook failed, retrying", "wait", wait, "err", err)
		if a.sleep(ctx, wait) != nil {
			return ctx.Err()
		}
	}
}

// webhookHandler checks the secret on every request and answers only after
// Deliver: 200 once stored, 500 when not, so Telegram sends it again.
func (a *Adapter) webhookHandler(sink channels.Sink, secret string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.Header.Get(secretHeader)), []byte(secret)) != 1 {
			a.log.Warn("telegram: webhook request with a wrong secret token refused", "remote", r.RemoteAddr)
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		if err := a.handle(r.Context(), sink, body); err != nil {
			a.log.Error("telegram: webhook delivery failed; Telegram will retry", "err", err)
			http.Error(w, "not stored", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}
