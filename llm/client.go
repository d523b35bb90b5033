package llm

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard-gateway/switchboard/internal/waitfor"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchboard-gateway/switchboard/internal/slots"
	"github.com/switchboard-gateway/switchboard/internal/transport"
)

// Config configures a Client. Zero values take the documented defaults.
type Config struct {
	BaseURL string // e.g. "https://api.openai.com/v1"
	APIKey  string // sent as a bearer token; redacted from every error and log line
	Model   string
	// FallbackModels are tried in order after Model fails with an error other
	// than a context-length, authentication or cancellation error, once its
	// retries are exhausted, and only if nothing of the call was streamed to
	// onDelta yet.
	FallbackModels []string
	// MaxRetries is the number of retries per model on 429, 5xx, timeouts
	// and transport errors. 0 means the default, 3; negative means none.
	MaxRetries int
	// MaxRetryWait bounds the total time one Complete call spends waiting
	// between retries (across models); a wait that would exceed it ends the
	// call with the last error instead. Default 60s.
	MaxRetryWait time.Duration
	// RequestTimeout bounds one attempt, stream included. Default 120s: long
	// answers from slow models stream for minutes.
	RequestTimeout time.Duration
	// StreamIdleTimeout ends an attempt that received no byte for this
	// long, before the answer's headers or within its stream; it is
	// retried like a timeout. 0: the default, 60s; negative: off.
	StreamIdleTimeout time.Duration
	// MaxConcurrentRequests caps the requests in flight to each model
	// (limit.go), for providers that rate-limit; 0: no cap.
	MaxConcurrentRequests int
	HTTPClient            *http.Client // default: a client without an overall timeout that keeps connections to the model for reuse
	Logger                *slog.Logger // default: discard
	// Sleep waits between retries; tests inject one. Default: a timer that
	// returns ctx.Err() when ctx ends first.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns the jitter in [0,1); tests inject one. Default math/rand/v2.
	Rand func() float64

	// Provider names the server's kind (Providers; provider.go); "":
	// detected from BaseURL. ProviderAzure sends requests to
	// BaseURL/openai/deployments/{model}/chat/completions with APIVersion
	// and the key in an api-key header.
	Provider string
	// APIVersion is Azure's api-version; "": the one in BaseURL's query,
	// else DefaultAzureAPIVersion.
	APIVersion string
	// Temperature is sent with every request but to reasoning models;
	// nil: none (the server's default).
	Temperature *float64
	// Models are per-model settings, by model name (Azure: deployment).
	Models map[string]ModelSettings
}

// Defaults of Config.
const (
	DefaultMaxRetries        = 3
	DefaultMaxRetryWait      = 60 * time.Second
	DefaultRequestTimeout    = 120 * time.Second
	DefaultStreamIdleTimeout = 60 * time.Second

	backoffBase = 500 * time.Millisecond
	backoffCap  = 20 * time.Second
)

// Client calls one OpenAI-compatible chat completions endpoint. It is safe
// for concurrent use.
type Client struct {
	cfg     Config
	api     *openai.Client
	enc     *encoder
	log     *slog.Logger
	redact  redactor
	retries int
	now     func() time.Time

	// limits are the request slots per model; nil without a cap (limit.go).
	limits map[string]*slots.Slots

	// noStreamOptions is set once the server rejected stream_options; later
	// calls leave it out (and get no usage).
	noStreamOptions atomic.Bool

	provider string // Config.Provider or detected (provider.go)
	quirks   quirks // learnt from the server's refusals
	// thinkHold holds the models seen to emit </think> without an opener
	// (reasoning.go): their answers are held until </think>.
	thinkHold sync.Map
}

