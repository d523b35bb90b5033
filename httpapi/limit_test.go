package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// clock is a time the test moves by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// clockServer is a server with a token and a clock the test moves, for
// requests straight to its handler.
func clockServer(t *testing.T) (*Server, *clock) {
	t.Helper()
	c := &clock{now: time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)}
	s, err := New(Options{Listen: "0.0.0.0:8080", Token: testToken, Version: "v-test", Store: pingStore{}, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// pingStore is a store that only answers Ping (for /readyz).
type pingStore struct{ Store }

func (pingStore) Ping(context.Context) error { return nil }

const testCSRF = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// loginAttempt posts the login form with token from remote and returns the
// status.
func loginAttempt(s *Server, remote, token string) int {
	form := url.Values{"token": {token}, "csrf": {testCSRF}, "next": {"/"}}
	req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(form.Encode()))
	req.Host, req.RemoteAddr = "127.0.0.1:8080", remote
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: csrfCookie, Value: testCSRF})
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec.Code
}

// bearerAttempt asks GET path with token from remote and returns the
// status and body.
func bearerAttempt(s *Server, remote, path, token string) (int, string) {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Host, req.RemoteAddr = "127.0.0.1:8080", remote
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// An attacker guessing at 3,000 a second (what one client managed against
// /login before) for a minute of the test's clock gets only a handful of
// guesses checked; the operator at another address is never held up, and
// the attacker's own address is let in with the right token once it stops.
func TestGuessingIsSlowed(t *testing.T) {
	const (
		rate    = 3000
		seconds = 20
	)
	for _, kind := range []string{"login", "bearer"} {
		t.Run(kind, func(t *testing.T) {
			s, c := clockServer(t)
			attacker, operator := "203.0.113.7:40000", "198.51.100.9:50000"
			try := func(remote, token string) int {
				if kind == "login" {
					return loginAttempt(s, remote, token)
				}
				code, _ := bearerAttempt(s, remote, "/readyz", token)
				return code
			}
			checked, refused := 0, 0
			for i := range rate * seconds {
				c.advance(time.Second / rate)
				switch code := try(attacker, fmt.Sprintf("guess-%d", i)); code {
				case http.StatusUnauthorized:
					checked++
				case http.StatusTooManyRequests:
					refused++
				default:
					t.Fatalf("guess %d: status %d", i, code)
				}
				if i == rate*seconds/2 {
					if code := try(operator, testToken); code == http.StatusUnauthorized || code == http.StatusTooManyRequests {
						t.Errorf("the operator at another address during the attack: %d", code)
					}
				}
			}
			perSecond := float64(checked) / seconds
			t.Logf("%s: %d guesses sent at %d/s for %ds of the test's clock: %d checked (%.2f/s), %d refused unchecked",
				kind, rate*seconds, rate, seconds, checked, perSecond, refused)
			if checked > 12 || perSecond > 1 {
				t.Errorf("%d guesses checked in %ds (%.2f/s): want a handful, far below %d/s", checked, seconds, perSecond, rate)
			}
			// Once the attacker stops, its address waits at most maxGuessWait.
			c.advance(maxGuessWait)
			if code := try(attacker, testToken); code == http.StatusUnauthorized || code == http.StatusTooManyRequests {
				t.Errorf("the right token from the attacker's address %s after it stopped: %d", maxGuessWait, code)
			}
			// Success reset the count: a typo is free again.
			if code := try(attacker, "typo"); code != http.StatusUnauthorized {
				t.Errorf("a wrong token after a success: %d, want 401", code)
			}
		})
	}
}

// The wait doubles per wrong token past the free ones, and is capped.
func TestGuessWaits(t *testing.T) {
	c := &clock{now: time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)}
	l := newGuessLimiter(c.Now)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "[2001:db8::1]:4000"
	other := httptest.NewRequest(http.MethodGet, "/", nil)
	other.RemoteAddr = "[2001:db8::2]:4000" // the same /64: the same client
	var got []time.Duration
	for range freeGuesses + 12 {
		l.failed(r)
		got = append(got, l.wait(other))
	}
	want := []time.Duration{0, 0, 0, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond, 12800 * time.Millisecond, 25600 * time.Millisecond,
		30 * time.Second, 30 * time.Second, 30 * time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("waits %v, want %v", got, want)
	}
}

// The table of clients stays bounded however many addresses guess.
func TestGuessTableIsBounded(t *testing.T) {
	c := &clock{now: time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)}
	l := newGuessLimiter(c.Now)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	for i := range maxGuessClients + 500 {
		r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255)
		l.failed(r)
		c.advance(time.Millisecond)
	}
	if n := len(l.clients); n > maxGuessClients {
		t.Errorf("%d clients remembered, want at most %d", n, maxGuessClients)
	}
}

