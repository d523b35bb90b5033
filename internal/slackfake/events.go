package slackfake

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// UserMessage is a message a user (or, with BotID, another bot) writes.
type UserMessage struct {
	Channel  string // "D…" a DM, "C…" a channel, "G…" a private channel
	User     string
	Text     string
	ThreadTS string // a reply in this thread
	Files    []File // files shared with it (subtype file_share, as on Slack)
	BotID    string // another bot's message (bot_id set); "" for a person
	// LoseFirstAck loses the first acknowledgement of each of the
	// message's envelopes on its way, as a network may: the envelope is
	// sent again after the redelivery delay (SetRedelivery), and the
	// adapter gets the message twice.
	LoseFirstAck bool
}

// Click is a press of a button on one of the bot's messages.
type Click struct {
	Channel string
	TS      string // the bot message's ts
	User    string
	// ActionID names the button; "" picks the first button with Value.
	ActionID string
	Value    string
}

// SlashCommand is a slash command a user runs.
type SlashCommand struct {
	Channel, User, Command, Text string
}

// Say records a user's message and delivers it over Socket Mode: a
// message event (message.im in a DM; message.channels/groups elsewhere),
// plus an app_mention when Text names <@UBOT> outside a DM. It returns
// the message's ts; EnvelopesOf(ts) lists its envelopes.
func (f *Fake) Say(m UserMessage) (ts string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mm, events := f.sayLocked(m)
	for _, ev := range events {
		e := f.newEventEnvelopeLocked(ev)
		e.loseAck = m.LoseFirstAck
		f.queueLocked(e)
	}
	f.notify()
	return mm.TS
}

// SayEvents records a user's message like Say but queues nothing: it
// returns the Events API bodies (event_callback JSON) for PostEvent.
func (f *Fake) SayEvents(m UserMessage) (ts string, bodies []json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mm, events := f.sayLocked(m)
	for _, ev := range events {
		bodies = append(bodies, f.callbackLocked(ev))
	}
	f.notify()
	return mm.TS, bodies
}

// innerEvent is an event_callback's event, with what the envelope records.
type innerEvent struct {
	kind string // "message", "app_mention"
	ts   string
	body map[string]any
}

func (f *Fake) sayLocked(m UserMessage) (*message, []innerEvent) {
	mm := f.addLocked(Message{Channel: m.Channel, TS: f.nextTSLocked(), ThreadTS: m.ThreadTS,
		User: m.User, BotID: m.BotID, Text: m.Text, Files: m.Files})
	kind := channelType(m.Channel)
	events := []innerEvent{messageEvent(mm.Message, kind)}
	if kind != "im" && strings.Contains(m.Text, "<@"+BotUserID+">") {
		ev := map[string]any{"type": "app_mention", "user": m.User, "text": m.Text, "ts": mm.TS,
			"channel": m.Channel, "event_ts": mm.TS, "team": TeamID}
		if m.ThreadTS != "" {
			ev["thread_ts"] = m.ThreadTS
		}
		if m.BotID != "" {
			ev["bot_id"] = m.BotID
		}
		if len(m.Files) > 0 {
			ev["files"] = filesJSON(m.Files)
		}
		events = append(events, innerEvent{kind: "app_mention", ts: mm.TS, body: ev})
	}
	return mm, events
}

// messageEvent is the message event Slack sends for m.
func messageEvent(m Message, kind string) innerEvent {
	ev := messageJSON(m)
	ev["channel"] = m.Channel
	ev["channel_type"] = kind
	ev["event_ts"] = m.TS
	if m.BotID == "" {
		ev["client_msg_id"] = fmt.Sprintf("fake-%s", m.TS)
	}
	if len(m.Files) > 0 {
		ev["subtype"] = "file_share"
	}
	return innerEvent{kind: "message", ts: m.TS, body: ev}
}

// UserEdit changes a user's message and sends message_changed.
func (f *Fake) UserEdit(channel, ts, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.findLocked(channel, ts)
	if m == nil {
		f.errorf("UserEdit: no message %s in %s", ts, channel)
		return
	}
	prev := messageJSON(m.Message)
	m.Text = text
	m.Edits++
	m.Versions = append(m.Versions, text)
	now := f.nextTSLocked()
	cur := messageJSON(m.Message)
	cur["edited"] = map[string]any{"user": m.User, "ts": now}
	ev := map[string]any{"type": "message", "subtype": "message_changed", "hidden": true, "channel": channel,
		"channel_type": channelType(channel), "ts": now, "event_ts": now, "message": cur, "previous_message": prev}
	f.queueLocked(f.newEventEnvelopeLocked(innerEvent{kind: "message", ts: ts, body: ev}))
	f.notify()
}

