package slackfake

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// params are a Web API call's arguments, from a form (urlencoded or
// multipart), the query string or a JSON body (non-string values kept as
// their JSON text).
type params map[string]string

// result is a method's answer: the fields besides "ok", or an error code.
type result struct {
	fields map[string]any
	err    string
	detail string // for response_metadata.messages, as Slack explains invalid_blocks
}

func ok(fields map[string]any) result { return result{fields: fields} }
func fail(code string) result         { return result{err: code} }

type handler func(p params) result

// methods maps each Web API method to its handler and the token it takes.
func (f *Fake) methods() map[string]struct {
	h   handler
	app bool // takes the app-level token
} {
	type m = struct {
		h   handler
		app bool
	}
	return map[string]m{
		"auth.test":                    {f.authTest, false},
		"apps.connections.open":        {f.connectionsOpen, true},
		"chat.postMessage":             {f.postMessage, false},
		"chat.update":                  {f.updateMessage, false},
		"chat.delete":                  {f.deleteMessage, false},
		"reactions.add":                {f.addReaction, false},
		"users.info":                   {f.userInfo, false},
		"conversations.info":           {f.conversationInfo, false},
		"files.getUploadURLExternal":   {f.getUploadURL, false},
		"files.completeUploadExternal": {f.completeUpload, false},
		"assistant.threads.setStatus":  {f.setStatus, false},
	}
}

func (f *Fake) handleAPI(w http.ResponseWriter, r *http.Request) {
	method := r.PathValue("method")
	p, token := readParams(r)

	f.mu.Lock()
	f.calls[method]++
	fl := f.takeFailureLocked(method)
	f.notify()
	f.mu.Unlock()
	if fl != nil {
		if fl.status == http.StatusOK {
			writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": fl.code})
			return
		}
		if fl.status == http.StatusTooManyRequests {
			retryAfterHeader(w, fl.retryAfter)
			writeJSON(w, fl.status, map[string]any{"ok": false, "error": "ratelimited"})
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(fl.status)
		_, _ = io.WriteString(w, "<html><body>Slack is having trouble</body></html>")
		return
	}

	m, known := f.methods()[method]
	if !known {
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "unknown_method"})
		return
	}
	want, other := BotToken, AppToken
	if m.app {
		want, other = AppToken, BotToken
	}
	switch token {
	case want:
	case "":
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "not_authed"})
		return
	case other:
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "not_allowed_token_type"})
		return
	default:
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}

	f.mu.Lock()
	if !m.app {
		w.Header().Set("X-OAuth-Scopes", f.scopeHeaderLocked())
		if need := f.missingScopeLocked(method, p); need != "" {
			provided := f.scopeHeaderLocked()
			f.mu.Unlock()
			writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "missing_scope", "needed": need, "provided": provided})
			return
		}
	}
	undo, wait := f.admitLocked(method, p["channel"])
	f.mu.Unlock()
	if wait > 0 {
		retryAfterHeader(w, wait)
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"ok": false, "error": "ratelimited"})
		return
	}
	res := m.h(p)
	if res.err != "" {
		undo()
		body := map[string]any{"ok": false, "error": res.err}
		if res.detail != "" {
			body["response_metadata"] = map[string]any{"messages": []string{"[ERROR] " + res.detail}}
		}
		writeJSON(w, http.StatusOK, body)
		return
	}
	body := map[string]any{"ok": true}
	for k, v := range res.fields {
		body[k] = v
	}
	writeJSON(w, http.StatusOK, body)
}

