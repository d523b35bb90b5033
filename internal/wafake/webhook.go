package wafake

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// UserMessage is a message a user writes to the business. One of Text,
// Voice, Image, Document, Location or ButtonID says its type (Text is
// the caption of an image or a document).
type UserMessage struct {
	From     string // wa_id
	Name     string // profile name; "" → "User <From>"
	Text     string
	ReplyTo  string // the wamid it replies to (context.id)
	Voice    []byte // a voice note: audio/ogg; codecs=opus, voice:true
	Image    []byte
	Document []byte
	Filename string // the document's file name; "" → "file"
	Location *Location
	// ButtonID taps that reply button on the newest message the bot sent
	// From that has it, or with ButtonOn on that message, whoever it was
	// sent to (a tap WhatsApp would not deliver: a forged one).
	ButtonID string
	ButtonOn string
	// At is the message's time; zero: the fake's clock. Say counts it as
	// the user's last message when it is the newest.
	At time.Time
}

// Location is a location a user shares.
type Location struct {
	Latitude, Longitude float64
	Name, Address       string
}

// Delivery is a webhook delivery and what became of it.
type Delivery struct {
	ID       string // the user message's wamid, or the status's "wamid/status"
	Kind     string // "message" or "status"
	User     string // the user it is about
	Body     []byte
	Attempts int
	Answers  []int // the webhook's status per attempt (0: no answer)
	Taken    bool  // answered 2xx
}

type delivery struct{ Delivery }

type queue struct {
	items   []*delivery
	running bool
}

// SetWebhook sets where deliveries go: the callback URL registered with
// Meta (the gateway's http.listen and webhook path).
func (f *Fake) SetWebhook(url string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.webhook = url
}

// SetAppSecret sets the secret deliveries are signed with (default
// AppSecret).
func (f *Fake) SetAppSecret(secret string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.appSecret = secret
}

// SetRedeliverAfter sets the wait before a delivery not answered 2xx is
// sent again (default 200 ms).
func (f *Fake) SetRedeliverAfter(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.redeliverAfter = d
}

