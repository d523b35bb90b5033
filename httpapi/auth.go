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

// bearerOK reports whether r carries "Authorization: Bearer TOKEN".
func (s *Server) bearerOK(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && s.tokenOK(strings.TrimSpace(tok))
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

// bearer requires the token on API routes (when one is configured).
func (s *Server) bearer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Token == "" || s.bearerOK(r) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard"`)
		httpjson.Error(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
			"missing or wrong bearer token: send the http.token as \"Authorization: Bearer TOKEN\"")
	})
}

// dashboard requires the token, or the login cookie, on dashboard pages;
// without either it shows the login form.
func (s *Server) dashboard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Token == "" || s.bearerOK(r) || s.cookieOK(r) {
			next.ServeHTTP(w, r)
			return
		}
		s.renderLogin(w, r, http.StatusUnauthorized, "")
	})
}

// login checks the token typed into the login form and sets the cookie.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if s.opts.Token == "" {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if !csrfOK(r) {
		s.log.Warn("dashboard login refused: missing or wrong form token (csrf)", "remote", r.RemoteAddr)
		s.renderLogin(w, r, http.StatusForbidden, "The form expired or did not come from this page; sign in again.")
		return
	}
	if !s.tokenOK(r.PostFormValue("token")) {
		s.log.Warn("dashboard login failed", "remote", r.RemoteAddr)
		s.renderLogin(w, r, http.StatusUnauthorized, "That is not the token.")
		return
	}
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