// readParams reads a call's arguments and its token (Authorization
// bearer first, then the token argument).
func readParams(r *http.Request) (params, string) {
	p := params{}
	for k, v := range r.URL.Query() {
		p[k] = v[0]
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		var body map[string]json.RawMessage
		if json.NewDecoder(r.Body).Decode(&body) == nil {
			for k, raw := range body {
				var s string
				if json.Unmarshal(raw, &s) == nil {
					p[k] = s
				} else {
					p[k] = string(raw)
				}
			}
		}
	case "multipart/form-data":
		if r.ParseMultipartForm(32<<20) == nil {
			for k, v := range r.MultipartForm.Value {
				p[k] = v[0]
			}
		}
	default:
		if r.ParseForm() == nil {
			for k, v := range r.PostForm {
				p[k] = v[0]
			}
		}
	}
	token, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !found || token == "" {
		token = p["token"]
	}
	return p, token
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func itoa(n int) string { return strconv.Itoa(n) }

func (f *Fake) authTest(params) result {
	return ok(map[string]any{
		"url": "https://" + TeamDomain + ".slack.com/", "team": "Fake Workspace", "user": "switchboard",
		"team_id": TeamID, "user_id": BotUserID, "bot_id": BotID, "is_enterprise_install": false,
	})
}

func (f *Fake) connectionsOpen(params) result {
	f.mu.Lock()
	defer f.mu.Unlock()
	ticket := f.nextIDLocked("ticket-")
	f.tickets[ticket] = true
	return ok(map[string]any{"url": f.SocketURL() + "?ticket=" + ticket + "&app_id=" + AppID})
}

// SocketURL is where apps.connections.open points (without its ticket).
func (f *Fake) SocketURL() string { return "ws" + strings.TrimPrefix(f.URL, "http") + "/link/" }

// checkMessage validates text and blocks as chat.postMessage and
// chat.update do; blocks is nil when the call had none. It returns the
// failure, or a zero result.
func checkMessage(text string, blocks json.RawMessage, needContent bool) result {
	if utf8.RuneCountInString(text) > MaxMessageText {
		return fail("msg_too_long")
	}
	if blocks != nil {
		var arr []json.RawMessage
		if json.Unmarshal(blocks, &arr) != nil {
			return fail("invalid_blocks_format")
		}
		if len(arr) > maxBlocks {
			return result{err: "invalid_blocks", detail: "no more than 50 items allowed [json-pointer:/blocks]"}
		}
		if msg := checkBlocks(arr); msg != "" {
			return result{err: "invalid_blocks", detail: msg}
		}
		if len(arr) > 0 {
			return result{}
		}
	}
	if needContent && strings.TrimSpace(text) == "" {
		return fail("no_text")
	}
	return result{}
}

// blocksParam returns the call's blocks, nil when it had none.
func blocksParam(p params) json.RawMessage {
	b, ok := p["blocks"]
	if !ok || b == "" {
		return nil
	}
	return json.RawMessage(b)
}

func (f *Fake) postMessage(p params) result {
	channel := p["channel"]
	if channel == "" {
		return fail("channel_not_found")
	}
	blocks := blocksParam(p)
	if bad := checkMessage(p["text"], blocks, true); bad.err != "" {
		return bad
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.addLocked(Message{Channel: channel, TS: f.nextTSLocked(), ThreadTS: p["thread_ts"],
		User: BotUserID, BotID: BotID, Text: p["text"], Blocks: blocks})
	if f.echoBot && f.connects > 0 {
		f.queueLocked(f.newEventEnvelopeLocked(messageEvent(m.Message, channelType(channel))))
	}
	f.notify()
	return ok(map[string]any{"channel": channel, "ts": m.TS, "message": messageJSON(m.Message)})
}

func (f *Fake) updateMessage(p params) result {
	channel, ts := p["channel"], p["ts"]
	blocks := blocksParam(p)
	if bad := checkMessage(p["text"], blocks, false); bad.err != "" {
		return bad
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m, bad := f.botMessageLocked(channel, ts, "cant_update_message")
	if bad.err != "" {
		return bad
	}
	text, hasText := p["text"]
	if !hasText {
		text = m.Text
	}
	newBlocks := m.Blocks
	if blocks != nil {
		newBlocks = blocks
		if string(blocks) == "[]" {
			newBlocks = nil
		}
	}
	if text == "" && newBlocks == nil {
		return fail("no_text")
	}
	m.Text, m.Blocks = text, newBlocks
	m.Edits++
	m.Versions = append(m.Versions, m.Text)
	f.notify()
	return ok(map[string]any{"channel": channel, "ts": ts, "text": m.Text, "message": messageJSON(m.Message)})
}

// botMessageLocked returns the bot's message ts in channel, or the error
// Slack answers (message_not_found, or cant for another's message); f.mu
// must be held.
func (f *Fake) botMessageLocked(channel, ts, cant string) (*message, result) {
	m := f.findLocked(channel, ts)
	switch {
	case m == nil || m.Deleted:
		return nil, fail("message_not_found")
	case m.BotID != BotID:
		return nil, fail(cant)
	}
	return m, result{}
}

func (f *Fake) deleteMessage(p params) result {
	channel, ts := p["channel"], p["ts"]
	f.mu.Lock()
	defer f.mu.Unlock()
	m, bad := f.botMessageLocked(channel, ts, "cant_delete_message")
	if bad.err != "" {
		return bad
	}
	m.Deleted = true
	f.notify()
	return ok(map[string]any{"channel": channel, "ts": ts})
}

func (f *Fake) addReaction(p params) result {
	channel, ts, name := p["channel"], p["timestamp"], p["name"]
	if name == "" {
		return fail("invalid_name")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.findLocked(channel, ts)
	if m == nil || m.Deleted {
		return fail("message_not_found")
	}
	key := channel + "/" + ts
	for _, r := range f.reactions[key] {
		if r == name {
			return fail("already_reacted")
		}
	}
	f.reactions[key] = append(f.reactions[key], name)
	f.notify()
	return ok(nil)
}

func (f *Fake) userInfo(p params) result {
	id, valid := idParam(p, "user", "UW")
	if !valid {
		return fail("user_not_found")
	}
	f.mu.Lock()
	u := f.userLocked(id)
	f.mu.Unlock()
	return ok(map[string]any{"user": map[string]any{
		"id": u.ID, "team_id": u.TeamID, "name": u.Name, "real_name": u.RealName, "is_bot": u.IsBot,
		"deleted": false, "tz": "Europe/Berlin", "tz_offset": 3600,
		"profile": map[string]any{"real_name": u.RealName, "display_name": u.Name, "team": u.TeamID},
	}})
}

func (f *Fake) conversationInfo(p params) result {
	id, valid := idParam(p, "channel", "CDG")
	if !valid {
		return fail("channel_not_found")
	}
	f.mu.Lock()
	c, known := f.channels[id]
	if !known {
		c = Channel{ID: id, Name: "channel-" + strings.ToLower(id)}
		for _, m := range f.history[id] {
			if m.BotID == "" && m.User != "" {
				c.User = m.User // a DM's other member: whoever wrote in it
				break
			}
		}
	}
	f.mu.Unlock()
	kind := channelType(id)
	ch := map[string]any{
		"id": c.ID, "created": 1700000000, "is_channel": kind == "channel", "is_group": kind == "group",
		"is_im": kind == "im", "is_private": kind != "channel", "is_member": true, "context_team_id": TeamID,
	}
	if kind == "im" {
		ch["user"] = c.User
	} else {
		ch["name"] = c.Name
		ch["name_normalized"] = c.Name
	}
	return ok(map[string]any{"channel": ch})
}

func (f *Fake) setStatus(p params) result {
	if p["channel_id"] == "" || p["thread_ts"] == "" {
		return fail("invalid_arguments")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses = append(f.statuses, Status{Channel: p["channel_id"], ThreadTS: p["thread_ts"], Status: p["status"]})
	f.notify()
	return ok(nil)
}

// idParam returns the id argument key and whether it starts with one of
// kinds' letters, as Slack's ids of that kind do.
func idParam(p params, key, kinds string) (string, bool) {
	id := p[key]
	return id, id != "" && strings.ContainsAny(id[:1], kinds)
}

// channelType is the channel_type of a conversation id, as in message
// events: "im" for D…, "group" for G…, else "channel".
func channelType(id string) string {
	switch {
	case strings.HasPrefix(id, "D"):
		return "im"
	case strings.HasPrefix(id, "G"):
		return "group"
	}
	return "channel"
}

// messageJSON is a message as the Web API and events show it.
func messageJSON(m Message) map[string]any {
	out := map[string]any{"type": "message", "text": m.Text, "ts": m.TS, "team": TeamID}
	if m.User != "" {
		out["user"] = m.User
	}
	if m.BotID != "" {
		out["bot_id"] = m.BotID
		if m.BotID == BotID {
			out["app_id"] = AppID
		}
	}
	if m.ThreadTS != "" {
		out["thread_ts"] = m.ThreadTS
	}
	if m.Blocks != nil {
		out["blocks"] = m.Blocks
	}
	if len(m.Files) > 0 {
		out["files"] = filesJSON(m.Files)
		out["upload"] = false
	}
	return out
}
