package httpapi

// The users admitted by pairing, on the pairing page, each with a Revoke
// button: it does what `switchboard pairing revoke CHANNEL USER_ID` does
// (store.RevokeUser; their next message is refused, and where pairing is
// on they get a new code). A form POST behind the dashboard's
// authentication, the CSRF token and the cross-origin guard, like the
// approve and deny buttons (pairing.go).

import (
	"fmt"
	"net/http"
	"net/url"
)

// pairingRevoke handles POST /pairing/revoke (form fields channel, user).
func (s *Server) pairingRevoke() http.Handler {
	return s.dashboard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 4096)
		if !csrfOK(r) {
			s.log.Warn("dashboard revoke refused: missing or wrong form token (csrf)", "remote", r.RemoteAddr)
			s.pairingError(w, r, http.StatusForbidden, "The form expired or did not come from this page; nothing was changed. Try again.")
			return
		}
		channel, user := r.PostFormValue("channel"), r.PostFormValue("user")
		if channel == "" || user == "" {
			s.pairingError(w, r, http.StatusBadRequest, "Say which user to revoke (channel and user id); nothing was changed.")
			return
		}
		ok, err := s.opts.Store.RevokeUser(r.Context(), channel, user)
		switch {
		case err != nil:
			s.log.Error("dashboard revoke", "err", err)
			s.pairingError(w, r, http.StatusInternalServerError, "The user could not be revoked; see the server log.")
			return
		case !ok:
			s.pairingError(w, r, http.StatusNotFound, fmt.Sprintf("%s user %s is not admitted by pairing (already revoked, or listed in allow_users, which the configuration changes).", channel, user))
			return
		}
		s.log.Info("pairing revoked from the dashboard", "channel", channel, "user_id", user, "remote", r.RemoteAddr)
		http.Redirect(w, r, "/pairing?"+url.Values{"revoked": {channel + " user " + user}}.Encode(), http.StatusSeeOther)
	}))
}
