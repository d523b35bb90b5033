package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/httpjson"
)

const (
	// sessionCookie holds the dashboard login: an HMAC of the token, so the
	// token itself never sits in the browser.
	sessionCookie = "switchboard_session"
	sessionMaxAge = 30 * 24 * time.Hour
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

// sessionValue is what the login cookie holds.
func (s *Server) sessionValue() string {
	mac := hmac.New(sha256.New, []byte(s.opts.Token))
	mac.Write([]byte("switchboard dashboard session v1"))
	return hex.EncodeToString(mac.Sum(nil))
}

func (s *Server) cookieOK(r *http.Request) bool {
	c, err := r.Cookie(sessionCookie)
	return err == nil && hmac.Equal([]byte(c.Value), []byte(s.sessionValue()))
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
		Name: sessionCookie, Value: s.sessionValue(), Path: "/",
		MaxAge: int(sessionMaxAge / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: secureRequest(r),
	})
	next := r.PostFormValue("next")
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.Contains(next, `\`) {
		next = "/"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}