// Sign is the X-Hub-Signature-256 header of body: "sha256=" and the hex
// HMAC-SHA256 of the raw body with the app secret.
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Say makes a user write: the message is recorded (as the user's last,
// for the 24-hour window) and delivered, signed, to the webhook until
// answered 2xx. It returns the message's wamid.
func (f *Fake) Say(m UserMessage) (wamid string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	wamid, body, at, err := f.composeLocked(m)
	if err != nil {
		return "", err
	}
	from := waID(m.From)
	f.users[wamid] = from
	if at.After(f.lastUser[from]) {
		f.lastUser[from] = at
	}
	d := &delivery{Delivery{ID: wamid, Kind: "message", User: from, Body: body}}
	f.byWamid[wamid] = d
	if err := f.enqueueLocked(d); err != nil {
		return "", err
	}
	return wamid, nil
}

// Compose builds the body of a user's message as Say would, without
// recording or sending it: for Deliver with a missing or wrong signature.
func (f *Fake) Compose(m UserMessage) (wamid string, body []byte, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	wamid, body, _, err = f.composeLocked(m)
	return wamid, body, err
}

// Status sends a status callback ("sent", "delivered", "read" or
// "failed") for wamid, one of the bot's messages; a failed one carries
// errCode (e.g. 131047, 131026) in its errors.
func (f *Fake) Status(wamid, status string, errCode int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var to string
	for user, ms := range f.sent {
		if slices.ContainsFunc(ms, func(m Message) bool { return m.ID == wamid }) {
			to = user
		}
	}
	if to == "" {
		return fmt.Errorf("wafake: status %s: %s is no message the bot sent", status, wamid)
	}
	st := map[string]any{"id": wamid, "status": status, "timestamp": unix(f.now()), "recipient_id": to}
	if status == "failed" {
		title := errorTitles[errCode]
		st["errors"] = []map[string]any{{"code": errCode, "title": title, "message": title,
			"error_data": map[string]string{"details": title}}}
	}
	body := envelope(map[string]any{"messaging_product": "whatsapp", "metadata": metadata(), "statuses": []any{st}})
	return f.enqueueLocked(&delivery{Delivery{ID: wamid + "/" + status, Kind: "status", User: to, Body: body}})
}

// enqueueLocked queues d behind its user's earlier deliveries.
func (f *Fake) enqueueLocked(d *delivery) error {
	if f.closed {
		return errors.New("wafake: closed")
	}
	f.deliveries = append(f.deliveries, d)
	q := f.queues[d.User]
	if q == nil {
		q = &queue{}
		f.queues[d.User] = q
	}
	q.items = append(q.items, d)
	if !q.running {
		q.running = true
		f.wg.Add(1)
		go f.deliverQueue(q)
	}
	f.notify()
	return nil
}

// deliverQueue POSTs a user's deliveries in order, each until taken.
func (f *Fake) deliverQueue(q *queue) {
	defer f.wg.Done()
	for {
		f.mu.Lock()
		if len(q.items) == 0 || f.closed {
			q.running = false
			f.mu.Unlock()
			return
		}
		d := q.items[0]
		target, secret, after := f.webhook, f.appSecret, f.redeliverAfter
		f.mu.Unlock()
		if target != "" {
			status, _ := f.post(f.ctx, target, d.Body, Sign(secret, d.Body))
			f.answered(d, status)
		}
		f.mu.Lock()
		taken := d.Taken
		f.mu.Unlock()
		if taken {
			continue
		}
		t := time.NewTimer(after)
		select {
		case <-t.C:
		case <-f.ctx.Done():
			t.Stop()
		}
	}
}

// answered records an attempt of d and its answer; a 2xx takes d off its
// queue.
func (f *Fake) answered(d *delivery, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d.Attempts++
	d.Answers = append(d.Answers, status)
	if status/100 == 2 && !d.Taken {
		d.Taken = true
		if q := f.queues[d.User]; q != nil {
			q.items = slices.DeleteFunc(q.items, func(x *delivery) bool { return x == d })
		}
	}
	f.notify()
}

// post sends one delivery and returns the answer's status (0: none).
func (f *Fake) post(ctx context.Context, target string, body []byte, signature string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, DeliveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("wafake: delivery to %s: %w", target, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "facebookexternalua")
	if signature != "" {
		req.Header.Set("X-Hub-Signature-256", signature)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("wafake: delivery to %s: %w", target, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Deliver POSTs body to the webhook once with signature as
// X-Hub-Signature-256 ("" sends none) and returns the answer's status.
// Nothing is recorded.
func (f *Fake) Deliver(ctx context.Context, body []byte, signature string) (int, error) {
	f.mu.Lock()
	target := f.webhook
	f.mu.Unlock()
	if target == "" {
		return 0, errors.New("wafake: deliver: no webhook set")
	}
	return f.post(ctx, target, body, signature)
}

// Redeliver POSTs the delivery of a user's message once more, signed, as
// Meta replays one, and returns the answer's status; the attempt counts
// in Deliveries.
func (f *Fake) Redeliver(ctx context.Context, wamid string) (int, error) {
	f.mu.Lock()
	d, target, secret := f.byWamid[wamid], f.webhook, f.appSecret
	f.mu.Unlock()
	if d == nil {
		return 0, fmt.Errorf("wafake: redeliver: no delivery of %s", wamid)
	}
	if target == "" {
		return 0, errors.New("wafake: redeliver: no webhook set")
	}
	status, err := f.post(ctx, target, d.Body, Sign(secret, d.Body))
	f.answered(d, status)
	return status, err
}

// Verify runs Meta's webhook handshake with token: a GET with
// hub.mode=subscribe, hub.verify_token and a hub.challenge. It returns the
// status and whether the body echoed the challenge.
func (f *Fake) Verify(ctx context.Context, token string) (status int, echoed bool, err error) {
	f.mu.Lock()
	target := f.webhook
	challenge := strconv.Itoa(1_000_000 + f.seq*7919)
	f.seq++
	f.mu.Unlock()
	q := url.Values{"hub.mode": {"subscribe"}, "hub.verify_token": {token}, "hub.challenge": {challenge}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target+"?"+q.Encode(), nil)
	if err != nil {
		return 0, false, fmt.Errorf("wafake: verify: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false, fmt.Errorf("wafake: verify: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, false, fmt.Errorf("wafake: verify: %w", err)
	}
	return resp.StatusCode, string(b) == challenge, nil
}

// Deliveries returns every delivery queued so far, in order.
func (f *Fake) Deliveries() []Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Delivery, len(f.deliveries))
	for i, d := range f.deliveries {
		out[i] = d.Delivery
		out[i].Answers = slices.Clone(d.Answers)
	}
	return out
}

// DeliveryOf returns the delivery of a user's message.
func (f *Fake) DeliveryOf(wamid string) (Delivery, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.byWamid[wamid]
	if !ok {
		return Delivery{}, false
	}
	out := d.Delivery
	out.Answers = slices.Clone(d.Answers)
	return out, true
}

// Pending counts the deliveries not yet answered 2xx.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, d := range f.deliveries {
		if !d.Taken {
			n++
		}
	}
	return n
}

// WaitTaken waits until the webhook has answered 2xx to the delivery of
// each of wamids.
func (f *Fake) WaitTaken(ctx context.Context, wamids ...string) error {
	return f.WaitFor(ctx, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, id := range wamids {
			if d := f.byWamid[id]; d == nil || !d.Taken {
				return false
			}
		}
		return true
	})
}