// New validates cfg and returns a client. Errors name the offending field.
func New(cfg Config) (*Client, error) {
	red := redactor(cfg.APIKey)
	var problems []error
	if cfg.BaseURL == "" {
		problems = append(problems, errors.New("llm: config: BaseURL is empty"))
	} else if u, err := url.Parse(cfg.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		problems = append(problems, fmt.Errorf("llm: config: BaseURL %q is not an http(s) URL with a host", red.String(cfg.BaseURL)))
	}
	if strings.TrimSpace(cfg.Model) == "" {
		problems = append(problems, errors.New("llm: config: Model is empty"))
	}
	for i, m := range cfg.FallbackModels {
		if strings.TrimSpace(m) == "" {
			problems = append(problems, fmt.Errorf("llm: config: FallbackModels[%d] is empty", i))
		}
	}
	if cfg.MaxRetryWait < 0 {
		problems = append(problems, errors.New("llm: config: MaxRetryWait is negative"))
	}
	if cfg.RequestTimeout < 0 {
		problems = append(problems, errors.New("llm: config: RequestTimeout is negative"))
	}
	if cfg.MaxConcurrentRequests < 0 {
		problems = append(problems, errors.New("llm: config: MaxConcurrentRequests is negative"))
	}
	if err := checkProvider(cfg.Provider); err != nil {
		problems = append(problems, err)
	}
	if err := errors.Join(problems...); err != nil {
		return nil, err
	}

	c := &Client{cfg: cfg, redact: red, now: time.Now, enc: newEncoder()}
	c.cfg.FallbackModels = slices.Clone(cfg.FallbackModels)
	c.limits = newLimits(cfg.MaxConcurrentRequests, append([]string{cfg.Model}, cfg.FallbackModels...))
	switch {
	case cfg.MaxRetries == 0:
		c.retries = DefaultMaxRetries
	case cfg.MaxRetries > 0:
		c.retries = cfg.MaxRetries
	}
	if c.cfg.MaxRetryWait == 0 {
		c.cfg.MaxRetryWait = DefaultMaxRetryWait
	}
	if c.cfg.RequestTimeout == 0 {
		c.cfg.RequestTimeout = DefaultRequestTimeout
	}
	if c.cfg.StreamIdleTimeout == 0 {
		c.cfg.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	if c.cfg.Sleep == nil {
		c.cfg.Sleep = waitfor.Sleep
	}
	if c.cfg.Rand == nil {
		c.cfg.Rand = rand.Float64
	}
	c.log = cfg.Logger
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		httpClient = &http.Client{Transport: transport.Reusing()}
	}
	c.provider = cfg.Provider
	if c.provider == "" {
		c.provider = DetectProvider(cfg.BaseURL)
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if c.provider == ProviderAzure {
		az, err := parseAzure(cfg.BaseURL)
		if err != nil {
			return nil, fmt.Errorf("llm: config: BaseURL: %w", err)
		}
		oc = openai.DefaultAzureConfig(cfg.APIKey, az.root)
		oc.APIVersion = cmp.Or(cfg.APIVersion, az.apiVersion, DefaultAzureAPIVersion)
		oc.AzureModelMapperFunc = func(model string) string {
			if az.deployment != "" && model == cfg.Model {
				return az.deployment // the deployment the URL names serves the primary model
			}
			return model
		}
	}
	oc.HTTPClient = headerCapture{httpClient}
	c.api = openai.NewClientWithConfig(oc)
	return c, nil
}

// Model returns the primary model.
func (c *Client) Model() string { return c.cfg.Model }

// Provider returns the provider the client talks to: configured or
// detected from the base URL.
func (c *Client) Provider() string { return c.provider }

// callState is what one Complete call carries across attempts and models.
type callState struct {
	onDelta  func(Delta)
	calls    map[string]bool // Request.StreamCalls
	tools    []ToolSpec      // Request.Tools: calls written as text are recovered to these
	streamed bool            // some text or call fragment was handed to onDelta
	waited   time.Duration   // total wait between retries so far
	history  []Message       // the request's messages: answer ids are made unique among them
	forced   bool            // the request forces a tool call
}

// maxAdaptations bounds how often one call is sent again after the server
// taught the client something (provider.go): one per kind of refusal.
const maxAdaptations = 4

// Complete streams one model call, handing each text fragment, and each
// fragment of the calls of the tools named in req.StreamCalls, to onDelta
// (which may be nil) as it arrives, and returns the assembled answer. It
// retries and falls back as Config describes. Errors are *Error, or wrap
// ctx.Err() when ctx ended.
func (c *Client) Complete(ctx context.Context, req Request, onDelta func(Delta)) (Response, error) {
	call := &callState{onDelta: onDelta, tools: req.Tools, history: req.Messages, forced: req.ForceTool != ""}
	if onDelta == nil {
		call.onDelta = func(Delta) {}
	} else if len(req.StreamCalls) > 0 {
		call.calls = map[string]bool{}
		for _, n := range req.StreamCalls {
			call.calls[n] = true
		}
	}
	for adapted := 0; ; adapted++ {
		base, err := c.enc.encode(c.prepare(req))
		if err != nil {
			return Response{}, fmt.Errorf("llm: build request: %w", err)
		}
		resp, err := c.completeModels(ctx, call, base)
		var ad *adaptedError
		if errors.As(err, &ad) {
			if adapted < maxAdaptations && !call.streamed {
				continue
			}
			err = ad.err
		}
		return resp, err
	}
}

// completeModels tries the primary model, then the fallbacks.
func (c *Client) completeModels(ctx context.Context, call *callState, base *body) (Response, error) {
	models := append([]string{c.cfg.Model}, c.cfg.FallbackModels...)
	var lastErr error
	for i, model := range models {
		resp, err := c.completeModel(ctx, call, model, base)
		if err == nil {
			return resp, nil
		}
		lastErr = err
		if _, ok := errorsAs[*adaptedError](err); ok {
			break // sent again, to this model first
		}
		if i == len(models)-1 || !c.canFallBack(ctx, call, err) {
			break
		}
		c.log.Warn("llm: falling back to the next model", "model", model, "next", models[i+1], "err", err.Error())
	}
	return Response{}, lastErr
}

// adaptedError is a refusal the client learnt from: the call is sent
// again at once (Complete).
type adaptedError struct{ err *Error }

func (a *adaptedError) Error() string { return a.err.Error() }
func (a *adaptedError) Unwrap() error { return a.err }

func (c *Client) canFallBack(ctx context.Context, call *callState, err error) bool {
	e, ok := errorsAs[*Error](err)
	if !ok || ctx.Err() != nil || call.streamed || e.ContextLength() {
		return false
	}
	// The same key goes to the same server for every model.
	return e.Status != http.StatusUnauthorized && e.Status != http.StatusForbidden
}

// completeModel runs the attempts for one model.
func (c *Client) completeModel(ctx context.Context, call *callState, model string, base *body) (Response, error) {
	for attempt := 1; ; attempt++ {
		resp, err := c.attempt(ctx, call, model, base)
		if err == nil {
			return resp, nil
		}
		e, ok := errorsAs[*Error](err)
		if !ok || !e.Retryable || call.streamed || attempt > c.retries {
			return Response{}, err
		}
		wait := e.RetryAfter
		if wait <= 0 {
			wait = c.backoff(attempt)
		}
		if call.waited+wait > c.cfg.MaxRetryWait {
			c.log.Warn("llm: giving up: retry wait exceeds the budget",
				"model", model, "attempt", attempt, "status", e.Status, "wait", wait,
				"waited", call.waited, "budget", c.cfg.MaxRetryWait, "err", e.Message)
			return Response{}, err
		}
		level := slog.LevelWarn
		if e.Status == http.StatusTooManyRequests {
			level = slog.LevelInfo // expected under load; the server told us how long
		}
		c.log.Log(ctx, level, "llm: retrying",
			"model", model, "attempt", attempt, "max_retries", c.retries,
			"status", e.Status, "code", e.Code, "wait", wait, "err", e.Message)
		if err := c.cfg.Sleep(ctx, wait); err != nil {
			return Response{}, fmt.Errorf("llm: model %s: wait before retry: %w", model, err)
		}
		call.waited += wait
	}
}

// backoff is the jittered exponential wait before retry number attempt
// (from 1): half of min(cap, base·2^(attempt-1)) plus up to as much again.
func (c *Client) backoff(attempt int) time.Duration {
	d := backoffCap
	if attempt-1 < 16 {
		d = min(backoffCap, backoffBase<<(attempt-1))
	}
	jitter := min(max(c.cfg.Rand(), 0), 1)
	return d/2 + time.Duration(jitter*float64(d/2))
}

// attempt makes one request (two if the server rejects stream_options) and
// reads its stream.
func (c *Client) attempt(ctx context.Context, call *callState, model string, base *body) (Response, error) {
	release, err := c.slot(ctx, model)
	if err != nil {
		return Response{}, err
	}
	defer release()
	actx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	actx, idle := watchIdle(actx, c.cfg.StreamIdleTimeout)
	defer idle.stop()
	withOptions := !c.noStreamOptions.Load()
	opts := c.options(model, withOptions)
	hdr := &captured{body: base.bytes(model, opts), idle: idle}
	actx = context.WithValue(actx, capturedKey{}, hdr)

	// go-openai checks and encodes this stand-in; headerCapture sends the
	// body encoded by c.enc in its place (see encode.go). It carries no
	// output cap: go-openai refuses max_tokens for models it takes for
	// reasoning models, and the body says which field the cap goes in.
	req := openai.ChatCompletionRequest{Model: model}
	if withOptions {
		req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}
	stream, err := c.api.CreateChatCompletionStream(actx, req)
	if err != nil {
		err = c.classify(ctx, actx, model, err, hdr, false)
		if e, ok := err.(*Error); ok {
			if what, learnt := c.quirks.learn(model, e, opts, call.forced); learnt {
				c.log.Info("llm: adapting to the server: sending again", "model", model, "what", what, "refusal", e.Message)
				return Response{}, &adaptedError{e}
			}
		}
		if !withOptions || !rejectsStreamOptions(err) {
			return Response{}, err
		}
		c.noStreamOptions.Store(true)
		c.log.Info("llm: server rejects stream_options; continuing without (no usage reported)", "model", model)
		req.StreamOptions = nil
		opts.streamOptions = false
		*hdr = captured{body: base.bytes(model, opts), idle: idle}
		if stream, err = c.api.CreateChatCompletionStream(actx, req); err != nil {
			return Response{}, c.classify(ctx, actx, model, err, hdr, false)
		}
	}
	defer stream.Close()

	_, holds := c.thinkHold.Load(model)
	holds = holds || opensThinkInPrompt(model)
	var (
		think  = newThinkFilter(holds)
		hold   = &callHold{on: len(call.tools) > 0}
		rc     strings.Builder // reasoning_content, which may be handed back (reasoning.go)
		rother strings.Builder // reasoning from the reasoning field
		thinks bool            // Delta.Thinking was handed out
		calls  = map[int]*ToolCall{}
		handed = map[int]int{} // bytes of a streamed call's arguments handed to onDelta
		finish string
		usage  Usage
		chunks int
		// ids are the calls' final ids, unique within the history (a
		// server may send none, or call_0 at every step), decided when a
		// call is first handed out or assembled.
		ids      = map[int]string{}
		assigner = newIDAssigner(call.history, c.mistralIDs())
		last     = -1 // the index of the last call, for deltas without one
	)
	idOf := func(i int) string {
		id, ok := ids[i]
		if !ok {
			id = assigner.assign(calls[i].ID)
			ids[i] = id
		}
		return id
	}
	for {
		chunk, err := recvChunk(stream)
		if errors.Is(err, io.EOF) && chunks == 0 && !hdr.sawDone {
			// Not one chunk and no [DONE]: what came was not an event
			// stream, whatever its content type said.
			err = &malformedError{status: hdr.status, contentType: hdr.contentType,
				reason: "an event stream without a single data chunk", excerpt: excerpt(hdr.head)}
			return Response{}, c.classify(ctx, actx, model, err, hdr, true)
		}
		if errors.Is(err, io.EOF) {
			hdr.finished = true
			break
		}
		if err != nil {
			return Response{}, c.classify(ctx, actx, model, err, hdr, true)
		}
		chunks++
		if chunk.usage != nil {
			usage = *chunk.usage
		}
		for i, ch := range chunk.Choices {
			if ch.FinishReason != "" {
				finish = string(ch.FinishReason)
			}
			rc.WriteString(ch.Delta.ReasoningContent)
			if ch.Delta.ReasoningContent == "" && i < len(chunk.reasoning) {
				rother.WriteString(chunk.reasoning[i])
			}
			if rc.Len()+rother.Len() > 0 {
				think.separated()
			}
			if ch.Delta.Content != "" {
				out, retract := think.feed(ch.Delta.Content)
				if retract {
					// Reasoning after all: take back what was handed out,
					// and hold this model's answers from now on.
					c.thinkHold.Store(model, true)
					hold = &callHold{on: hold.on}
					call.onDelta(Delta{Retract: true})
				}
				handOut(call, hold.feed(out))
			}
			if !thinks && (rc.Len()+rother.Len()+think.reasoning.Len() > 0 || think.holding()) {
				thinks = true
				call.onDelta(Delta{Thinking: true})
			}
			for _, d := range ch.Delta.ToolCalls {
				i := 0 // key by Index: ids and names come only in a call's first fragment
				switch {
				case d.Index != nil:
					i = *d.Index
				case last >= 0 && (d.ID != "" || d.Function.Name != "") && calls[last].Name != "":
					i = last + 1 // no index (Gemini): a delta naming a call starts the next one
				case last >= 0:
					i = last
				}
				last = max(last, i)
				tc := calls[i]
				if tc == nil {
					tc = &ToolCall{}
					calls[i] = tc
				}
				if d.ID != "" {
					tc.ID = d.ID
				}
				if d.Function.Name != "" {
					tc.Name = d.Function.Name
				}
				tc.Arguments += d.Function.Arguments
				if call.calls[tc.Name] && len(tc.Arguments) > handed[i] {
					// Everything not handed out yet: arguments that came
					// before the name, if any, and this fragment.
					call.streamed = true
					call.onDelta(Delta{ToolIndex: i, ToolID: idOf(i), ToolName: tc.Name, ToolArgs: tc.Arguments[handed[i]:]})
					handed[i] = len(tc.Arguments)
				}
			}
		}
	}

	handOut(call, hold.feed(think.end()))
	msg := Message{Role: RoleAssistant, Content: think.visible.String(), Reasoning: rc.String()}
	resp := Response{FinishReason: finish, Usage: usage, Model: model,
		Reasoning: strings.TrimSpace(rc.String() + rother.String() + think.reasoning.String())}
	for _, i := range slices.Sorted(maps.Keys(calls)) {
		tc := *calls[i]
		tc.ID = idOf(i)
		if strings.TrimSpace(tc.Arguments) == "" {
			tc.Arguments = "{}"
		}
		msg.ToolCalls = append(msg.ToolCalls, tc)
	}
	held := hold.end()
	if len(msg.ToolCalls) == 0 && hold.on {
		recovered, rest, malformed := recoverCalls(msg.Content, call.tools)
		switch {
		case recovered != nil:
			for i := range recovered {
				recovered[i].ID = assigner.assign("") // unique in the history, in the provider's form
			}
			msg.Content, msg.ToolCalls, held = rest, recovered, ""
			c.log.Info("llm: recovered tool calls written as text", "model", model, "calls", len(recovered))
		case malformed != "":
			msg.Content, resp.MalformedCall, held = "", malformed, ""
			c.log.Warn("llm: malformed tool call written as text", "model", model, "err", malformed)
		}
	}
	if len(msg.ToolCalls) == 0 {
		handOut(call, held) // not call text after all: the answer's rest
	}
	resp.Message = msg
	return resp, nil
}

// handOut hands a fragment of answer text to the caller.
func handOut(call *callState, s string) {
	if s != "" {
		call.streamed = true
		call.onDelta(Delta{Text: s})
	}
}

// classify turns what go-openai returned into an *Error, or into a wrapped
// ctx.Err() when the caller's context ended.
func (c *Client) classify(ctx, actx context.Context, model string, err error, hdr *captured, inStream bool) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("llm: model %s: %w", model, ctxErr)
	}
	e := &Error{Model: model, cause: c.redact.Err(err)}
	if hdr.status >= 400 {
		e.RetryAfter = hdr.retryAfter(c.now())
	}
	if inStream && (isMalformedJSON(err) || errors.Is(err, openai.ErrTooManyEmptyStreamMessages)) {
		err = &malformedError{status: hdr.status, contentType: hdr.contentType,
			reason: "an event stream that does not decode (" + err.Error() + ")", excerpt: excerpt(hdr.head)}
		e.cause = c.redact.Err(err)
	}
	ae, isAPI := errorsAs[*openai.APIError](err)
	re, isReq := errorsAs[*openai.RequestError](err)
	me, isMalformed := errorsAs[*malformedError](err)
	switch {
	case isMalformed:
		// A 200 that is not an answer: a proxy or portal in the way, or a
		// server failing oddly. Retried like a 5xx.
		e.Status, e.Code, e.Message = me.status, "malformed_response", me.detail()
		e.Retryable = true
	case actx.Err() != nil && errors.Is(context.Cause(actx), errStreamIdle):
		e.Code = "stream_idle"
		e.Message = fmt.Sprintf("no data from the server for %s (llm.stream_idle_timeout): it hangs", c.cfg.StreamIdleTimeout)
		e.Retryable = true
	case actx.Err() != nil:
		e.Code = "timeout"
		e.Message = fmt.Sprintf("attempt timed out after %s", c.cfg.RequestTimeout)
		e.Retryable = true
	case isAPI:
		e.Status, e.Code, e.Message = ae.HTTPStatusCode, codeString(ae.Code), ae.Message
		// Status 0: an error event inside a stream, i.e. the server failed
		// while answering.
		e.Retryable = ae.HTTPStatusCode == 0 || retryableStatus(ae.HTTPStatusCode)
	case isReq:
		e.Status = re.HTTPStatusCode
		e.Message = "non-JSON error body: " + summarize(re.Body)
		e.Retryable = retryableStatus(re.HTTPStatusCode)
	default:
		e.Message = err.Error()
		e.Retryable = inStream || isTransport(err)
	}
	if e.ContextLength() || e.Code == "insufficient_quota" {
		e.Retryable = false
	}
	e.Message = c.redact.String(e.Message)
	return e
}

