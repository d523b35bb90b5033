package whatsapp

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// The webhook: Meta first checks the URL with a GET (hub.mode=subscribe,
// hub.verify_token, hub.challenge), answered with the challenge when the
// verify token matches. Then it POSTs deliveries, each signed
// X-Hub-Signature-256: sha256=HMAC-SHA256(app secret, raw body). An
// unsigned delivery is answered 401, a wrongly signed one 403, and
// neither reaches anything. A signed one is answered 200 only once every
// message in it is stored (Sink.Deliver returned nil); otherwise 503, and
// Meta delivers it again. Meta's deliveries carry no timestamp in the
// signature: a replay of a captured delivery is a message already stored,
// which the store's intake takes as the same message (its wamid).

// maxBody caps a delivery's body: Meta's are a few KB.
const maxBody = 1 << 20

// Handler is the webhook and its path (channels.HTTPHandler).
func (a *Adapter) Handler() (string, http.Handler) {
	return a.path, http.HandlerFunc(a.serveWebhook)
}

func (a *Adapter) serveWebhook(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		a.serveHandshake(w, r)
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "GET or POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		http.Error(w, "body unreadable or too large", http.StatusRequestEntityTooLarge)
		return
	}
	if err := verifySignature(r.Header.Get("X-Hub-Signature-256"), body, a.secret); err != nil {
		status := http.StatusForbidden
		if errors.Is(err, errNoSignature) {
			status = http.StatusUnauthorized
		}
		a.log.Warn("whatsapp: webhook delivery refused", "err", err, "remote", r.RemoteAddr)
		http.Error(w, err.Error(), status)
		return
	}
	var d delivery
	if err := json.Unmarshal(body, &d); err != nil {
		http.Error(w, "not a webhook delivery", http.StatusBadRequest)
		return
	}
	sink, ok := a.running()
	if !ok {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	if err := a.handleDelivery(r.Context(), sink, d); err != nil {
		a.log.Error("whatsapp: delivery not stored; Meta will send it again", "err", err)
		http.Error(w, "not stored", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// serveHandshake answers Meta's verification of the webhook URL.
func (a *Adapter) serveHandshake(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	mode, token, challenge := q.Get("hub.mode"), q.Get("hub.verify_token"), q.Get("hub.challenge")
	if mode != "subscribe" || subtle.ConstantTimeCompare([]byte(token), []byte(a.verify)) != 1 {
		a.log.Warn("whatsapp: webhook handshake refused: wrong mode or verify token", "mode", mode, "remote", r.RemoteAddr)
		http.Error(w, "verify token does not match", http.StatusForbidden)
		return
	}
	a.log.Info("whatsapp: webhook verified by Meta")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, challenge)
}

var (
	errNoSignature = errors.New("missing X-Hub-Signature-256")
	errSignature   = errors.New("X-Hub-Signature-256 does not match the app secret")
)

// verifySignature checks header, "sha256=<hex HMAC-SHA256 of body>" with
// the app secret, in constant time.
func verifySignature(header string, body []byte, secret string) error {
	if header == "" || secret == "" {
		return errNoSignature
	}
	got, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return errSignature
	}
	mac, err := hex.DecodeString(got)
	if err != nil {
		return errSignature
	}
	if !hmac.Equal(mac, sign(secret, body)) {
		return errSignature
	}
	return nil
}

// sign is the HMAC-SHA256 of body with the app secret.
func sign(secret string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return m.Sum(nil)
}
