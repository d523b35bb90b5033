package httpapi

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The pairing page lists the users admitted by pairing, each with a
// Revoke button; revoking (with the dashboard's authentication and the
// CSRF token) takes the approval back, as `switchboard pairing revoke`
// does; a user not admitted by pairing is a 404 saying so.
func TestPairedUsersRevoke(t *testing.T) {
	s := newStack(t, func(o *Options) { o.Token = testToken })
	ctx := t.Context()
	if _, _, err := s.store.PairingCodeIn(ctx, "telegram", "42", "42", "ada", "ADA22222", time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.ApprovePairing(ctx, "ADA22222"); err != nil {
		t.Fatal(err)
	}
	code, page := s.do("GET", "/pairing", "", nil)
	for _, want := range []string{`id="paired"`, `data-user="telegram:42"`, `action="/pairing/revoke"`, `name="user" value="42"`, ">Revoke</button>"} {
		if code != http.StatusOK || !strings.Contains(page, want) {
			t.Errorf("GET /pairing: %d, lacks %q", code, want)
		}
	}
	csrf, cookie := pairingForm(t, s)
	post := func(body url.Values, header map[string]string) (int, string) {
		t.Helper()
		h := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie}
		for k, v := range header {
			h[k] = v
		}
		return send(t, "POST", s.url+"/pairing/revoke", "", body.Encode(), h)
	}
	bearer := map[string]string{"Authorization": "Bearer " + testToken}
	ada := url.Values{"channel": {"telegram"}, "user": {"42"}}
	if code, _ := post(ada, bearer); code != http.StatusForbidden || !approved(t, s.store, "42") {
		t.Fatalf("revoke without the csrf token: %d; want 403 and ada still approved", code)
	}
	ada.Set("csrf", csrf)
	if code, _ := post(ada, nil); code != http.StatusUnauthorized || !approved(t, s.store, "42") {
		t.Fatalf("revoke without authentication: %d; want 401", code)
	}
	if code, _ := post(ada, bearer); code != http.StatusSeeOther || approved(t, s.store, "42") {
		t.Fatalf("revoke: %d, ada approved %v; want 303 and revoked", code, approved(t, s.store, "42"))
	}
	if code, page := s.do("GET", "/pairing?revoked=telegram+user+42", "", nil); code != http.StatusOK ||
		!strings.Contains(page, "Revoked telegram user 42") || strings.Contains(page, `data-user="telegram:42"`) || !strings.Contains(page, `id="no-paired"`) {
		t.Errorf("pairing page after the revoke: %d\n%s", code, page)
	}
	if code, page := post(ada, bearer); code != http.StatusNotFound || !strings.Contains(page, "is not admitted by pairing") {
		t.Errorf("revoke again: %d, want 404 saying so", code)
	}
}
