package discord

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/bwmarrin/discordgo"
)

// libraryAPIPrefix is the path discordgo puts before every REST route.
var libraryAPIPrefix = "/api/v" + discordgo.APIVersion

// cdnHosts serve attachments; they are rewritten too when APIBase points
// somewhere other than Discord, so tests download from the fake.
var cdnHosts = map[string]bool{"cdn.discordapp.com": true, "media.discordapp.net": true}

// rewriter routes discordgo's hard-coded https://discord.com/api/v9 calls to
// APIBase and, if set, answers GET /gateway with the GatewayURL override. It
// leaves discordgo's package globals alone, so adapters with different
// bases can live in one process.
type rewriter struct {
	base    http.RoundTripper
	api     *url.URL // APIBase
	cdn     bool     // rewrite CDN hosts to api's host
	gateway string   // override for the /gateway answer
}

func (rw *rewriter) RoundTrip(r *http.Request) (*http.Response, error) {
	switch {
	case r.URL.Host == "discord.com" && strings.HasPrefix(r.URL.Path, libraryAPIPrefix+"/"):
		rest := strings.TrimPrefix(r.URL.EscapedPath(), libraryAPIPrefix)
		if rw.gateway != "" && r.Method == http.MethodGet && rest == "/gateway" {
			return gatewayResponse(r, rw.gateway), nil
		}
		raw := strings.TrimSuffix(rw.api.EscapedPath(), "/") + rest
		path, err := url.PathUnescape(raw)
		if err != nil {
			return nil, fmt.Errorf("discord: rewrite path: %w", err)
		}
		r = rw.retarget(r)
		r.URL.Path, r.URL.RawPath = path, raw
	case rw.cdn && cdnHosts[r.URL.Host]:
		r = rw.retarget(r)
	}
	return rw.base.RoundTrip(r)
}

func (rw *rewriter) retarget(r *http.Request) *http.Request {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = rw.api.Scheme, rw.api.Host, ""
	return r
}

func gatewayResponse(r *http.Request, gw string) *http.Response {
	if r.Body != nil {
		r.Body.Close()
	}
	b, _ := json.Marshal(map[string]string{"url": gw})
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(strings.NewReader(string(b))),
		ContentLength: int64(len(b)),
		Request:       r,
	}
}

// redactedError hides secrets in an error's text while keeping the chain
// for errors.Is and errors.As.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactor replaces secrets (the bot token) in text.
type redactor struct{ r *strings.Replacer }

func newRedactor(secrets ...string) redactor {
	var pairs []string
	for _, s := range secrets {
		if s != "" {
			pairs = append(pairs, s, "[redacted]")
		}
	}
	return redactor{r: strings.NewReplacer(pairs...)}
}

func (rd redactor) string(s string) string { return rd.r.Replace(s) }

// wrap returns fmt.Errorf(format+": %w", args..., err) with secrets removed
// from the text.
func (rd redactor) wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &redactedError{msg: rd.string(fmt.Sprintf(format, args...) + ": " + err.Error()), err: err}
}

// discordgo logs through one package-level hook, discordgo.Logger, which has
// no session argument. The adapter installs it once; it formats the line,
// removes every registered adapter's token and logs through the logger of
// the most recently started adapter.
var libLog struct {
	once  sync.Once
	mu    sync.Mutex
	sinks []*libSink // adapters whose Run is in progress
	last  *libSink   // the last one to stop, for lines after shutdown
}

type libSink struct {
	log    *slog.Logger
	redact redactor
}

func registerLibLog(s *libSink) (unregister func()) {
	libLog.once.Do(func() { discordgo.Logger = libLogger })
	libLog.mu.Lock()
	libLog.sinks = append(libLog.sinks, s)
	libLog.mu.Unlock()
	return func() {
		libLog.mu.Lock()
		defer libLog.mu.Unlock()
		for i, x := range libLog.sinks {
			if x == s {
				libLog.sinks = append(libLog.sinks[:i], libLog.sinks[i+1:]...)
				libLog.last = s
				return
			}
		}
	}
}

func libLogger(level, _ int, format string, args ...any) {
	libLog.mu.Lock()
	sinks, last := append([]*libSink(nil), libLog.sinks...), libLog.last
	libLog.mu.Unlock()
	lvl := slogLevel(level)
	if len(sinks) == 0 && last != nil {
		// After Run: a goroutine of the closed session that raced with
		// Close (a heartbeat on the closed socket) has nothing to report.
		sinks, lvl = []*libSink{last}, slog.LevelDebug
	}
	msg := strings.TrimSpace(fmt.Sprintf(format, args...))
	for _, s := range sinks {
		msg = s.redact.string(msg)
	}
	log := slog.Default()
	if len(sinks) > 0 {
		log = sinks[len(sinks)-1].log
	}
	if strings.HasPrefix(format, "Expected READY/RESUMED") {
		// Discord replays missed events before RESUMED, so v0.28.1 warns on
		// every resume that had any, dumping the event. Expected: debug.
		lvl = slog.LevelDebug
	}
	log.Log(context.Background(), lvl, msg, "lib", "discordgo")
}

func slogLevel(l int) slog.Level {
	switch l {
	case discordgo.LogError:
		return slog.LevelError
	case discordgo.LogWarning:
		return slog.LevelWarn
	default: // the library's informational lines are chatty: our debug

		return slog.LevelDebug
	}
}