// UserDelete deletes a user's message and sends message_deleted.
func (f *Fake) UserDelete(channel, ts string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.findLocked(channel, ts)
	if m == nil {
		f.errorf("UserDelete: no message %s in %s", ts, channel)
		return
	}
	m.Deleted = true
	now := f.nextTSLocked()
	ev := map[string]any{"type": "message", "subtype": "message_deleted", "hidden": true, "channel": channel,
		"channel_type": channelType(channel), "ts": now, "event_ts": now, "deleted_ts": ts,
		"previous_message": messageJSON(m.Message)}
	f.queueLocked(f.newEventEnvelopeLocked(innerEvent{kind: "message", ts: ts, body: ev}))
	f.notify()
}

// callbackLocked wraps ev in an event_callback; f.mu must be held.
func (f *Fake) callbackLocked(ev innerEvent) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"token": VerificationToken, "team_id": TeamID, "api_app_id": AppID, "event": ev.body,
		"type": "event_callback", "event_id": f.nextIDLocked("Ev"), "event_time": time.Now().Unix(),
		"authorizations": []any{map[string]any{"enterprise_id": nil, "team_id": TeamID, "user_id": BotUserID,
			"is_bot": true, "is_enterprise_install": false}},
		"is_ext_shared_channel": false, "event_context": "4-fake",
	})
	return b
}

func (f *Fake) newEventEnvelopeLocked(ev innerEvent) *envelope {
	return &envelope{Envelope: Envelope{ID: f.newEnvelopeIDLocked(), Type: EnvelopeEventsAPI, Kind: ev.kind,
		TS: ev.ts, Payload: f.callbackLocked(ev)}}
}

func (f *Fake) newEnvelopeIDLocked() string {
	f.seq++
	return fmt.Sprintf("%08x-fake-4e00-a000-%012d", f.seq, f.seq)
}

// Click delivers a block_actions interaction: User pressed a button of the
// bot's message c.TS in c.Channel. It returns the envelope id ("" and a
// test error when there is no such message or button).
func (f *Fake) Click(c Click) (envelopeID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	payload, ok := f.clickPayloadLocked(c)
	if !ok {
		return ""
	}
	e := &envelope{Envelope: Envelope{ID: f.newEnvelopeIDLocked(), Type: EnvelopeInteractive,
		Kind: "block_actions", TS: c.TS, Payload: payload}}
	f.queueLocked(e)
	f.notify()
	return e.ID
}

// ClickPayload is the block_actions payload for c, for PostInteraction.
func (f *Fake) ClickPayload(c Click) json.RawMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, _ := f.clickPayloadLocked(c)
	return p
}

func (f *Fake) clickPayloadLocked(c Click) (json.RawMessage, bool) {
	m := f.findLocked(c.Channel, c.TS)
	if m == nil || m.Deleted {
		f.errorf("Click: no message %s in %s", c.TS, c.Channel)
		return nil, false
	}
	bt, found := findButton(m.Blocks, c.ActionID, c.Value)
	if !found {
		f.errorf("Click: message %s has no button %q (value %q)", c.TS, c.ActionID, c.Value)
		return nil, false
	}
	now := f.nextTSLocked()
	u := f.userLocked(c.User)
	container := map[string]any{"type": "message", "message_ts": c.TS, "channel_id": c.Channel, "is_ephemeral": false}
	if m.ThreadTS != "" {
		container["thread_ts"] = m.ThreadTS
	}
	b, _ := json.Marshal(map[string]any{
		"type": "block_actions", "token": VerificationToken, "api_app_id": AppID,
		"user":       map[string]any{"id": u.ID, "username": u.Name, "name": u.Name, "team_id": TeamID},
		"team":       map[string]any{"id": TeamID, "domain": TeamDomain},
		"container":  container,
		"channel":    map[string]any{"id": c.Channel, "name": "channel-" + strings.ToLower(c.Channel)},
		"message":    messageJSON(m.Message),
		"trigger_id": now + ".fake-trigger", "response_url": f.URL + "/actions/" + now,
		"state": map[string]any{"values": map[string]any{}},
		"actions": []any{map[string]any{
			"action_id": bt.ActionID, "block_id": bt.BlockID, "value": bt.Value, "type": "button",
			"text": map[string]any{"type": "plain_text", "text": bt.Text, "emoji": true}, "action_ts": now,
		}},
		"is_enterprise_install": false,
	})
	return b, true
}

