package wafake

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxUpload is the largest upload per media type, as documented.
var maxUpload = map[string]int{"image": 5 << 20, "audio": 16 << 20, "video": 16 << 20, "document": 100 << 20, "sticker": 500 << 10}

// graphError is the body of a Graph API error.
type graphError struct {
	Error graphErrorBody `json:"error"`
}

type graphErrorBody struct {
	Message   string `json:"message"`
	Type      string `json:"type"`
	Code      int    `json:"code"`
	Subcode   int    `json:"error_subcode,omitempty"`
	ErrorData *struct {
		MessagingProduct string `json:"messaging_product"`
		Details          string `json:"details"`
	} `json:"error_data,omitempty"`
	FBTraceID string `json:"fbtrace_id"`
}

// errorTitles are Meta's messages for the codes the fake answers.
var errorTitles = map[int]string{
	1:      "An unknown error occurred",
	2:      "Service temporarily unavailable",
	4:      "Application request limit reached",
	100:    "Invalid parameter",
	190:    "Error validating access token: Session has expired",
	368:    "Temporarily blocked for policies violations",
	80007:  "Rate limit issues",
	130429: "Rate limit hit",
	131000: "Something went wrong",
	131008: "Required parameter is missing",
	131009: "Parameter value is not valid",
	131016: "Service unavailable",
	131026: "Message undeliverable",
	131047: "Re-engagement message",
	131048: "Spam rate limit hit",
	131051: "Unsupported message type",
	131053: "Media upload error",
	131056: "(Business Account, Consumer Account) pair rate limit hit",
	132000: "Number of parameters does not match the expected number of params",
	132001: "Template name does not exist in the translation",
	133004: "Server temporarily unavailable",
}

