package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-gateway/switchboard/channels"
)

// delivery is a webhook delivery's body, as Meta posts it.
type delivery struct {
	Object string `json:"object"`
	Entry  []struct {
		ID      string `json:"id"`
		Changes []struct {
			Field string `json:"field"`
			Value value  `json:"value"`
		} `json:"changes"`
	} `json:"entry"`
}

// value is one change: messages the users wrote, statuses of the bot's.
type value struct {
	Metadata struct {
		DisplayPhoneNumber string `json:"display_phone_number"`
		PhoneNumberID      string `json:"phone_number_id"`
	} `json:"metadata"`
	Contacts []struct {
		Profile struct {
			Name string `json:"name"`
		} `json:"profile"`
		WaID string `json:"wa_id"`
	} `json:"contacts"`
	Messages []message `json:"messages"`
	Statuses []status  `json:"statuses"`
}

// message is one message a user wrote.
type message struct {
	From      string `json:"from"`
	ID        string `json:"id"`
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"`
	Text      *struct {
		Body string `json:"body"`
	} `json:"text"`
	Image    *media `json:"image"`
	Audio    *media `json:"audio"`
	Video    *media `json:"video"`
	Document *media `json:"document"`
	Sticker  *media `json:"sticker"`
	Location *struct {
		Latitude  float64 `json:"latitude"`
		Longitude float64 `json:"longitude"`
		Name      string  `json:"name"`
		Address   string  `json:"address"`
	} `json:"location"`
	Interactive *struct {
		Type        string `json:"type"`
		ButtonReply *reply `json:"button_reply"`
		ListReply   *reply `json:"list_reply"`
	} `json:"interactive"`
	Button *struct {
		Payload string `json:"payload"`
		Text    string `json:"text"`
	} `json:"button"`
	Reaction *struct {
		MessageID string `json:"message_id"`
		Emoji     string `json:"emoji"`
	} `json:"reaction"`
	Contacts []struct {
		Name struct {
			FormattedName string `json:"formatted_name"`
		} `json:"name"`
	} `json:"contacts"`
	Context *struct {
		From string `json:"from"`
		ID   string `json:"id"`
	} `json:"context"`
}

// media is an image, voice note, video, document or sticker.
type media struct {
	ID       string `json:"id"`
	MIMEType string `json:"mime_type"`
	Caption  string `json:"caption"`
	Filename string `json:"filename"`
	Voice    bool   `json:"voice"`
}

// reply is a pressed reply button or a chosen list row.
type reply struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

// status is what became of a message the bot sent.
type status struct {
	ID          string `json:"id"`
	Status      string `json:"status"` // sent, delivered, read, failed
	RecipientID string `json:"recipient_id"`
	Timestamp   string `json:"timestamp"` // unix seconds
	Errors      []struct {
		Code    int    `json:"code"`
		Title   string `json:"title"`
		Message string `json:"message"`
		Data    struct {
			Details string `json:"details"`
		} `json:"error_data"`
	} `json:"errors"`
}

