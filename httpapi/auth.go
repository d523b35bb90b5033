package httpapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/httpjson"
)

const (
	// sessionCookie holds the dashboard login: a random id and the time
	// of the sign-in, signed with an HMAC keyed by the token, so the token
	// itself never sits in the browser, a new token signs everyone out, and
	// each sign-in is an operator of its own (the web chat's session).
	sessionCookie = "switchboard_session"
	sessionMaxAge = 30 * 24 * time.Hour
	sessionIDLen  = 16 // random bytes of a sign-in's id
)

// tokenOK compares a presented token with the configured one in constant
// time.
func (s *Server) tokenOK(presented string) bool {
	return presented != "" && subtle.ConstantTimeCompare([]byte(presented), []byte(s.opts.Token)) == 1
}

// credential is what a request's bearer token turned out to be.
type credential int

const (
	credNone  credential = iota // no token presented
	credOK                      // the right token
	credWrong                   // a wrong token (counted against the client)
	credWait                    // not checked: the client is waiting out its wrong tokens
)

// bearerToken returns the token of "Authorization: Bearer TOKEN", if any.
func bearerToken(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// checkBearer checks the bearer token r presents, slowing a client that
// sends wrong ones (guessLimiter); wait is how long it must still wait
// (credWait).
func (s *Server) checkBearer(r *http.Request) (c credential, wait time.Duration) {
	tok, ok := bearerToken(r)
	if !ok {
		return credNone, 0
	}
	if wait := s.guesses.wait(r); wait > 0 {
		return credWait, wait
	}
	if !s.tokenOK(tok) {
		s.guesses.failed(r)
		s.log.Warn("wrong bearer token", "remote", r.RemoteAddr, "path", r.URL.Path)
		return credWrong, 0
	}
	s.guesses.succeeded(r)
	return credOK, 0
}

// sessionMAC signs a sign-in's id and time.
func (s *Server) sessionMAC(id, issued string) string {
	mac := hmac.New(sha256.New, []byte(s.opts.Token))
	mac.Write([]byte("switchboard dashboard session v2\x00" + id + "\x00" + issued))
	return hex.EncodeToString(mac.Sum(nil))
}

// newSession returns the cookie value of a new sign-in: ID.ISSUED.MAC.
func (s *Server) newSession() string {
	id := hex.EncodeToString(randomBytes(sessionIDLen))
	issued := strconv.FormatInt(s.opts.Now().Unix(), 10)
	return id + "." + issued + "." + s.sessionMAC(id, issued)
}

// signedIn returns the id of the sign-in r's cookie holds, if it is
// genuine, younger than sessionMaxAge and not signed out.
func (s *Server) signedIn(r *http.Request) (string, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", false
	}
	id, rest, _ := strings.Cut(c.Value, ".")
	issued, mac, _ := strings.Cut(rest, ".")
	if len(id) != 2*sessionIDLen || !hmac.Equal([]byte(mac), []byte(s.sessionMAC(id, issued))) {
		return "", false
	}
	at, err := strconv.ParseInt(issued, 10, 64)
	if err != nil || s.opts.Now().Sub(time.Unix(at, 0)) > sessionMaxAge {
		return "", false
	}
	return id, !s.signedOut.has(r.Context(), id)
}

func (s *Server) cookieOK(r *http.Request) bool {
	_, ok := s.signedIn(r)
	return ok
}

// signOuts are the sign-ins ended with the logout button, until their
// cookies would have expired anyway: in memory, and kept in the store
// when it can (signOutKeeper), so that a restart, or another replica on
// the same store, still refuses a signed-out browser's cookie. Changing
// http.token ends every sign-in.
type signOuts struct {
	mu   sync.Mutex
	ids  map[string]time.Time // id → when its cookie expires
	now  func() time.Time
	keep signOutKeeper // nil: memory only
	log  *slog.Logger
}

// signOutKeeper is a Store that keeps small durable state by key (the
// store's channel_state, under signOutScope).
type signOutKeeper interface {
	ChannelState(ctx context.Context, channel, key string) (string, bool, error)
	SetChannelState(ctx context.Context, channel, key, value string) error
}

// signOutScope and the "signout:" keys hold the kept sign-outs: the
// cookie's expiry in Unix seconds.
const signOutScope = "dashboard"

func newSignOuts(now func() time.Time, st Store, log *slog.Logger) *signOuts {
	o := &signOuts{ids: map[string]time.Time{}, now: now, log: log}
	o.keep, _ = st.(signOutKeeper)
	return o
}