// isTransport reports whether err came from the network rather than from
// a client-side check in go-openai.
func isTransport(err error) bool {
	if _, ok := errorsAs[*url.Error](err); ok {
		return true
	}
	if _, ok := errorsAs[net.Error](err); ok {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// isMalformedJSON reports whether err is go-openai failing to decode a
// stream chunk.
func isMalformedJSON(err error) bool {
	if _, ok := errorsAs[*json.SyntaxError](err); ok {
		return true
	}
	_, ok := errorsAs[*json.UnmarshalTypeError](err)
	return ok
}

func rejectsStreamOptions(err error) bool {
	e, ok := errorsAs[*Error](err)
	return ok && e.Status == http.StatusBadRequest && strings.Contains(strings.ToLower(e.Message), "stream_options")
}

// codeString renders go-openai's APIError.Code, which is a string, an int,
// or 0 when the server sent null.
func codeString(code any) string {
	switch v := code.(type) {
	case nil:
		return ""
	case string:
		return v
	case int:
		if v == 0 {
			return ""
		}
		return strconv.Itoa(v)
	default:
		return fmt.Sprint(v)
	}
}

// summarize shortens a non-JSON body (typically a proxy's HTML page) for an
// error message: its <title> if it has one, else its start, as excerpt
// renders it.
func summarize(body []byte) string {
	s := string(body)
	if _, rest, ok := strings.Cut(s, "<title>"); ok {
		if title, _, ok := strings.Cut(rest, "</title>"); ok {
			s = title
		}
	}
	return excerpt([]byte(s))
}

// excerptMax bounds the body excerpt quoted in errors and logs.
const excerptMax = 200

// excerpt renders the start of a body for a log line: whitespace collapsed,
// anything unprintable (or not UTF-8) shown as '.', at most excerptMax bytes.
func excerpt(body []byte) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(body), ".")), " ")
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return '.'
	}, s)
	if len(s) <= excerptMax {
		return s
	}
	cut := excerptMax
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// --- Retry-After capture ----------------------------------------------------