// handleDelivery delivers the messages of a webhook delivery and reads
// its statuses. It returns the first error of a message not stored; the
// others are tried all the same (a redelivery brings them again, and the
// stored ones are then duplicates).
func (a *Adapter) handleDelivery(ctx context.Context, sink channels.Sink, d delivery) error {
	var errs []error
	for _, e := range d.Entry {
		for _, ch := range e.Changes {
			if ch.Field != "messages" {
				continue
			}
			v := ch.Value
			if id := v.Metadata.PhoneNumberID; id != "" && id != a.phoneID {
				a.log.Debug("whatsapp: delivery for another phone number ignored", "phone_number_id", id)
				continue
			}
			for _, st := range v.Statuses {
				a.onStatusUpdate(ctx, st)
			}
			names := map[string]string{}
			for _, c := range v.Contacts {
				names[c.WaID] = c.Profile.Name
			}
			for _, m := range v.Messages {
				if err := a.handleMessage(ctx, sink, m, names[m.From], v.Metadata.DisplayPhoneNumber); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// handleMessage normalises one message, fetches its media and delivers it.
func (a *Adapter) handleMessage(ctx context.Context, sink channels.Sink, m message, name, botNumber string) error {
	in, md, skip := normalise(m, name, botNumber)
	if skip != "" {
		a.log.Debug("whatsapp: message ignored", "why", skip, "type", m.Type, "message_id", m.ID)
		return nil
	}
	at := in.Time
	if now := a.now(); at.IsZero() || at.After(now) {
		at = now
	}
	a.sawMessage(in.ChatID, in.MessageID, at)
	if md != nil {
		at, err := a.fetched(ctx, *md)
		if err != nil {
			// Meta delivers the message again; by then the Graph API may
			// answer, and a voice note is not left untranscribed.
			return fmt.Errorf("whatsapp: message %s from %s: media %s not fetched for now: %w", in.MessageID, in.ChatID, md.id, err)
		}
		in.Attachments = append(in.Attachments, at)
	}
	if err := sink.Deliver(ctx, in); err != nil {
		return fmt.Errorf("whatsapp: deliver message %s from %s: %w", in.MessageID, in.ChatID, err)
	}
	return nil
}

// sawMessage records a user's message: the 24-hour window it opens, and
// the wamid read receipts and the typing indicator name.
func (a *Adapter) sawMessage(chatID, wamid string, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.chat(chatID)
	if at.After(c.lastIn) {
		c.lastIn, c.lastID, c.closed = at, wamid, false
	}
}

// onStatusUpdate reads a status callback: it is counted (OnStatus) and
// kept with the delivery of its message (RecordStatus), and a failure is
// logged with Meta's reason.
func (a *Adapter) onStatusUpdate(ctx context.Context, st status) {
	if a.onStatus != nil && st.Status != "" {
		a.onStatus(st.Status)
	}
	reason := ""
	if len(st.Errors) > 0 {
		e := st.Errors[0]
		reason = fmt.Sprintf("%d: %s", e.Code, firstNonEmpty(e.Data.Details, e.Message, e.Title))
	}
	if a.recordStatus != nil && st.ID != "" && st.Status != "" {
		var at time.Time
		if sec, err := strconv.ParseInt(st.Timestamp, 10, 64); err == nil && sec > 0 {
			at = time.Unix(sec, 0)
		}
		a.keepStatus(ctx, st.ID, st.Status, reason, at)
	}
	if st.Status != "failed" {
		a.log.Debug("whatsapp: message status", "message_id", st.ID, "status", st.Status)
		return
	}
	a.failed.Add(1)
	args := []any{"message_id", st.ID, "chat", st.RecipientID}
	if len(st.Errors) > 0 {
		e := st.Errors[0]
		args = append(args, "code", e.Code, "reason", firstNonEmpty(e.Data.Details, e.Message, e.Title))
		if e.Code == codeReEngagement {
			args = append(args, "note", "the user's last message is older than 24 hours: only a template reaches them (channels.whatsapp.templates.reminder)")
		}
	}
	a.log.Warn("whatsapp: a sent message failed to reach the user", args...)
}

// statusGrace is how long after a send its statuses may come before the
// send's delivery is in the store (keepStatus).
const statusGrace = 5 * time.Second

// noteSent remembers when Meta accepted message id, the one a delivery
// record will hold, for keepStatus; ones older than statusGrace are
// forgotten as others come.
func (a *Adapter) noteSent(id string) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.sentAt) >= 64 {
		for k, t := range a.sentAt {
			if now.Sub(t) > statusGrace {
				delete(a.sentAt, k)
			}
		}
	}
	a.sentAt[id] = now
}

// keepStatus keeps a status with its message's delivery. Meta can report
// a message "sent" before the reply's record of that send is committed,
// and even before its answer to the send has reached the adapter. It
// tries again, a little later each time, until the delivery takes the
// status or statusGrace ends, so the webhook is answered after the status
// is kept, while the status may be a reply's message sent in the last
// statusGrace or one of a send that had started when the status came and
// has not been answered yet. Others (an earlier part's, a reaction's, a
// message the store keeps no delivery of, or a status that came late) are
// tried once, or once more after those sends.
func (a *Adapter) keepStatus(ctx context.Context, id, status, reason string, at time.Time) {
	came := a.now()
	a.mu.Lock()
	before := a.sends // the sends that had started when the status came
	a.mu.Unlock()
	wait := 10 * time.Millisecond
	for !a.recordStatus(ctx, id, status, reason, at) {
		a.mu.Lock()
		sent, ok := a.sentAt[id]
		unanswered := a.unansweredUpTo(before)
		a.mu.Unlock()
		now := a.now()
		switch {
		case ok && now.Sub(sent) <= statusGrace: // the send's record is on its way
		case !ok && unanswered && now.Sub(came) <= statusGrace: // it may be that send's message
		default:
			return
		}
		if a.sleep(ctx, wait) != nil {
			return
		}
		wait = min(2*wait, 250*time.Millisecond)
	}
}

// unansweredUpTo reports whether a send numbered n or lower still waits
// for Meta's answer. a.mu must be held.
func (a *Adapter) unansweredUpTo(n uint64) bool {
	for m := range a.sending {
		if m <= n {
			return true
		}
	}
	return false
}

// FailedStatuses is the number of sent messages Meta reported failed.
func (a *Adapter) FailedStatuses() int64 { return a.failed.Load() }

// normalise turns a message into an Inbound, with the media to fetch, or
// says why it is skipped. It contacts nothing.
func normalise(m message, name, botNumber string) (in channels.Inbound, md *mediaRef, skip string) {
	if m.From == "" || m.ID == "" {
		return in, nil, "no sender or id"
	}
	in = channels.Inbound{Channel: Name, ChatID: m.From, ChatType: channels.DM, MessageID: m.ID,
		UserID: m.From, DisplayName: name, Mentioned: true}
	if s, err := strconv.ParseInt(m.Timestamp, 10, 64); err == nil && s > 0 {
		in.Time = time.Unix(s, 0).UTC()
	}
	if c := m.Context; c != nil && c.ID != "" {
		in.Quote = &channels.Quote{MessageID: c.ID, FromBot: botNumber != "" && normalNumber(c.From) == normalNumber(botNumber)}
		if !in.Quote.FromBot {
			in.Quote.Author = c.From
		}
	}
	switch m.Type {
	case "text":
		if m.Text != nil {
			in.Text = m.Text.Body
		}
	case "image":
		md = mediaOf(m.Image, channels.Image, "image.jpg")
		in.Text = caption(m.Image)
	case "audio":
		md = mediaOf(m.Audio, channels.Audio, "audio.ogg")
		if m.Audio != nil && m.Audio.Voice {
			md.name = "voice.ogg"
		}
	case "document":
		md = mediaOf(m.Document, channels.File, "document")
		in.Text = caption(m.Document)
	case "video":
		in.Text = caption(m.Video)
		in.Attachments = []channels.Attachment{{Kind: channels.Video, MIME: mimeOf(m.Video), Note: "video, not downloaded"}}
	case "sticker":
		in.Attachments = []channels.Attachment{{Kind: channels.Sticker, MIME: mimeOf(m.Sticker), Note: "sticker"}}
	case "location":
		if l := m.Location; l != nil {
			note := fmt.Sprintf("location %.6f, %.6f", l.Latitude, l.Longitude)
			if place := strings.Trim(strings.Join([]string{l.Name, l.Address}, ", "), ", "); place != "" {
				note += " (" + place + ")"
			}
			in.Attachments = []channels.Attachment{{Kind: channels.Location, Note: note}}
		}
	case "interactive":
		if i := m.Interactive; i != nil {
			r := i.ButtonReply
			if r == nil {
				r = i.ListReply
			}
			if r != nil {
				in.Action, in.Text = r.ID, r.Title
			}
		}
		if in.Action == "" {
			return in, nil, "an interactive answer without a button"
		}
	case "button": // a template's quick reply: its text is the answer
		if m.Button != nil {
			in.Text = firstNonEmpty(m.Button.Text, m.Button.Payload)
		}
	case "contacts":
		var names []string
		for _, c := range m.Contacts {
			names = append(names, c.Name.FormattedName)
		}
		in.Text = "[shared contact: " + strings.Join(names, ", ") + "]"
	case "reaction":
		return in, nil, "a reaction"
	default: // unsupported, system, ephemeral, request_welcome…
		return in, nil, "a message of type " + m.Type
	}
	if in.Text == "" && in.Action == "" && len(in.Attachments) == 0 && md == nil {
		return in, nil, "empty"
	}
	return in, md, ""
}

// mediaRef is a medium to fetch: its id and what it will be.
type mediaRef struct {
	id, name, mime string
	kind           channels.AttachmentKind
}

func mediaOf(m *media, kind channels.AttachmentKind, name string) *mediaRef {
	if m == nil {
		return &mediaRef{kind: kind, name: name}
	}
	return &mediaRef{id: m.ID, kind: kind, name: firstNonEmpty(m.Filename, name), mime: m.MIMEType}
}

func caption(m *media) string {
	if m == nil {
		return ""
	}
	return m.Caption
}

func mimeOf(m *media) string {
	if m == nil {
		return ""
	}
	return m.MIMEType
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// maxTextDocument is the largest document whose text is read.
const maxTextDocument = 64 << 10

// fetched downloads a medium into an attachment: images (for vision) and
// voice notes (for transcription) up to the download cap, documents when
// they are small text files. What is not fetched is said in Note; an
// error says the Graph API or the media host is unavailable for now (a
// 5xx, a temporary code, a lost connection).
func (a *Adapter) fetched(ctx context.Context, r mediaRef) (channels.Attachment, error) {
	at := channels.Attachment{Kind: r.kind, Name: r.name, MIME: r.mime}
	if at.MIME == "" {
		at.MIME = mime.TypeByExtension(path.Ext(r.name))
	}
	limit := a.maxDownload
	if r.kind == channels.File {
		if !textual(at.MIME, at.Name) {
			at.Note = "not downloaded"
			return at, nil
		}
		limit = maxTextDocument
	}
	if r.id == "" {
		at.Note = "no media id"
		return at, nil
	}
	data, err := a.download(ctx, r.id, limit)
	if err != nil {
		if _, _, again := retryWait(err, 0); again {
			return at, err
		}
		a.log.Warn("whatsapp: media not downloaded", "media_id", r.id, "err", a.redact(err.Error()))
		at.Note = "could not be downloaded: " + a.redact(err.Error())
		return at, nil
	}
	at.Data, at.Size = data, int64(len(data))
	if r.kind == channels.File {
		if utf8.Valid(data) {
			at.Text, at.Data = string(data), nil
		} else {
			at.Note = "not valid UTF-8 text"
		}
	}
	return at, nil
}

// textual reports a document whose text is worth reading.
func textual(mimeType, name string) bool {
	media, _, _ := mime.ParseMediaType(mimeType)
	if strings.HasPrefix(media, "text/") || strings.HasSuffix(media, "+json") || strings.HasSuffix(media, "+xml") ||
		media == "application/json" || media == "application/xml" || media == "application/x-yaml" || media == "application/yaml" {
		return true
	}
	switch strings.ToLower(path.Ext(name)) {
	case ".txt", ".md", ".csv", ".json", ".yaml", ".yml", ".log", ".xml", ".toml", ".ini":
		return true
	}
	return false
}

// download fetches a medium: its URL from the Graph API, then the bytes
// with the access token, from Meta's media host (or the api_base's host)
// only, at most limit bytes.
func (a *Adapter) download(ctx context.Context, id string, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var info struct {
		URL      string `json:"url"`
		FileSize int64  `json:"file_size"`
	}
	if err := a.call(ctx, http.MethodGet, id, nil, &info); err != nil {
		return nil, err
	}
	if info.FileSize > limit {
		return nil, fmt.Errorf("%d bytes, over the %d-byte limit", info.FileSize, limit)
	}
	u, err := url.Parse(info.URL)
	if err != nil {
		return nil, fmt.Errorf("media url: %w", err)
	}
	if err := a.mediaURL(u); err != nil {
		return nil, err
	}
	req := (&http.Request{Method: http.MethodGet, URL: u, Host: u.Host,
		Header: http.Header{"Authorization": {"Bearer " + a.token}}}).WithContext(ctx)
	resp, err := a.files.Do(req)
	if err != nil {
		return nil, safeError{err, a.redact(err.Error())}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &APIError{Status: resp.StatusCode, Message: "the media host answered " + resp.Status}
	}
	return io.ReadAll(http.MaxBytesReader(nil, resp.Body, limit))
}

// mediaURL refuses a media URL that is not Meta's over https or, with an
// api_base other than Meta's (a fake), exactly its scheme and host: a
// crafted answer cannot make the gateway send the token anywhere else.
func (a *Adapter) mediaURL(u *url.URL) error {
	if u.Scheme == "https" && (u.Host == "lookaside.fbsbx.com" || strings.HasSuffix(u.Host, ".whatsapp.net") || u.Host == "graph.facebook.com") {
		return nil
	}
	if a.mediaHost != "" && u.Scheme+"://"+u.Host == a.mediaHost {
		return nil
	}
	return fmt.Errorf("not fetched: %s://%s is not Meta's media host", u.Scheme, u.Host)
}