func (o *signOuts) add(ctx context.Context, id string) {
	o.mu.Lock()
	now := o.now()
	for k, until := range o.ids {
		if now.After(until) {
			delete(o.ids, k)
		}
	}
	until := now.Add(sessionMaxAge)
	o.ids[id] = until
	o.mu.Unlock()
	if o.keep != nil {
		if err := o.keep.SetChannelState(ctx, signOutScope, "signout:"+id, strconv.FormatInt(until.Unix(), 10)); err != nil {
			o.log.Warn("dashboard sign-out not kept in the store: a restart would accept its cookie again", "err", err)
		}
	}
}

// has reports whether sign-in id was signed out. What the store cannot
// answer counts as signed out (the dashboard needs the store anyway).
func (o *signOuts) has(ctx context.Context, id string) bool {
	o.mu.Lock()
	_, ok := o.ids[id]
	o.mu.Unlock()
	if ok || o.keep == nil {
		return ok
	}
	v, ok, err := o.keep.ChannelState(ctx, signOutScope, "signout:"+id)
	if err != nil {
		o.log.Warn("dashboard sign-in refused: its sign-out could not be looked up", "err", err)
		return true
	}
	if !ok {
		return false
	}
	sec, _ := strconv.ParseInt(v, 10, 64)
	if until := time.Unix(sec, 0); o.now().Before(until) {
		o.mu.Lock()
		o.ids[id] = until
		o.mu.Unlock()
	}
	return true
}

// operator names who uses the dashboard, for the web chat's session: each
// sign-in is one ("dashboard-" and the start of its id); a client with
// the bearer token is "dashboard-bearer"; without a token (loopback only)
// everyone is "dashboard".
func (s *Server) operator(r *http.Request) string {
	if s.opts.Token == "" {
		return "dashboard"
	}
	if id, ok := s.signedIn(r); ok {
		return "dashboard-" + id[:12]
	}
	return "dashboard-bearer"
}

// logout ends the browser's sign-in (POST /logout, with the CSRF token)
// and shows the sign-in form again.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if !csrfOK(r) {
		s.log.Warn("dashboard logout refused: missing or wrong form token (csrf)", "remote", r.RemoteAddr)
		http.Error(w, "the form expired or did not come from this page; reload it and sign out again", http.StatusForbidden)
		return
	}
	if id, ok := s.signedIn(r); ok {
		s.signedOut.add(r.Context(), id)
		s.log.Info("dashboard sign-out", "remote", r.RemoteAddr)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secureRequest(r)})
	http.Redirect(w, r, "/?signed_out=1", http.StatusSeeOther)
}

// bearer requires the token on API routes (when one is configured). A
// request without it is answered at once and its connection closed: its
// body is never read.
func (s *Server) bearer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Token == "" {
			next.ServeHTTP(w, r)
			return
		}
		s.guarded(w, r, next, func() {
			w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard"`)
			httpjson.Error(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
				"missing or wrong bearer token: send the http.token as \"Authorization: Bearer TOKEN\"")
		})
	})
}

// dashboard requires the token, or the login cookie, on dashboard pages;
// without either it shows the login form (and never reads a body).
func (s *Server) dashboard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Token == "" || s.cookieOK(r) {
			next.ServeHTTP(w, r)
			return
		}
		s.guarded(w, r, next, func() { s.renderLogin(w, r, http.StatusUnauthorized, "") })
	})
}

// guarded serves r with next when it carries the right bearer token;
// otherwise it answers 429 to a client waiting out its wrong tokens, or
// calls refuse; either way without reading the body.
func (s *Server) guarded(w http.ResponseWriter, r *http.Request, next http.Handler, refuse func()) {
	c, wait := s.checkBearer(r)
	switch c {
	case credOK:
		next.ServeHTTP(w, r)
	case credWait:
		tooManyGuesses(w, wait)
	default:
		refuseBody(w)
		refuse()
	}
}

// login checks the token typed into the login form and sets the cookie.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if s.opts.Token == "" {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if wait := s.guesses.wait(r); wait > 0 { // checked before the form is read
		tooManyGuesses(w, wait)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if !csrfOK(r) {
		s.log.Warn("dashboard login refused: missing or wrong form token (csrf)", "remote", r.RemoteAddr)
		s.renderLogin(w, r, http.StatusForbidden, "The form expired or did not come from this page; sign in again.")
		return
	}
	if !s.tokenOK(r.PostFormValue("token")) {
		s.guesses.failed(r)
		s.log.Warn("dashboard login failed", "remote", r.RemoteAddr)
		s.renderLogin(w, r, http.StatusUnauthorized, "That is not the token.")
		return
	}
	s.guesses.succeeded(r)
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: s.newSession(), Path: "/",
		MaxAge: int(sessionMaxAge / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: secureRequest(r),
	})
	next := r.PostFormValue("next")
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.Contains(next, `\`) {
		next = "/"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}
