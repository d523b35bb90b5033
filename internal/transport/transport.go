// Package transport holds the HTTP transport the gateway's clients share
// the settings of: one that keeps connections for reuse.
package transport

import "net/http"

// Reusing is http.DefaultTransport keeping up to 64 idle connections per
// host instead of 2: in a burst of turns, every request to the model or the
// platform would otherwise dial (and for HTTPS, handshake) anew.
func Reusing() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return t
}