// go-openai drops the response headers of a failed stream call, so the
// HTTP client is wrapped to record them per attempt through the request
// context (which keeps concurrent calls apart).
type capturedKey struct{}

type captured struct {
	finished       bool // the stream ended with [DONE]: drain the rest on close
	status         int
	contentType    string
	head           []byte // the first excerptMax bytes of a 2xx stream
	sawDone        bool   // the stream carried its [DONE]
	retryAfterSecs string // Retry-After
	retryAfterMS   string // retry-after-ms, sent by OpenAI and Azure
	body           []byte // the request body, sent in place of go-openai's
	idle           *idleWatch
}

func (h *captured) retryAfter(now time.Time) time.Duration {
	if ms, err := strconv.ParseFloat(strings.TrimSpace(h.retryAfterMS), 64); err == nil && ms > 0 && ms < 1e9 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	return parseRetryAfter(h.retryAfterSecs, now)
}

type headerCapture struct{ c *http.Client }

func (h headerCapture) Do(req *http.Request) (*http.Response, error) {
	if hdr, ok := req.Context().Value(capturedKey{}).(*captured); ok && hdr.body != nil {
		body := hdr.body
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		req.ContentLength = int64(len(body))
	}
	resp, err := h.c.Do(req)
	if resp != nil {
		if hdr, ok := req.Context().Value(capturedKey{}).(*captured); ok {
			hdr.idle.touch() // the headers came
			resp.Body = &idleBody{ReadCloser: resp.Body, w: hdr.idle}
			hdr.status = resp.StatusCode
			hdr.contentType = resp.Header.Get("Content-Type")
			hdr.retryAfterSecs = resp.Header.Get("Retry-After")
			hdr.retryAfterMS = resp.Header.Get("Retry-After-Ms")
			if resp.StatusCode >= 200 && resp.StatusCode < 300 {
				if err := checkStreamBody(resp, hdr); err != nil {
					return nil, err
				}
			}
			resp.Body = &drainOnClose{ReadCloser: resp.Body, hdr: hdr}
		}
	}
	return resp, err
}

