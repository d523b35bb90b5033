package discord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
)

// roundTrip records the request it is given.
type roundTrip struct{ got *http.Request }

func (rt *roundTrip) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.got = r
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
}

func TestRewriter(t *testing.T) {
	tests := []struct {
		name, api, in string
		want          string // final URL, escaped
	}{
		{"REST to the fake", "http://127.0.0.1:8080/api/v9", "https://discord.com/api/v9/channels/1/messages",
			"http://127.0.0.1:8080/api/v9/channels/1/messages"},
		{"other path prefix, escaped emoji kept", "http://127.0.0.1:8080/proxy/discord/", "https://discord.com/api/v9/channels/1/messages/2/reactions/%F0%9F%91%8D/@me",
			"http://127.0.0.1:8080/proxy/discord/channels/1/messages/2/reactions/%F0%9F%91%8D/@me"},
		{"CDN to the fake", "http://127.0.0.1:8080/api/v9", "https://cdn.discordapp.com/attachments/1/2/a.png?ex=1",
			"http://127.0.0.1:8080/attachments/1/2/a.png?ex=1"},
		{"CDN left alone in production", DefaultAPIBase, "https://cdn.discordapp.com/attachments/1/2/a.png",
			"https://cdn.discordapp.com/attachments/1/2/a.png"},
		{"REST unchanged in production", DefaultAPIBase, "https://discord.com/api/v9/users/@me",
			"https://discord.com/api/v9/users/@me"},
		{"other hosts left alone", "http://127.0.0.1:8080/api/v9", "https://example.com/api/v9/x",
			"https://example.com/api/v9/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api, _ := url.Parse(tt.api)
			rt := &roundTrip{}
			rw := &rewriter{base: rt, api: api, cdn: api.Host != "discord.com"}
			req, _ := http.NewRequest(http.MethodGet, tt.in, nil)
			resp, err := rw.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := rt.got.URL.String(); got != tt.want {
				t.Errorf("URL = %s, want %s", got, tt.want)
			}
			if rt.got.Host != "" && rt.got.Host != rt.got.URL.Host {
				t.Errorf("Host header %q differs from URL host %q", rt.got.Host, rt.got.URL.Host)
			}
		})
	}
}

func TestGatewayOverride(t *testing.T) {
	a, err := New(Options{Token: "Bot abc", GatewayURL: "ws://127.0.0.1:9/custom-gw"})
	if err != nil {
		t.Fatal(err)
	}
	// Answered by the transport: nothing listens on the API base.
	gw, err := a.s.Gateway()
	if err != nil || gw != "ws://127.0.0.1:9/custom-gw/" {
		t.Errorf("gateway = %q, %v", gw, err)
	}
	if a.s.Token != "Bot abc" || a.s.Identify.Intents != intents {
		t.Errorf("token %q / intents %d: the Bot prefix must not be doubled", a.s.Token, a.s.Identify.Intents)
	}
	if a.Name() != "discord" {
		t.Errorf("name = %q", a.Name())
	}
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		o    Options
		want string
	}{
		{Options{}, "token is required"},
		{Options{Token: "Bot "}, "token is required"},
		{Options{Token: "t", APIBase: "discord.com/api"}, "api base"},
		{Options{Token: "t", APIBase: "ftp://x/api"}, "api base"},
		{Options{Token: "t", GatewayURL: "http://x/gw"}, "gateway url"},
	}
	for _, tt := range tests {
		_, err := New(tt.o)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want an error about %q", tt.o, err, tt.want)
		}
	}
}

func TestRetryWait(t *testing.T) {
	rl := func(d time.Duration) error {
		return &discordgo.RateLimitError{RateLimit: &discordgo.RateLimit{TooManyRequests: &discordgo.TooManyRequests{RetryAfter: d}}}
	}
	rest := func(code int) error {
		return &discordgo.RESTError{Response: &http.Response{StatusCode: code, Status: fmt.Sprint(code)}}
	}
	tests := []struct {
		name               string
		err                error
		wait               time.Duration
		rateLimited, retry bool
	}{
		{"429 waits retry_after", fmt.Errorf("send: %w", rl(250*time.Millisecond)), 250 * time.Millisecond, true, true},
		{"429 too long to wait", rl(2 * time.Minute), 0, true, false},
		{"503 backs off", rest(503), time.Second, false, true},
		{"400 is final", rest(400), 0, false, false},
		{"403 is final", rest(403), 0, false, false},
		{"network error backs off", errors.New("dial tcp: connection refused"), time.Second, false, true},
		{"canceled is final", fmt.Errorf("x: %w", context.Canceled), 0, false, false},
		{"permanent is final", permanent{errors.New("encode")}, 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wait, limited, ok := retryWait(tt.err, time.Second)
			if wait != tt.wait || limited != tt.rateLimited || ok != tt.retry {
				t.Errorf("got %v %v %v, want %v %v %v", wait, limited, ok, tt.wait, tt.rateLimited, tt.retry)
			}
		})
	}
}

func TestRedactorKeepsChain(t *testing.T) {
	rd := newRedactor("Bot s3cret", "s3cret")
	inner := &discordgo.RESTError{Response: &http.Response{StatusCode: 401, Status: "401 Unauthorized"}, ResponseBody: []byte("token s3cret")}
	err := rd.wrap(inner, "discord: send to %s", "c1")
	var re *discordgo.RESTError
	if strings.Contains(err.Error(), "s3cret") || !errors.As(err, &re) || err.Error() != "discord: send to c1: HTTP 401 Unauthorized, token [redacted]" {
		t.Errorf("err = %q (as RESTError: %v)", err, errors.As(err, &re))
	}
	if rd.wrap(nil, "x") != nil {
		t.Error("wrap(nil) != nil")
	}
}