// /healthz tells a caller without the token "ok" and nothing else; with
// the token, the version and uptime.
func TestHealthzSaysOnlyOK(t *testing.T) {
	s, c := clockServer(t)
	c.advance(90 * time.Second)
	for _, token := range []string{"", "wrong-token-0123456789"} {
		code, body := bearerAttempt(s, "192.0.2.1:1", "/healthz", token)
		if code != http.StatusOK || body != "ok" {
			t.Errorf("healthz with token %q: %d %q, want 200 \"ok\"", token, code, body)
		}
	}
	code, body := bearerAttempt(s, "192.0.2.1:1", "/healthz", testToken)
	var detail struct {
		Status  string `json:"status"`
		Version string `json:"version"`
		Uptime  int    `json:"uptime_seconds"`
	}
	if err := json.Unmarshal([]byte(body), &detail); code != http.StatusOK || err != nil || detail.Version != "v-test" || detail.Uptime != 90 {
		t.Errorf("healthz with the token: %d %s (%v)", code, body, err)
	}
	// A server without a token (loopback only) says "ok" too: a web page
	// can reach it (/healthz passes the Host check).
	open, err := New(Options{Listen: "127.0.0.1:8080", Version: "v-test", Store: &flakyStore{}})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := bearerAttempt(open, "127.0.0.1:1", "/healthz", ""); code != http.StatusOK || body != "ok" {
		t.Errorf("healthz without a configured token: %d %q", code, body)
	}
	// The login page shows strangers no version either.
	_, body = bearerAttempt(s, "192.0.2.1:1", "/", "")
	if strings.Contains(body, "v-test") {
		t.Errorf("the login page shows the version to a stranger")
	}
}

// rawRequest writes head (and then body) on a fresh connection to the
// stack and returns what the server answered before closing, or failed
// after the failsafe (then err is a timeout).
func rawRequest(t *testing.T, base, head, body string, failsafe time.Duration) (status string, took time.Duration, err error) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, head+body); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(start.Add(failsafe))
	br := bufio.NewReader(conn)
	line, err := br.ReadString('\n')
	if err != nil {
		return "", time.Since(start), err
	}
	if _, err := io.Copy(io.Discard, br); err != nil { // until the server closes
		return strings.TrimSpace(line), time.Since(start), err
	}
	return strings.TrimSpace(line), time.Since(start), nil
}

// A client that sends its headers and then trickles (here: stops) its
// body is cut off at the body deadline, token or not.
func TestSlowBodyIsCutOff(t *testing.T) {
	s := newStack(t, func(o *Options) { o.Token = testToken; o.BodyTimeout = 300 * time.Millisecond })
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
		"Authorization: Bearer " + testToken + "\r\nContent-Length: 100000\r\n\r\n"
	status, took, err := rawRequest(t, s.url, head, `{"messages":[`, 10*time.Second)
	if err != nil {
		t.Fatalf("a body that never arrives held the connection open for %s: %v", took, err)
	}
	t.Logf("slow body: %q after %s", status, took.Round(time.Millisecond))
	if !strings.Contains(status, " 400 ") && !strings.Contains(status, " 408 ") {
		t.Errorf("slow body: %q, want 400 or 408", status)
	}
}

// A request without the token is answered at once and its body never
// read: the client need not even send it.
func TestUnauthenticatedBodyIsNotRead(t *testing.T) {
	s := newStack(t, func(o *Options) { o.Token = testToken })
	for _, tt := range []struct{ what, head string }{
		{"chat API without a token", "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"},
		{"chat API with a wrong token", "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAuthorization: Bearer nope\r\nContent-Length: 100000\r\n\r\n"},
		{"pairing form without a login", "POST /pairing/ABCD/approve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\n"},
	} {
		status, took, err := rawRequest(t, s.url, tt.head, "", 10*time.Second)
		if err != nil {
			t.Errorf("%s: no answer without the body (or the connection held open) after %s: %v", tt.what, took, err)
			continue
		}
		if !strings.Contains(status, "401") {
			t.Errorf("%s: %q, want 401", tt.what, status)
		}
	}
}

// The body deadline ends with the body: a turn that runs longer than it
// (the model takes 4× the deadline here) is answered, not cut off.
func TestBodyDeadlineSparesLongTurns(t *testing.T) {
	s := newStack(t, func(o *Options) { o.Token = testToken; o.BodyTimeout = 100 * time.Millisecond })
	s.fake.Push(testkit.Reply{Text: "Worth the wait.", Delay: 400 * time.Millisecond})
	if got, _ := s.chat("ada", "take your time"); got != "Worth the wait." {
		t.Errorf("a turn longer than the body deadline: %q", got)
	}
}