// maxJSONAnswer bounds how much of a JSON answer to a streaming request is
// read to check it.
const maxJSONAnswer = 1 << 20

// checkStreamBody looks at a 2xx answer to a streaming request before
// go-openai reads it. go-openai takes any body without "data:" lines for an
// empty stream, so a captive portal's HTML page or a proxy's broken JSON
// would become an empty reply. An event stream goes through (recorded, so
// that a malformed one can be quoted); a JSON body goes through only if it
// is an error object, which go-openai reports; anything else is a
// *malformedError, retried like a 5xx.
func checkStreamBody(resp *http.Response, hdr *captured) error {
	media, _, _ := mime.ParseMediaType(hdr.contentType)
	media = strings.ToLower(media)
	fail := func(reason string, body []byte) error {
		resp.Body.Close()
		return &malformedError{status: resp.StatusCode, contentType: hdr.contentType, reason: reason, excerpt: excerpt(body)}
	}
	switch {
	case media == "text/event-stream":
	case media == "application/json" || strings.HasSuffix(media, "+json"):
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONAnswer+1))
		if err != nil {
			resp.Body.Close()
			return err // a transport error, classified as such
		}
		if len(body) > maxJSONAnswer || !json.Valid(body) {
			return fail("a JSON content type over a body that is not valid JSON", body)
		}
		var obj struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(body, &obj) != nil || len(obj.Error) == 0 || string(obj.Error) == "null" {
			return fail("a JSON document where an event stream was asked for", body)
		}
		// go-openai only reads an error from complete lines.
		body = append(bytes.TrimRight(body, " \t\r\n"), '\n')
		resp.Body = readCloser{Reader: bytes.NewReader(body), Closer: resp.Body}
	default:
		// No or another content type: go through only if the body reads as
		// an event stream (some servers do not label theirs).
		br := bufio.NewReaderSize(resp.Body, 512)
		head, err := br.Peek(512)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
			resp.Body.Close()
			return err
		}
		if !looksLikeSSE(head) {
			return fail("neither JSON nor an event stream", head)
		}
		resp.Body = readCloser{Reader: br, Closer: resp.Body}
	}
	resp.Body = &recordingBody{ReadCloser: resp.Body, hdr: hdr}
	return nil
}

