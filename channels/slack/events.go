package slack

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/switchboard-gateway/switchboard/channels"
)

// The HTTP Events API: with events_path set, Slack posts events (JSON),
// and interactivity and slash commands (forms), to that path of the
// gateway's HTTP server. Every request is signed with the app's signing
// secret; one whose timestamp is more than five minutes off is refused,
// so that a captured request cannot be replayed. A message is answered
// 200 only once Sink.Deliver stored it; otherwise 503, and Slack retries
// it (X-Slack-Retry-Num), which the store takes as the same message.

// maxEventBody caps a request's body: Slack's events are a few KB.
const maxEventBody = 1 << 20

// maxSkew is how far a request's timestamp may be from now.
const maxSkew = 5 * time.Minute

// Handler is the Events API endpoint and its path (channels.HTTPHandler);
// with Socket Mode there is none.
func (a *Adapter) Handler() (string, http.Handler) {
	if a.eventsPath == "" {
		return "", nil
	}
	return a.eventsPath, http.HandlerFunc(a.serveEvents)
}

func (a *Adapter) serveEvents(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxEventBody+1))
	if err != nil || len(body) > maxEventBody {
		http.Error(w, "body unreadable or too large", http.StatusRequestEntityTooLarge)
		return
	}
	if err := verifySignature(r.Header, body, a.secret, a.now()); err != nil {
		a.log.Warn("slack: events request refused", "err", err, "remote", r.RemoteAddr)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	media, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if media == "application/x-www-form-urlencoded" {
		a.serveForm(w, r, body)
		return
	}
	e, err := slackevents.ParseEvent(body, slackevents.OptionNoVerifyToken())
	if err != nil {
		http.Error(w, "not an event", http.StatusBadRequest)
		return
	}
	if e.Type == slackevents.URLVerification {
		var ch slackevents.ChallengeResponse
		if err := json.Unmarshal(body, &ch); err != nil {
			http.Error(w, "bad challenge", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, ch.Challenge)
		return
	}
	sink, ok := a.running()
	if !ok {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	if err := a.handleEvent(r.Context(), sink, e); err != nil {
		a.log.Error("slack: event not delivered; Slack will retry it", "retry", r.Header.Get("X-Slack-Retry-Num"), "err", err)
		http.Error(w, "not stored", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// serveForm handles interactivity (payload=…) and slash commands.
func (a *Adapter) serveForm(w http.ResponseWriter, r *http.Request, body []byte) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	sink, ok := a.running()
	if !ok {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	if p := form.Get("payload"); p != "" {
		var cb slack.InteractionCallback
		if err := json.Unmarshal([]byte(p), &cb); err != nil {
			http.Error(w, "bad payload", http.StatusBadRequest)
			return
		}
		if err := a.handleInteraction(r.Context(), sink, cb); err != nil {
			a.log.Error("slack: button press not delivered", "err", err)
			http.Error(w, "not stored", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	r2 := r.Clone(r.Context())
	r2.Body, r2.Form, r2.PostForm = http.NoBody, form, form
	c, err := slack.SlashCommandParse(r2)
	if err != nil || c.Command == "" {
		http.Error(w, "neither an interaction nor a command", http.StatusBadRequest)
		return
	}
	answer, err := a.handleCommand(r.Context(), sink, c)
	if err != nil {
		a.log.Error("slack: command not delivered", "command", c.Command, "err", err)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"response_type": "ephemeral", "text": "Sorry, " + c.Command + " did not go through. Please try again."})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if answer == nil {
		answer = map[string]string{}
	}
	_ = json.NewEncoder(w).Encode(answer)
}

// running returns Run's sink in Events API mode.
func (a *Adapter) running() (channels.Sink, bool) {
	p := a.sink.Load()
	if p == nil {
		return nil, false
	}
	return *p, true
}

var (
	errNoSignature = errors.New("missing X-Slack-Signature or X-Slack-Request-Timestamp")
	errStale       = errors.New("request timestamp is more than 5 minutes off")
	errSignature   = errors.New("signature does not match the signing secret")
)

// verifySignature checks Slack's request signature: v0=HMAC-SHA256 of
// "v0:<timestamp>:<body>" with the signing secret, the timestamp within
// five minutes of now.
func verifySignature(h http.Header, body []byte, secret string, now time.Time) error {
	sig, stamp := h.Get("X-Slack-Signature"), h.Get("X-Slack-Request-Timestamp")
	if sig == "" || stamp == "" || secret == "" {
		return errNoSignature
	}
	ts, err := strconv.ParseInt(stamp, 10, 64)
	if err != nil {
		return errNoSignature
	}
	if d := now.Sub(time.Unix(ts, 0)); d > maxSkew || d < -maxSkew {
		return errStale
	}
	got, ok := strings.CutPrefix(sig, "v0=")
	if !ok {
		return errSignature
	}
	gotMAC, err := hex.DecodeString(got)
	if err != nil {
		return errSignature
	}
	if !hmac.Equal(gotMAC, sign(secret, stamp, body)) {
		return errSignature
	}
	return nil
}

// sign is the MAC of a request body at timestamp stamp.
func sign(secret, stamp string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + stamp + ":"))
	m.Write(body)
	return m.Sum(nil)
}