// composeLocked builds a user's message's delivery body.
func (f *Fake) composeLocked(m UserMessage) (wamid string, body []byte, at time.Time, err error) {
	from := waID(m.From)
	if from == "" {
		return "", nil, time.Time{}, errors.New("wafake: a user message needs From")
	}
	at = m.At
	if at.IsZero() {
		at = f.now()
	}
	wamid = f.nextWamidLocked()
	msg := map[string]any{"from": from, "id": wamid, "timestamp": unix(at)}
	if m.ReplyTo != "" {
		msg["context"] = map[string]string{"from": DisplayPhoneNumber, "id": m.ReplyTo}
	}
	caption := func(v map[string]any) map[string]any {
		if m.Text != "" {
			v["caption"] = m.Text
		}
		return v
	}
	switch {
	case m.ButtonID != "":
		q, title := f.findButtonLocked(from, m.ButtonID, m.ButtonOn)
		if q == "" {
			return "", nil, time.Time{}, fmt.Errorf("wafake: no message the bot sent %s has a button %q", from, m.ButtonID)
		}
		msg["type"] = "interactive"
		msg["interactive"] = map[string]any{"type": "button_reply", "button_reply": map[string]string{"id": m.ButtonID, "title": title}}
		msg["context"] = map[string]string{"from": DisplayPhoneNumber, "id": q}
	case m.Voice != nil:
		md := f.media[f.addMediaLocked(m.Voice, "audio/ogg; codecs=opus")]
		msg["type"] = "audio"
		msg["audio"] = map[string]any{"id": md.id, "mime_type": md.mime, "sha256": md.sha, "voice": true}
	case m.Image != nil:
		md := f.media[f.addMediaLocked(m.Image, http.DetectContentType(m.Image))]
		msg["type"] = "image"
		msg["image"] = caption(map[string]any{"id": md.id, "mime_type": md.mime, "sha256": md.sha})
	case m.Document != nil:
		name := m.Filename
		if name == "" {
			name = "file"
		}
		md := f.media[f.addMediaLocked(m.Document, http.DetectContentType(m.Document))]
		msg["type"] = "document"
		msg["document"] = caption(map[string]any{"id": md.id, "mime_type": md.mime, "sha256": md.sha, "filename": name})
	case m.Location != nil:
		l := m.Location
		msg["type"] = "location"
		loc := map[string]any{"latitude": l.Latitude, "longitude": l.Longitude}
		if l.Name != "" {
			loc["name"] = l.Name
		}
		if l.Address != "" {
			loc["address"] = l.Address
		}
		msg["location"] = loc
	default:
		msg["type"] = "text"
		msg["text"] = map[string]string{"body": m.Text}
	}
	name := m.Name
	if name == "" {
		name = "User " + from
	}
	body = envelope(map[string]any{
		"messaging_product": "whatsapp",
		"metadata":          metadata(),
		"contacts":          []any{map[string]any{"profile": map[string]string{"name": name}, "wa_id": from}},
		"messages":          []any{msg},
	})
	return wamid, body, at, nil
}

// findButtonLocked returns the newest message the bot sent to user with
// a reply button id (on: that message, whoever it went to), and the
// button's title.
func (f *Fake) findButtonLocked(user, id, on string) (wamid, title string) {
	var ms []Message
	if on == "" {
		ms = f.sent[user]
	}
	for _, all := range f.sent {
		for _, m := range all {
			if on != "" && m.ID == on {
				ms = append(ms, m)
			}
		}
	}
	for i := len(ms) - 1; i >= 0; i-- {
		for _, b := range ms[i].Buttons {
			if b.ID == id {
				return ms[i].ID, b.Title
			}
		}
	}
	return "", ""
}

// envelope wraps a change's value in a whatsapp_business_account body.
func envelope(value map[string]any) []byte {
	b, err := json.Marshal(map[string]any{
		"object": "whatsapp_business_account",
		"entry": []any{map[string]any{
			"id":      BusinessAccountID,
			"changes": []any{map[string]any{"field": "messages", "value": value}},
		}},
	})
	if err != nil {
		panic(err) // maps of strings and numbers always marshal
	}
	return b
}

func metadata() map[string]string {
	return map[string]string{"display_phone_number": DisplayPhoneNumber, "phone_number_id": PhoneNumberID}
}

func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