// looksLikeSSE reports whether a body starts with a server-sent event
// field or comment.
func looksLikeSSE(head []byte) bool {
	head = bytes.TrimLeft(head, " \t\r\n")
	for _, p := range []string{"data:", "event:", "id:", "retry:", ":"} {
		if bytes.HasPrefix(head, []byte(p)) {
			return true
		}
	}
	return false
}

type readCloser struct {
	io.Reader
	io.Closer
}

// recordingBody keeps the start of a stream, for quoting it when it turns
// out malformed, and notes whether its [DONE] went by.
type recordingBody struct {
	io.ReadCloser
	hdr  *captured
	tail []byte // the last len(doneMark)-1 bytes read, for a mark split across reads
}

var doneMark = []byte("[DONE]")

func (r *recordingBody) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 {
		if room := excerptMax - len(r.hdr.head); room > 0 {
			r.hdr.head = append(r.hdr.head, p[:min(n, room)]...)
		}
		if !r.hdr.sawDone {
			keep := len(doneMark) - 1
			edge := append(r.tail, p[:min(n, keep)]...)
			r.hdr.sawDone = bytes.Contains(p[:n], doneMark) || bytes.Contains(edge, doneMark)
			if n >= keep {
				r.tail = append(r.tail[:0], p[n-keep:n]...)
			} else {
				r.tail = append(r.tail[:0], edge[max(0, len(edge)-keep):]...)
			}
		}
	}
	return n, err
}

