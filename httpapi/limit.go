package httpapi

// What keeps a client from guessing the token or holding connections
// open: wrong tokens (bearer or login form) slow that client down, and
// request bodies must arrive within a deadline.

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

const (
	// freeGuesses is how many wrong tokens in a row a client may send
	// before it has to wait: an operator's typos cost nothing.
	freeGuesses = 3
	// firstGuessWait is the wait after the first counted wrong token; it
	// doubles with each further one, up to maxGuessWait.
	firstGuessWait = 100 * time.Millisecond
	// maxGuessWait caps the wait, so that an attacker sharing the
	// operator's address (a proxy, a NAT) cannot lock the operator out for
	// longer than this once it stops; the dashboard's login cookie is never
	// refused.
	maxGuessWait = 30 * time.Second
	// forgetGuesses is how long after its last wrong token a client's
	// count is forgotten.
	forgetGuesses = 15 * time.Minute
	// maxGuessClients bounds the table of clients with wrong tokens; when
	// it is full, the longest quiet one is dropped.
	maxGuessClients = 4096
	// DefaultBodyTimeout is how long a request body may take to arrive
	// (a 16 MB chat request with images at 2 Mbit/s); a slower client is cut off.
	DefaultBodyTimeout = time.Minute
)

// guessState is one client's record of wrong tokens.
type guessState struct {
	wrong int       // wrong tokens in a row
	until time.Time // no token is checked before then
	last  time.Time // the last wrong token
}

// guessLimiter slows token guessing per client (per IP address; IPv6 per
// /64, which one host usually owns): after freeGuesses wrong tokens in a
// row, each further one makes the client wait firstGuessWait, doubling up
// to maxGuessWait, before its next token is even checked. A right token
// resets the count.
type guessLimiter struct {
	mu      sync.Mutex
	now     func() time.Time
	clients map[netip.Prefix]*guessState
}

func newGuessLimiter(now func() time.Time) *guessLimiter {
	return &guessLimiter{now: now, clients: map[netip.Prefix]*guessState{}}
}

// clientKey is the client of r: its IP address (IPv6: its /64).
func clientKey(r *http.Request) netip.Prefix {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{} // one shared record for unparsable addresses
	}
	ip = ip.Unmap()
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}

// wait reports how long the client of r must still wait before a token
// of its is checked; 0: check it now.
func (l *guessLimiter) wait(r *http.Request) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.clients[clientKey(r)]
	if st == nil {
		return 0
	}
	return max(st.until.Sub(l.now()), 0)
}

// failed counts a wrong token from the client of r.
func (l *guessLimiter) failed(r *http.Request) {
	key, now := clientKey(r), l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.clients[key]
	if st != nil && now.Sub(st.last) > forgetGuesses {
		st = nil
	}
	if st == nil {
		if len(l.clients) >= maxGuessClients {
			l.evict(now)
		}
		st = &guessState{}
		l.clients[key] = st
	}
	st.wrong++
	st.last = now
	if n := st.wrong - freeGuesses; n > 0 {
		wait := maxGuessWait
		if n <= 20 { // 100ms << 20 is far past the cap
			wait = min(firstGuessWait<<(n-1), maxGuessWait)
		}
		st.until = now.Add(wait)
	}
}

// succeeded forgets the client's wrong tokens.
func (l *guessLimiter) succeeded(r *http.Request) {
	key := clientKey(r)
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.clients, key)
}

// evict makes room: clients quiet for forgetGuesses go, and if none did,
// the one quiet the longest.
func (l *guessLimiter) evict(now time.Time) {
	var oldest netip.Prefix
	var oldestAt time.Time
	for k, st := range l.clients {
		if now.Sub(st.last) > forgetGuesses {
			delete(l.clients, k)
			continue
		}
		if oldestAt.IsZero() || st.last.Before(oldestAt) {
			oldest, oldestAt = k, st.last
		}
	}
	if len(l.clients) >= maxGuessClients {
		delete(l.clients, oldest)
	}
}

// refuseBody makes sure a refused request's body is never read: the
// connection closes after the answer, and reads end at once (without it
// the server would read up to 256 KB of the body after answering).
func refuseBody(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// tooManyGuesses answers a client that must wait out its wrong tokens
// (without reading its body).
func tooManyGuesses(w http.ResponseWriter, wait time.Duration) {
	refuseBody(w)
	w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
	http.Error(w, "too many wrong tokens from this address: wait "+wait.Round(time.Millisecond).String()+" before trying again", http.StatusTooManyRequests)
}

// bodyDeadline gives a request's body timeout to arrive: the read
// deadline is set before the handler reads it. net/http lifts it once the
// body has been read to its end (its background read, which notices a
// client that hangs up, runs without one), so a long streamed answer is
// not cut off. The headers have readHeaderTimeout.
func bodyDeadline(timeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			// Fails only where there is no connection to time (recorders).
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
		}
		next.ServeHTTP(w, r)
	})
}