// SlashCommand delivers a slash_commands envelope and returns its id; the
// acknowledgement's payload (the command's answer) is in Envelopes.
func (f *Fake) SlashCommand(c SlashCommand) (envelopeID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.nextTSLocked()
	u := f.userLocked(c.User)
	b, _ := json.Marshal(map[string]any{
		"token": VerificationToken, "team_id": TeamID, "team_domain": TeamDomain, "channel_id": c.Channel,
		"channel_name": "channel-" + strings.ToLower(c.Channel), "user_id": u.ID, "user_name": u.Name,
		"command": c.Command, "text": c.Text, "api_app_id": AppID, "is_enterprise_install": "false",
		"response_url": f.URL + "/commands/" + now, "trigger_id": now + ".fake-trigger",
	})
	e := &envelope{Envelope: Envelope{ID: f.newEnvelopeIDLocked(), Type: EnvelopeSlashCommands, Kind: c.Command,
		Payload: b}, accepts: true}
	f.queueLocked(e)
	f.notify()
	return e.ID
}

// userLocked returns the user id, made up from the id when unknown; f.mu
// must be held.
func (f *Fake) userLocked(id string) User {
	u, known := f.users[id]
	if !known {
		u = User{ID: id, Name: "user-" + strings.ToLower(id), RealName: "User " + id}
	}
	if u.TeamID == "" {
		u.TeamID = TeamID
	}
	return u
}

// Sign returns the headers Slack signs a request with: X-Slack-Signature
// "v0=" + hex(HMAC-SHA256(secret, "v0:" + timestamp + ":" + body)) and
// X-Slack-Request-Timestamp (Unix seconds of at).
func Sign(secret string, at time.Time, body []byte) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%s:", ts)
	mac.Write(body)
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", ts)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return h
}

// PostEvent POSTs an Events API body to url as Slack does: JSON, signed
// with signingSecret now; retryNum > 0 adds X-Slack-Retry-Num and
// X-Slack-Retry-Reason: http_timeout. ev is sent as is when it is
// []byte or json.RawMessage, else marshalled. It returns the status.
func (f *Fake) PostEvent(ctx context.Context, url, signingSecret string, ev any, retryNum int) (int, error) {
	var body []byte
	switch v := ev.(type) {
	case []byte:
		body = v
	case json.RawMessage:
		body = v
	default:
		b, err := json.Marshal(ev)
		if err != nil {
			return 0, fmt.Errorf("slackfake: post event: %w", err)
		}
		body = b
	}
	return post(ctx, url, "application/json", signingSecret, body, retryNum)
}

// Challenge sends the url_verification Slack sends when an app's Request
// URL is set, and checks the answer echoes the challenge (as JSON
// {"challenge":…} or as plain text).
func (f *Fake) Challenge(ctx context.Context, url, signingSecret string) error {
	f.mu.Lock()
	challenge := f.nextIDLocked("challenge-")
	f.mu.Unlock()
	body, _ := json.Marshal(map[string]string{"token": VerificationToken, "challenge": challenge, "type": "url_verification"})
	status, answer, err := postRead(ctx, url, "application/json", signingSecret, body, 0)
	if err != nil {
		return err
	}
	var js struct {
		Challenge string `json:"challenge"`
	}
	if status != http.StatusOK || (strings.TrimSpace(answer) != challenge && (json.Unmarshal([]byte(answer), &js) != nil || js.Challenge != challenge)) {
		return fmt.Errorf("slackfake: url_verification answered %d %q, want the challenge %q", status, answer, challenge)
	}
	return nil
}

// PostInteraction POSTs an interactive payload (such as ClickPayload's)
// to url as Slack does: form-encoded payload=<json>, signed.
func (f *Fake) PostInteraction(ctx context.Context, url_, signingSecret string, payload json.RawMessage) (int, error) {
	body := []byte(url.Values{"payload": {string(payload)}}.Encode())
	return post(ctx, url_, "application/x-www-form-urlencoded", signingSecret, body, 0)
}

func post(ctx context.Context, target, contentType, secret string, body []byte, retryNum int) (int, error) {
	status, _, err := postRead(ctx, target, contentType, secret, body, retryNum)
	return status, err
}

// postRead sends a signed POST and returns the status and the answer.
func postRead(ctx context.Context, target, contentType, secret string, body []byte, retryNum int) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, "", fmt.Errorf("slackfake: post: %w", err)
	}
	for k, v := range Sign(secret, time.Now(), body) {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)")
	if retryNum > 0 {
		req.Header.Set("X-Slack-Retry-Num", strconv.Itoa(retryNum))
		req.Header.Set("X-Slack-Retry-Reason", "http_timeout")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("slackfake: post: %w", err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(answer), nil
}