// malformedError is a 2xx answer that is neither an event stream nor a
// JSON error: a transport failure as far as the caller is concerned.
type malformedError struct {
	status      int
	contentType string
	reason      string
	excerpt     string
}

func (e *malformedError) Error() string {
	return fmt.Sprintf("malformed answer with status %d: %s", e.status, e.detail())
}

// detail is the error without its status.
func (e *malformedError) detail() string {
	ct := e.contentType
	if ct == "" {
		ct = "no content type"
	}
	return fmt.Sprintf("%s (%s); body starts: %s", e.reason, ct, e.excerpt)
}

// drainOnClose reads what is left of a finished stream (the blank line after
// [DONE] and the chunked-encoding trailer) before closing, so that the
// connection goes back to the pool instead of being torn down: go-openai
// closes the body right after [DONE].
type drainOnClose struct {
	io.ReadCloser
	hdr *captured
}

func (d *drainOnClose) Close() error {
	if d.hdr.finished {
		io.CopyN(io.Discard, d.ReadCloser, 64<<10)
	}
	return d.ReadCloser.Close()
}

// --- Stream idle timeout ----------------------------------------------------

// errStreamIdle is the cause of an attempt ended by its idle watch.
var errStreamIdle = errors.New("llm: no data from the server within the stream idle timeout")

// idleWatch cancels an attempt's context with errStreamIdle once no byte
// arrived for its timeout: from the request until the headers, and
// between reads of the body. A nil watch does nothing.
type idleWatch struct {
	d time.Duration
	t *time.Timer
}

// watchIdle returns ctx with an idle watch of d; d <= 0: none.
func watchIdle(ctx context.Context, d time.Duration) (context.Context, *idleWatch) {
	if d <= 0 {
		return ctx, nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	return ctx, &idleWatch{d: d, t: time.AfterFunc(d, func() { cancel(errStreamIdle) })}
}

func (w *idleWatch) touch() {
	if w != nil {
		w.t.Reset(w.d)
	}
}

func (w *idleWatch) stop() {
	if w != nil {
		w.t.Stop()
	}
}

// idleBody touches its watch on every read that brought bytes.
type idleBody struct {
	io.ReadCloser
	w *idleWatch
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.touch()
	}
	return n, err
}