// writeError answers a Graph API error.
func writeError(w http.ResponseWriter, status, code, subcode int, details string) {
	title := errorTitles[code]
	if title == "" {
		title = "Error"
	}
	e := graphError{Error: graphErrorBody{Message: fmt.Sprintf("(#%d) %s", code, title), Type: "OAuthException",
		Code: code, Subcode: subcode, FBTraceID: "AfakeTrace"}}
	if code == 190 {
		e.Error.Message = title
	}
	if details != "" {
		e.Error.ErrorData = &struct {
			MessagingProduct string `json:"messaging_product"`
			Details          string `json:"details"`
		}{"whatsapp", details}
	}
	writeJSON(w, status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// begin counts a call of kind and answers an injected failure or a bad
// token; it returns false when it has answered.
func (f *Fake) begin(w http.ResponseWriter, r *http.Request, kind string) bool {
	f.mu.Lock()
	f.calls[kind]++
	status, code := f.failureLocked(kind)
	f.notify()
	f.mu.Unlock()
	if status != 0 {
		writeError(w, status, code, 0, "injected by the fake")
		return false
	}
	if r.Header.Get("Authorization") != "Bearer "+AccessToken {
		writeError(w, http.StatusUnauthorized, 190, 0, "")
		return false
	}
	return true
}

// knownPhone answers 400 for another phone number id than the fake's.
func knownPhone(w http.ResponseWriter, id string) bool {
	if id == PhoneNumberID {
		return true
	}
	writeError(w, http.StatusBadRequest, 100, 33,
		fmt.Sprintf("Unsupported post request. Object with ID '%s' does not exist, cannot be loaded due to missing permissions, or does not support this operation", id))
	return false
}

// sendRequest is the body of a POST to /messages.
type sendRequest struct {
	MessagingProduct string `json:"messaging_product"`
	RecipientType    string `json:"recipient_type"`
	To               string `json:"to"`
	Type             string `json:"type"`
	Status           string `json:"status"`
	MessageID        string `json:"message_id"`
	TypingIndicator  *struct {
		Type string `json:"type"`
	} `json:"typing_indicator"`
	Context *struct {
		MessageID string `json:"message_id"`
	} `json:"context"`
	Text *struct {
		Body       string `json:"body"`
		PreviewURL bool   `json:"preview_url"`
	} `json:"text"`
	Interactive *struct {
		Type string `json:"type"`
		Body struct {
			Text string `json:"text"`
		} `json:"body"`
		Action struct {
			Buttons []struct {
				Type  string `json:"type"`
				Reply struct {
					ID    string `json:"id"`
					Title string `json:"title"`
				} `json:"reply"`
			} `json:"buttons"`
		} `json:"action"`
	} `json:"interactive"`
	Template *struct {
		Name     string `json:"name"`
		Language struct {
			Code string `json:"code"`
		} `json:"language"`
		Components []struct {
			Type       string `json:"type"`
			Parameters []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"parameters"`
		} `json:"components"`
	} `json:"template"`
	Reaction *struct {
		MessageID string `json:"message_id"`
		Emoji     string `json:"emoji"`
	} `json:"reaction"`
	Image    *mediaRef `json:"image"`
	Audio    *mediaRef `json:"audio"`
	Video    *mediaRef `json:"video"`
	Document *mediaRef `json:"document"`
	Sticker  *mediaRef `json:"sticker"`
}

type mediaRef struct {
	ID       string `json:"id"`
	Link     string `json:"link"`
	Caption  string `json:"caption"`
	Filename string `json:"filename"`
}

func (s *sendRequest) media() *mediaRef {
	switch s.Type {
	case "image":
		return s.Image
	case "audio":
		return s.Audio
	case "video":
		return s.Video
	case "document":
		return s.Document
	case "sticker":
		return s.Sticker
	}
	return nil
}

// badRequest is a 400 code 100 (or another code) with details.
type badRequest struct {
	code    int
	details string
}

func bad(code int, format string, args ...any) *badRequest {
	return &badRequest{code: code, details: fmt.Sprintf(format, args...)}
}

func (f *Fake) handleMessages(w http.ResponseWriter, r *http.Request) {
	var req sendRequest
	err := json.NewDecoder(r.Body).Decode(&req)
	kind := "messages"
	if err == nil && req.Status != "" {
		kind = "read"
	}
	f.mu.Lock()
	if kind == "messages" && err == nil {
		f.tried[waID(req.To)]++
	}
	f.mu.Unlock()
	if !f.begin(w, r, kind) || !knownPhone(w, r.PathValue("id")) {
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, 100, 0, "the request body is not JSON: "+err.Error())
		return
	}
	if req.MessagingProduct != "whatsapp" {
		writeError(w, http.StatusBadRequest, 100, 0, "messaging_product must be whatsapp")
		return
	}
	if req.Status != "" {
		f.markRead(w, &req)
		return
	}
	f.mu.Lock()
	m, e := f.checkSendLocked(&req)
	if e != nil {
		f.mu.Unlock()
		writeError(w, http.StatusBadRequest, e.code, 0, e.details)
		return
	}
	m.ID, m.At = f.nextWamidLocked(), f.now()
	if m.Type == "reaction" {
		f.reactions[req.Reaction.MessageID] = append(f.reactions[req.Reaction.MessageID], req.Reaction.Emoji)
	} else {
		f.sent[m.To] = append(f.sent[m.To], *m)
	}
	f.notify()
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"messaging_product": "whatsapp",
		"contacts":          []map[string]string{{"input": req.To, "wa_id": m.To}},
		"messages":          []map[string]string{{"id": m.ID}},
	})
}

// markRead handles a read receipt, with the typing indicator or without.
func (f *Fake) markRead(w http.ResponseWriter, req *sendRequest) {
	if req.Status != "read" {
		writeError(w, http.StatusBadRequest, 100, 0, fmt.Sprintf("status %q: only read can be set", req.Status))
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.users[req.MessageID]; !ok {
		writeError(w, http.StatusBadRequest, 100, 0, fmt.Sprintf("message_id %q is no message a user sent to this number", req.MessageID))
		return
	}
	if t := req.TypingIndicator; t != nil {
		if t.Type != "text" {
			writeError(w, http.StatusBadRequest, 100, 0, fmt.Sprintf("typing_indicator.type %q: want text", t.Type))
			return
		}
		f.typing = append(f.typing, req.MessageID)
	}
	f.reads = append(f.reads, req.MessageID)
	f.notify()
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
}

// checkSendLocked validates a send and returns the message it makes.
func (f *Fake) checkSendLocked(req *sendRequest) (*Message, *badRequest) {
	if req.RecipientType != "" && req.RecipientType != "individual" {
		return nil, bad(100, "recipient_type %q: want individual", req.RecipientType)
	}
	to := waID(req.To)
	if to == "" || strings.Trim(to, "0123456789") != "" {
		return nil, bad(100, "to %q is not a phone number", req.To)
	}
	m := &Message{To: to, Type: req.Type}
	if req.Context != nil {
		m.ReplyTo = req.Context.MessageID
	}
	switch req.Type {
	case "text":
		if req.Text == nil || req.Text.Body == "" {
			return nil, bad(100, "Param text['body'] is required")
		}
		if n := utf8.RuneCountInString(req.Text.Body); n > MaxText {
			return nil, bad(100, "Param text['body'] must be at most %d characters long (it has %d)", MaxText, n)
		}
		m.Text, m.PreviewURL = req.Text.Body, req.Text.PreviewURL
	case "interactive":
		if e := checkInteractive(req, m); e != nil {
			return nil, e
		}
	case "template": // the body parameters: no new lines, tabs or 5 spaces in a row
		t := req.Template
		if t == nil || t.Name == "" {
			return nil, bad(100, "Param template['name'] is required")
		}
		tpl, ok := f.templates[templateKey(t.Name, t.Language.Code)]
		if !ok {
			return nil, bad(132001, "template name (%s) does not exist in %s", t.Name, t.Language.Code)
		}
		for _, c := range t.Components {
			if c.Type != "body" {
				continue
			}
			for _, p := range c.Parameters {
				if strings.ContainsAny(p.Text, "\n\t") || strings.Contains(p.Text, "     ") {
					return nil, bad(100, "Param text cannot have new-line/tab characters or more than 4 consecutive spaces")
				}
				m.Params = append(m.Params, p.Text)
			}
		}
		if len(m.Params) != tpl.Params {
			return nil, bad(132000, "body: number of localizable_params (%d) does not match the expected number of params (%d)", len(m.Params), tpl.Params)
		}
		m.Template, m.Language, m.Text = t.Name, t.Language.Code, strings.Join(m.Params, "\n")
		return m, nil // templates may go outside the window
	case "reaction":
		if req.Reaction == nil || req.Reaction.MessageID == "" {
			return nil, bad(100, "Param reaction['message_id'] is required")
		}
		if _, ok := f.users[req.Reaction.MessageID]; !ok {
			return nil, bad(100, "reaction message_id %q is no message of this chat", req.Reaction.MessageID)
		}
	case "image", "audio", "video", "document", "sticker":
		ref := req.media()
		if ref == nil || (ref.ID == "" && ref.Link == "") {
			return nil, bad(100, "Param %s['id'] or %s['link'] is required", req.Type, req.Type)
		}
		if ref.ID == "" {
			return nil, bad(131051, "links are not served by the fake: upload the media")
		}
		md, ok := f.media[ref.ID]
		if !ok {
			return nil, bad(100, "%s id %q: no such media", req.Type, ref.ID)
		}
		if utf8.RuneCountInString(ref.Caption) > MaxCaption {
			return nil, bad(100, "Param %s['caption'] must be at most %d characters long", req.Type, MaxCaption)
		}
		m.Media, m.MIMEType, m.Text, m.Filename = md.data, md.mime, ref.Caption, ref.Filename
	default:
		return nil, bad(131051, "message type %q is not supported", req.Type)
	}
	if last, ok := f.lastUser[to]; !ok || f.now().Sub(last) > Window {
		return nil, bad(131047, "Message failed to send because more than 24 hours have passed since the customer last replied to this number.")
	}
	return m, nil
}

// checkInteractive validates a reply-buttons message into m.
func checkInteractive(req *sendRequest, m *Message) *badRequest {
	in := req.Interactive
	if in == nil || in.Type != "button" {
		return bad(131009, "interactive type: the fake serves only button")
	}
	body := in.Body.Text
	if body == "" || utf8.RuneCountInString(body) > MaxButtonBody {
		return bad(100, "Param interactive['body']['text'] must be 1 to %d characters long (it has %d)", MaxButtonBody, utf8.RuneCountInString(body))
	}
	bs := in.Action.Buttons
	if len(bs) < 1 || len(bs) > MaxButtons {
		return bad(100, "Param interactive['action']['buttons'] must have 1 to %d buttons (it has %d)", MaxButtons, len(bs))
	}
	seen := map[string]bool{}
	for i, b := range bs {
		id, title := b.Reply.ID, b.Reply.Title
		switch {
		case b.Type != "reply":
			return bad(100, "button %d: type %q, want reply", i, b.Type)
		case id == "" || len(id) > MaxButtonID:
			return bad(100, "button %d: id must be 1 to %d characters long", i, MaxButtonID)
		case title == "" || utf8.RuneCountInString(title) > MaxButtonTitle:
			return bad(100, "button %d: title %q must be 1 to %d characters long", i, title, MaxButtonTitle)
		case seen[id]:
			return bad(100, "button %d: id %q is not unique", i, id)
		}
		seen[id] = true
		m.Buttons = append(m.Buttons, Button{ID: id, Title: title})
	}
	m.Text = body
	return nil
}

func (f *Fake) handleUpload(w http.ResponseWriter, r *http.Request) {
	if !f.begin(w, r, "media_upload") || !knownPhone(w, r.PathValue("id")) {
		return
	}
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		writeError(w, http.StatusBadRequest, 100, 0, "the upload is not multipart/form-data: "+err.Error())
		return
	}
	if r.FormValue("messaging_product") != "whatsapp" {
		writeError(w, http.StatusBadRequest, 100, 0, "messaging_product must be whatsapp")
		return
	}
	file, hdr, err := r.FormFile("file")
	if err != nil {
		writeError(w, http.StatusBadRequest, 100, 0, "Param file is required")
		return
	}
	defer file.Close()
	data, err := io.ReadAll(file)
	if err != nil {
		writeError(w, http.StatusBadRequest, 131053, 0, "reading the file: "+err.Error())
		return
	}
	mime := r.FormValue("type")
	if mime == "" {
		mime = hdr.Header.Get("Content-Type")
	}
	kind, _, _ := strings.Cut(mime, "/")
	if mime == "application/pdf" || strings.HasPrefix(mime, "text/") || strings.HasPrefix(mime, "application/") {
		kind = "document"
	}
	limit, ok := maxUpload[kind]
	if !ok {
		writeError(w, http.StatusBadRequest, 131053, 0, fmt.Sprintf("type %q is not supported", mime))
		return
	}
	if len(data) > limit {
		writeError(w, http.StatusBadRequest, 131053, 0, fmt.Sprintf("a %s may have at most %d bytes (it has %d)", kind, limit, len(data)))
		return
	}
	f.mu.Lock()
	id := f.addMediaLocked(data, mime)
	f.notify()
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"id": id})
}

// addMediaLocked stores data and returns its media id.
func (f *Fake) addMediaLocked(data []byte, mime string) string {
	id := f.nextIDLocked("9")
	sum := sha256.Sum256(data)
	f.media[id] = &media{id: id, mime: mime, sha: hex.EncodeToString(sum[:]), data: bytes.Clone(data)}
	return id
}

// handleObject serves GET /{ver}/{id}: the phone number, or a media
// object.
func (f *Fake) handleObject(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id == PhoneNumberID {
		if !f.begin(w, r, "phone_number") {
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"id": PhoneNumberID, "display_phone_number": "+1 555-000-1111",
			"verified_name": VerifiedName, "quality_rating": "GREEN"})
		return
	}
	if !f.begin(w, r, "media") {
		return
	}
	f.mu.Lock()
	md, ok := f.media[id]
	f.mu.Unlock()
	if !ok {
		writeError(w, http.StatusBadRequest, 100, 33, fmt.Sprintf("Unsupported get request. Object with ID '%s' does not exist", id))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"messaging_product": "whatsapp", "url": f.URL + "/download/" + id,
		"mime_type": md.mime, "sha256": md.sha, "file_size": len(md.data), "id": id})
}

func (f *Fake) handleDownload(w http.ResponseWriter, r *http.Request) {
	if !f.begin(w, r, "download") {
		return
	}
	f.mu.Lock()
	md, ok := f.media[r.PathValue("id")]
	f.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", md.mime)
	w.Header().Set("Content-Length", strconv.Itoa(len(md.data)))
	_, _ = w.Write(md.data)
}
