package httpapi

// Pairing requests on the dashboard: the pending ones, each with an
// approve and a deny button. Approving does what `switchboard pairing
// approve CODE` does (store.ApprovePairing: the user is admitted at once,
// and, as with the command, not messaged); denying ends the request
// (store.DenyPairing). Both are form POSTs behind the dashboard's
// authentication and the CSRF token of csrf.go, and, like every
// state-changing request, refused from another origin (guard.go).

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/switchboard-gateway/switchboard/store"
)

// pairingView is the pairing page's data.
type pairingView struct {
	Title   string
	Head    head
	CSRF    string
	Pending []store.Pairing
	Paired  []store.ApprovedUser // admitted by pairing, each with a Revoke button (paired.go)
	Done    string               // what the last action did
	Error   string
}

// pairingPage lists the pending requests.
func (s *Server) pairingPage(w http.ResponseWriter, r *http.Request) (string, any, error) {
	v, err := s.pairingData(w, r)
	if code := r.URL.Query().Get("approved"); code != "" {
		v.Done = fmt.Sprintf("Approved request %s: that user can talk to the bot now.", code)
	} else if code := r.URL.Query().Get("denied"); code != "" {
		v.Done = fmt.Sprintf("Denied request %s: its code no longer works.", code)
	} else if who := r.URL.Query().Get("revoked"); who != "" {
		v.Done = fmt.Sprintf("Revoked %s: their next message is refused.", who)
	}
	return "pairing.html", v, err
}

func (s *Server) pairingData(w http.ResponseWriter, r *http.Request) (*pairingView, error) {
	list, err := s.opts.Store.PendingPairings(r.Context())
	v := &pairingView{Title: "Pairing", Head: s.head(r), CSRF: csrfToken(w, r), Pending: list}
	if err == nil {
		v.Paired, err = s.opts.Store.ApprovedUsers(r.Context())
	}
	return v, err
}

// pairingAction handles POST /pairing/{code}/approve and .../deny.
func (s *Server) pairingAction(approve bool) http.Handler {
	return s.dashboard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 4096)
		code := r.PathValue("code")
		if !csrfOK(r) {
			s.log.Warn("dashboard pairing action refused: missing or wrong form token (csrf)", "remote", r.RemoteAddr)
			s.pairingError(w, r, http.StatusForbidden, "The form expired or did not come from this page; nothing was changed. Try again.")
			return
		}
		var (
			p    store.Pairing
			err  error
			verb = "denied"
		)
		if approve {
			p, err = s.opts.Store.ApprovePairing(r.Context(), code)
			verb = "approved"
		} else {
			p, err = s.opts.Store.DenyPairing(r.Context(), code)
		}
		switch {
		case errors.Is(err, store.ErrNotFound):
			s.pairingError(w, r, http.StatusNotFound, fmt.Sprintf("No pending request has the code %q: it was approved, denied or has expired.", code))
			return
		case errors.Is(err, store.ErrPairingExpired):
			s.pairingError(w, r, http.StatusConflict, fmt.Sprintf("Request %s has expired or was denied; the user gets a new code by writing to the bot again.", code))
			return
		case err != nil:
			s.log.Error("dashboard pairing action", "action", verb, "err", err)
			s.pairingError(w, r, http.StatusInternalServerError, "The request could not be changed; see the server log.")
			return
		}
		s.log.Info("pairing "+verb+" from the dashboard", "channel", p.Channel, "user_id", p.UserID,
			"username", p.Username, "remote", r.RemoteAddr)
		http.Redirect(w, r, "/pairing?"+url.Values{verb: {p.Code}}.Encode(), http.StatusSeeOther)
	}))
}

// pairingError shows the pairing page again with what went wrong.
func (s *Server) pairingError(w http.ResponseWriter, r *http.Request, code int, msg string) {
	v, err := s.pairingData(w, r)
	if err != nil {
		s.log.Error("dashboard pairing page", "err", err)
	}
	v.Error = msg
	s.render(w, code, "pairing.html", v)
}
