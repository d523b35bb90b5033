package httpapi

// The dashboard's forms (the login, and the approve and deny buttons of
// pairing requests) carry a CSRF token: a random value kept in an
// HTTP-only, same-site cookie for the browser session and repeated in a
// hidden field; the POST must bring both, equal. A page on
// another site can make the browser post the form but cannot read the
// value to put in the field.

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

const (
	csrfCookie = "switchboard_csrf"
	csrfField  = "csrf"
	csrfBytes  = 32
)

// csrfToken returns the browser's form token, setting a new cookie when it
// brings none (or a malformed one). Call it before writing the response.
func csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && wellFormedCSRF(c.Value) {
		return c.Value
	}
	v := hex.EncodeToString(randomBytes(csrfBytes))
	http.SetCookie(w, &http.Cookie{
		Name: csrfCookie, Value: v, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secureRequest(r),
	})
	return v
}

// csrfOK reports whether a form POST carries the token of its cookie.
func csrfOK(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || !wellFormedCSRF(c.Value) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(r.PostFormValue(csrfField)), []byte(c.Value)) == 1
}

// csrfHeader carries the form token on the web chat's script requests.
const csrfHeader = "X-Switchboard-CSRF"

// csrfHeaderOK reports whether a script's request carries the token of its
// cookie in csrfHeader.
func csrfHeaderOK(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || !wellFormedCSRF(c.Value) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(r.Header.Get(csrfHeader)), []byte(c.Value)) == 1
}

func wellFormedCSRF(v string) bool {
	b, err := hex.DecodeString(v)
	return err == nil && len(b) == csrfBytes
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return b
}

// secureRequest reports whether the browser reached the server over HTTPS
// (directly or through a TLS-terminating proxy), so cookies get Secure.
func secureRequest(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}
