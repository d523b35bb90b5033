// Package testkit holds hand-made fakes shared by the tests of every
// package. FakeLLM is a scripted OpenAI-compatible server over real HTTP on
// 127.0.0.1.
package testkit

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/switchboard-gateway/switchboard/llm"
)

// Reply is one scripted answer of the fake. The zero Reply answers an empty
// assistant message with finish reason "stop".
type Reply struct {
	Text string
	// TextChunks, when set, are streamed verbatim as the text fragments
	// (their concatenation is the text); otherwise Text is split at word
	// boundaries.
	TextChunks []string
	// ToolCalls are streamed with their arguments split into several
	// fragments, interleaved across calls when there are several. An empty
	// ID becomes "call_<n>".
	ToolCalls    []llm.ToolCall
	FinishReason string     // default "stop", or "tool_calls" when ToolCalls are set
	Usage        *llm.Usage // default: rough numbers computed from the sizes of request and reply
	// UsageJSON, when set, is sent verbatim as the usage object (a
	// provider's own fields: DeepSeek's prompt_cache_hit_tokens, …).
	UsageJSON json.RawMessage

	// Reasoning is streamed before the text, in the delta field named
	// ReasoningField (default "reasoning_content", as DeepSeek, vLLM and
	// llama.cpp send it; "reasoning" as OpenRouter and Ollama do), one
	// word a chunk, paced by ChunkDelay and told to OnChunk with an empty
	// fragment.
	Reasoning      string
	ReasoningField string

	Status       int    // non-zero: answer with this HTTP error instead
	ErrorCode    string // e.g. "context_length_exceeded", "rate_limit_exceeded"; empty: JSON null
	ErrorMessage string // default: a message that fits Status and ErrorCode
	RetryAfter   string // value of the Retry-After header, sent with any reply
	HTMLBody     bool   // answer Status (default 502) with a non-JSON HTML page, as a proxy would
	// RawBody, when set, is written verbatim with RawContentType (none when
	// empty) and Status (default 200), to every request, streaming or not:
	// a captive portal's HTML page, an event stream whose data lines are not
	// JSON, a JSON content type over a body that is not JSON.
	RawBody        []byte
	RawContentType string
	// MidStreamError streams the text, then a `data: {"error":...}` chunk, and
	// ends without [DONE]. A non-streaming request gets a 500 instead.
	MidStreamError bool
	// CutStream streams the text, then drops the connection without a
	// finish reason or [DONE], as a crashing server or a proxy that gives up
	// does. A non-streaming request has its connection dropped at once.
	CutStream bool

	// ArgPieces is how many fragments each tool call's arguments are
	// streamed in (default 3).
	ArgPieces int
	// ChunkDelay paces a streamed answer like a model producing tokens:
	// the wait before each chunk after the first (role) chunk.
	ChunkDelay time.Duration
	// OnChunk, when set, is called after each chunk that carries text or a
	// tool call's fragment was flushed, with what it carried (the text, or
	// the arguments fragment: "" for a call's header without arguments)
	// and the time it began to be written.
	OnChunk func(fragment string, at time.Time)

	Delay time.Duration   // wait before answering (the request's cancellation ends the wait)
	Block <-chan struct{} // wait until closed (or the request is cancelled) before answering
	// Model, when set, makes this reply answer only a request for that model.
	// A request for another model gets 404 model_not_found and a queued
	// reply stays at the head of the queue, so a test can script fallbacks.
	Model string
	// Func computes the reply from the request; it takes precedence over
	// every other field of the queued reply (the Model check above applies
	// to both the queued reply and the one Func returns).
	Func func(Recorded) Reply
}

// Call is a shorthand for an llm.ToolCall.
func Call(id, name, argsJSON string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: argsJSON}
}

// Recorded is one request received by the fake, decoded.
type Recorded struct {
	Method, Path string
	Header       http.Header
	Model        string
	// Messages as sent. A multi-part content has its text parts joined into
	// Content and its image parts in Images (data: URLs decoded into MIME and
	// Data, other URLs kept in URL).
	Messages   []llm.Message
	Tools      []llm.ToolSpec
	ToolChoice json.RawMessage // as sent; nil when absent
	ForcedTool string          // the function named by tool_choice, if any
	Stream     bool
	// HasStreamOptions reports whether stream_options was present at all;
	// IncludeUsage is its include_usage flag.
	HasStreamOptions bool
	IncludeUsage     bool
	MaxTokens        int // max_tokens, or max_completion_tokens when that is set instead
	Raw              []byte
	DecodeError      string // non-empty when the body was not valid JSON
}

// FakeLLM serves POST /v1/chat/completions (plain and SSE) and GET /v1/models.
// It is safe for concurrent use.
type FakeLLM struct {
	URL string // base URL including "/v1", for openai.ClientConfig.BaseURL

	srv  *httptest.Server
	done chan struct{} // closed on cleanup: ends every wait in a handler

	mu            sync.Mutex
	queue         []Reply
	def           *Reply
	reqs          []Recorded
	calls         int           // requests received, kept in reqs or not
	discard       bool          // keep no more requests in reqs
	changed       chan struct{} // closed and replaced whenever calls grows
	models        []string
	rejectStreamO bool
	outage        *Reply // while set, every chat completion gets it
	nextID        int
	closeOnce     sync.Once
	transcript    string
	audio         []Audio
	profile       *Profile // the server replayed (profiles.go); nil: the fake's own dialect
}

// Audio is one transcription request the fake received.
type Audio struct {
	Model, FileName string
	Data            []byte
}

// SetTranscript sets what POST /v1/audio/transcriptions answers ("" answers
// 500).
func (f *FakeLLM) SetTranscript(text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.transcript = text
}

// AudioRequests returns the transcription requests received.
func (f *FakeLLM) AudioRequests() []Audio {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Audio(nil), f.audio...)
}

func (f *FakeLLM) handleTranscription(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "fake: "+err.Error())
		return
	}
	a := Audio{Model: r.FormValue("model")}
	if file, hdr, err := r.FormFile("file"); err == nil {
		a.FileName = hdr.Filename
		a.Data, _ = io.ReadAll(file)
		file.Close()
	}
	f.mu.Lock()
	f.audio = append(f.audio, a)
	text := f.transcript
	f.mu.Unlock()
	if text == "" {
		writeError(w, http.StatusInternalServerError, "", "fake: no transcript set")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"text": text})
}

// NewFakeLLM starts a fake on 127.0.0.1; it is closed on t.Cleanup.
func NewFakeLLM(t testing.TB) *FakeLLM {
	t.Helper()
	f := Start("127.0.0.1:0")
	t.Cleanup(f.Close)
	return f
}

// Start runs a fake on addr ("127.0.0.1:0" for any free port) for programs
// outside tests (demos, benchmarks); call Close when done.
func Start(addr string) *FakeLLM { return start(addr, nil) }

func start(addr string, p *Profile) *FakeLLM {
	f := &FakeLLM{
		done:    make(chan struct{}),
		changed: make(chan struct{}),
		models:  []string{"fake-model"},
		profile: p,
	}
	mux := http.NewServeMux()
	if p != nil {
		f.models = []string{p.Model}
		p.routes(mux, f)
	} else {
		mux.HandleFunc("POST /v1/chat/completions", f.handleChat)
		mux.HandleFunc("GET /v1/models", f.handleModels)
	}
	mux.HandleFunc("POST /v1/audio/transcriptions", f.handleTranscription)
	f.srv = httptest.NewUnstartedServer(mux)
	if addr != "127.0.0.1:0" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			panic(fmt.Sprintf("testkit: listen %s: %v", addr, err))
		}
		f.srv.Listener.Close()
		f.srv.Listener = ln
	}
	f.srv.Start()
	f.URL = f.srv.URL + "/v1"
	if p != nil {
		f.URL = p.base(f.srv.URL)
	}
	return f
}

// Close stops the fake, ending every request still waiting.
func (f *FakeLLM) Close() {
	f.closeOnce.Do(func() {
		close(f.done)
		f.srv.CloseClientConnections()
		f.srv.Close()
	})
}

// Push appends replies to the FIFO queue; each request consumes one.
func (f *FakeLLM) Push(replies ...Reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue = append(f.queue, replies...)
}

// SetDefault sets the reply used when the queue is empty; nil restores the
// default, an HTTP 500 saying "fake: no scripted reply".
func (f *FakeLLM) SetDefault(r *Reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r == nil {
		f.def = nil
		return
	}
	c := *r
	f.def = &c
}

// SetOutage makes every chat completion request get r (an HTTP 503, a
// dropped connection: CutStream) instead of its scripted reply, which stays
// queued, until SetOutage(nil) ends the outage; GET /v1/models still
// answers, as a model server whose inference is down often does. Requests
// are recorded and counted as usual.
func (f *FakeLLM) SetOutage(r *Reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r == nil {
		f.outage = nil
		return
	}
	c := *r
	f.outage = &c
}

// SetModels sets the ids listed by GET /v1/models (default "fake-model").
func (f *FakeLLM) SetModels(ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.models = append([]string(nil), ids...)
}

// SetRejectStreamOptions makes the fake behave like servers that do not know
// stream_options: a request carrying it gets a 400 naming the parameter and
// consumes no reply (it is still recorded).
func (f *FakeLLM) SetRejectStreamOptions(reject bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rejectStreamO = reject
}

// Pending returns how many queued replies are not consumed yet.
func (f *FakeLLM) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queue)
}

// DiscardRequests makes the fake keep no request it receives from now on
// (Requests returns only those before); Calls and WaitCalls still count
// them. A benchmark's fake otherwise holds every long conversation's
// request, and its garbage collector's growing work ran in the middle of
// what was measured.
func (f *FakeLLM) DiscardRequests() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.discard = true
}

// Requests returns every chat completion request received, in order.
func (f *FakeLLM) Requests() []Recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Recorded(nil), f.reqs...)
}

// Calls returns how many chat completion requests were received.
func (f *FakeLLM) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// WaitCalls blocks until at least n requests were received or ctx ends.
// A request counts as received before its reply's Delay or Block.
func (f *FakeLLM) WaitCalls(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		have, ch := f.calls, f.changed
		f.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("testkit: wait for %d calls, have %d: %w", n, have, ctx.Err())
		}
	}
}

func (f *FakeLLM) handleModels(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	ids := append([]string(nil), f.models...)
	f.mu.Unlock()
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, id := range ids {
		list.Data = append(list.Data, model{ID: id, Object: "model", Created: 1700000000, OwnedBy: "testkit"})
	}
	writeJSON(w, http.StatusOK, list)
}

func (f *FakeLLM) handleChat(w http.ResponseWriter, r *http.Request) {
	// Read the whole body first: net/http only notices a client that went
	// away once the body is at EOF, and the waits below rely on that.
	raw, err := readBody(r)
	if err != nil {
		return
	}
	rec := decodeRequest(raw)
	rec.Method, rec.Path, rec.Header = r.Method, r.URL.Path, r.Header.Clone()
	var refused *Reply
	if f.profile != nil {
		refused = f.profile.check(r, &rec)
	}

	reply, id := f.pick(rec, refused)
	if reply.Func != nil {
		fn := reply.Func
		reply = fn(rec)
		reply.Func = nil
		if reply.Model != "" && reply.Model != rec.Model {
			reply = modelNotFound(rec.Model)
		}
	}
	if f.profile != nil && refused == nil {
		reply = f.profile.shape(reply)
	}

	if !f.wait(r.Context(), reply) {
		if r.Context().Err() == nil {
			// The fake is closing: drop the connection rather than answer
			// an empty 200 the client would take for a success.
			panic(http.ErrAbortHandler)
		}
		return
	}
	if reply.RetryAfter != "" {
		w.Header().Set("Retry-After", reply.RetryAfter)
	}
	switch {
	case reply.RawBody != nil:
		status := reply.Status
		if status == 0 {
			status = http.StatusOK
		}
		if reply.RawContentType != "" {
			w.Header().Set("Content-Type", reply.RawContentType)
		} else {
			w.Header()["Content-Type"] = nil // no sniffing: the client sees no Content-Type at all
		}
		w.WriteHeader(status)
		w.Write(reply.RawBody)
	case reply.HTMLBody:
		status := reply.Status
		if status == 0 {
			status = http.StatusBadGateway
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(status)
		fmt.Fprintf(w, "<html>\r\n<head><title>%d %s</title></head>\r\n<body>\r\n<center><h1>%d %s</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n",
			status, http.StatusText(status), status, http.StatusText(status))
	case reply.Status != 0:
		writeError(w, reply.Status, reply.ErrorCode, reply.ErrorMessage)
	case reply.CutStream && !rec.Stream:
		panic(http.ErrAbortHandler)
	case reply.MidStreamError && !rec.Stream:
		writeError(w, http.StatusInternalServerError, reply.ErrorCode, orDefault(reply.ErrorMessage, "upstream overloaded"))
	case rec.Stream:
		f.stream(w, r, rec, reply, id)
	default:
		writeJSON(w, http.StatusOK, completion(rec, reply, id))
	}
}

// pick records the request and chooses its reply; refused, when set, is
// the reply (the profile's server refused the request).
func (f *FakeLLM) pick(rec Recorded, refused *Reply) (Reply, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.discard {
		f.reqs = append(f.reqs, rec)
	}
	f.calls++
	close(f.changed)
	f.changed = make(chan struct{})
	f.nextID++
	id := fmt.Sprintf("chatcmpl-fake%d", f.nextID)

	switch {
	case rec.DecodeError != "":
		return Reply{Status: http.StatusBadRequest, ErrorMessage: "fake: invalid request body: " + rec.DecodeError}, id
	case refused != nil:
		return *refused, id
	case f.outage != nil:
		return *f.outage, id
	case f.rejectStreamO && rec.HasStreamOptions:
		return Reply{Status: http.StatusBadRequest, ErrorMessage: "Unrecognized request argument supplied: stream_options"}, id
	case len(f.queue) > 0:
		head := f.queue[0]
		if head.Model != "" && head.Model != rec.Model {
			return modelNotFound(rec.Model), id
		}
		f.queue = f.queue[1:]
		return head, id
	case f.def != nil:
		if f.def.Model != "" && f.def.Model != rec.Model {
			return modelNotFound(rec.Model), id
		}
		return *f.def, id
	default:
		return Reply{Status: http.StatusInternalServerError, ErrorMessage: "fake: no scripted reply"}, id
	}
}

// wait honours Delay and Block; false means the request or the fake ended.
func (f *FakeLLM) wait(ctx context.Context, reply Reply) bool {
	if reply.Delay > 0 {
		t := time.NewTimer(reply.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return false
		case <-f.done:
			return false
		}
	}
	if reply.Block != nil {
		select {
		case <-reply.Block:
		case <-ctx.Done():
			return false
		case <-f.done:
			return false
		}
	}
	return true
}

func modelNotFound(model string) Reply {
	return Reply{
		Status:       http.StatusNotFound,
		ErrorCode:    "model_not_found",
		ErrorMessage: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model),
	}
}

// --- wire format -----------------------------------------------------------

type wireFunction struct {
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Arguments   *string         `json:"arguments,omitempty"`
}

type wireToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function wireFunction `json:"function"`
}

type wirePart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCalls  []wireToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	// ReasoningContent is reasoning handed back (llm.Message.Reasoning).
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

type wireRequest struct {
	Model    string        `json:"model"`
	Messages []wireMessage `json:"messages"`
	Tools    []struct {
		Type     string       `json:"type"`
		Function wireFunction `json:"function"`
	} `json:"tools"`
	ToolChoice    json.RawMessage `json:"tool_choice"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           int `json:"max_tokens"`
	MaxCompletionTokens int `json:"max_completion_tokens"`
}

// readBody reads the request's body into a buffer of its declared size.
// The fake's own work counts toward what the benchmark suite measures as
// the gateway's overhead (the fake model "answers at once"), so it keeps
// it small: growing the buffer took a quarter of the time it spent on a
// long conversation's request.
func readBody(r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n <= 64<<20 {
		buf.Grow(int(n) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(r.Body)
	return buf.Bytes(), err
}

// decodeRequest reads a chat completion request. It decodes with
// go-json-experiment's encoding/json-compatible package, which took half
// the time of encoding/json on a long conversation's request (the same
// reason as readBody).
func decodeRequest(raw []byte) Recorded {
	rec := Recorded{Raw: raw}
	var req wireRequest
	if err := jsonv1.Unmarshal(raw, &req); err != nil {
		rec.DecodeError = err.Error()
		return rec
	}
	rec.Model, rec.Stream = req.Model, req.Stream
	rec.MaxTokens = req.MaxTokens
	if req.MaxCompletionTokens != 0 {
		rec.MaxTokens = req.MaxCompletionTokens
	}
	if req.StreamOptions != nil {
		rec.HasStreamOptions, rec.IncludeUsage = true, req.StreamOptions.IncludeUsage
	}
	if len(req.ToolChoice) > 0 && string(req.ToolChoice) != "null" {
		rec.ToolChoice = req.ToolChoice
		var tc struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if jsonv1.Unmarshal(req.ToolChoice, &tc) == nil {
			rec.ForcedTool = tc.Function.Name
		}
	}
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, llm.ToolSpec{
			Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters,
		})
	}
	rec.Messages = make([]llm.Message, 0, len(req.Messages))
	for _, m := range req.Messages {
		msg := llm.Message{Role: llm.Role(m.Role), Name: m.Name, ToolCallID: m.ToolCallID, Reasoning: m.ReasoningContent}
		msg.Content, msg.Images = decodeContent(m.Content)
		for _, tc := range m.ToolCalls {
			call := llm.ToolCall{ID: tc.ID, Name: tc.Function.Name}
			if tc.Function.Arguments != nil {
				call.Arguments = *tc.Function.Arguments
			}
			msg.ToolCalls = append(msg.ToolCalls, call)
		}
		rec.Messages = append(rec.Messages, msg)
	}
	return rec
}

// decodeContent reads a content that is either a string or a list of parts.
func decodeContent(raw json.RawMessage) (string, []llm.Image) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if jsonv1.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []wirePart
	if jsonv1.Unmarshal(raw, &parts) != nil {
		return string(raw), nil
	}
	var text []string
	var images []llm.Image
	for _, p := range parts {
		switch {
		case p.Type == "text":
			text = append(text, p.Text)
		case p.ImageURL != nil:
			images = append(images, decodeImageURL(p.ImageURL.URL))
		}
	}
	return strings.Join(text, ""), images
}

func decodeImageURL(u string) llm.Image {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return llm.Image{URL: u}
	}
	meta, data, ok := strings.Cut(rest, ",")
	mime, isB64 := strings.CutSuffix(meta, ";base64")
	if !ok || !isB64 {
		return llm.Image{URL: u}
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return llm.Image{URL: u}
	}
	return llm.Image{MIME: mime, Data: b}
}

type wireUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// OpenAI's details, sent when Reply.Usage has cached or reasoning tokens.
	PromptDetails     *wireDetails `json:"prompt_tokens_details,omitempty"`
	CompletionDetails *wireDetails `json:"completion_tokens_details,omitempty"`
	raw               json.RawMessage
}

type wireDetails struct {
	CachedTokens    int `json:"cached_tokens,omitempty"`
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
}

// MarshalJSON writes Reply.UsageJSON when there is one.
func (u wireUsage) MarshalJSON() ([]byte, error) {
	if u.raw != nil {
		return u.raw, nil
	}
	type plain wireUsage
	return json.Marshal(plain(u))
}

type wireDelta struct {
	Role      string         `json:"role,omitempty"`
	Content   string         `json:"content,omitempty"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
	// The reasoning fields: a profile's (profiles.go), in the field its
	// server uses, or Reply.Reasoning.
	ReasoningContent string `json:"reasoning_content,omitempty"`
	Reasoning        string `json:"reasoning,omitempty"`
}

type wireChoice struct {
	Index        int          `json:"index"`
	Delta        *wireDelta   `json:"delta,omitempty"`
	Message      *wireMessage `json:"message,omitempty"`
	FinishReason *string      `json:"finish_reason"`
}

type wireChunk struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []wireChoice `json:"choices"`
	Usage   any          `json:"usage,omitempty"` // wireUsage, or a profile's shape of it
}

func (r Reply) finishReason() string {
	switch {
	case r.FinishReason != "":
		return r.FinishReason
	case len(r.ToolCalls) > 0:
		return llm.FinishToolCalls
	default:
		return llm.FinishStop
	}
}

func (r Reply) text() string {
	if r.TextChunks != nil {
		return strings.Join(r.TextChunks, "")
	}
	return r.Text
}

func (r Reply) calls() []llm.ToolCall {
	out := make([]llm.ToolCall, len(r.ToolCalls))
	for i, c := range r.ToolCalls {
		if c.ID == "" {
			c.ID = fmt.Sprintf("call_%d", i)
		}
		out[i] = c
	}
	return out
}

// usage is Reply.Usage or a rough count: about four bytes a token.
func (r Reply) usage(rec Recorded) wireUsage {
	if r.UsageJSON != nil {
		return wireUsage{raw: r.UsageJSON}
	}
	if r.Usage != nil {
		u := wireUsage{PromptTokens: r.Usage.PromptTokens, CompletionTokens: r.Usage.CompletionTokens, TotalTokens: r.Usage.TotalTokens}
		if r.Usage.CachedTokens > 0 {
			u.PromptDetails = &wireDetails{CachedTokens: r.Usage.CachedTokens}
		}
		if r.Usage.ReasoningTokens > 0 {
			u.CompletionDetails = &wireDetails{ReasoningTokens: r.Usage.ReasoningTokens}
		}
		return u
	}
	prompt := 0
	for _, m := range rec.Messages {
		prompt += 4 + len(m.Content)/4
	}
	completion := len(r.text()) / 4
	for _, c := range r.ToolCalls {
		completion += 2 + (len(c.Name)+len(c.Arguments))/4
	}
	completion = max(completion, 1)
	return wireUsage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
}

func completion(rec Recorded, r Reply, id string) any {
	content, _ := json.Marshal(r.text())
	msg := &wireMessage{Role: "assistant", Content: content, ReasoningContent: r.Reasoning}
	for _, c := range r.calls() {
		args := c.Arguments
		msg.ToolCalls = append(msg.ToolCalls, wireToolCall{
			ID: c.ID, Type: "function", Function: wireFunction{Name: c.Name, Arguments: &args},
		})
	}
	finish := r.finishReason()
	return wireChunk{
		ID: id, Object: "chat.completion", Created: time.Now().Unix(), Model: rec.Model,
		Choices: []wireChoice{{Message: msg, FinishReason: &finish}},
		Usage:   r.wireUsage(rec, nil),
	}
}

// wireUsage is the usage object of r, in p's shape (nil: the fake's own).
func (r Reply) wireUsage(rec Recorded, p *Profile) any {
	u := r.usage(rec)
	if r.Usage == nil {
		return p.wireUsage(u, 0, 0)
	}
	return p.wireUsage(u, r.Usage.CachedTokens, r.Usage.ReasoningTokens)
}

func (f *FakeLLM) stream(w http.ResponseWriter, r *http.Request, rec Recorded, reply Reply, id string) {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	created := time.Now().Unix()
	comment := f.profile.sseComment()
	send := func(payload []byte) bool {
		if _, err := fmt.Fprintf(w, "%sdata: %s\n\n", comment, payload); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return r.Context().Err() == nil
	}
	chunk := func(d wireDelta, finish *string) bool {
		b, _ := json.Marshal(wireChunk{
			ID: id, Object: "chat.completion.chunk", Created: created, Model: rec.Model,
			Choices: []wireChoice{{Delta: &d, FinishReason: finish}},
		})
		return send(b)
	}
	// token sends a chunk of the answer proper, paced by ChunkDelay.
	token := func(d wireDelta, fragment string) bool {
		if reply.ChunkDelay > 0 && !f.wait(r.Context(), Reply{Delay: reply.ChunkDelay}) {
			return false
		}
		at := time.Now()
		if !chunk(d, nil) {
			return false
		}
		if reply.OnChunk != nil {
			reply.OnChunk(fragment, at)
		}
		return true
	}

	fragments := reply.TextChunks
	if fragments == nil {
		fragments = splitText(reply.Text)
	}
	if !chunk(wireDelta{Role: "assistant"}, nil) {
		return
	}
	if d, ok := f.profile.thought(); ok && !chunk(d, nil) {
		return
	}
	for _, frag := range splitText(reply.Reasoning) {
		d := wireDelta{ReasoningContent: frag}
		if reply.ReasoningField == "reasoning" {
			d = wireDelta{Reasoning: frag}
		}
		if !token(d, "") {
			return
		}
	}
	for _, frag := range fragments {
		if !token(wireDelta{Content: frag}, frag) {
			return
		}
	}
	if reply.CutStream {
		panic(http.ErrAbortHandler) // the client sees the body end without its last chunk
	}
	if reply.MidStreamError {
		b, _ := json.Marshal(map[string]any{"error": errorBody(http.StatusInternalServerError, reply.ErrorCode,
			orDefault(reply.ErrorMessage, "upstream overloaded"))})
		send(b)
		return
	}
	pieces := reply.ArgPieces
	if pieces <= 0 {
		pieces = 3
	}
	for _, tc := range f.profile.wireCalls(toolCallChunks(reply.calls(), pieces)) {
		if !token(wireDelta{ToolCalls: []wireToolCall{tc}}, *tc.Function.Arguments) {
			return
		}
	}
	finish := reply.finishReason()
	if !chunk(wireDelta{}, &finish) {
		return
	}
	if rec.IncludeUsage {
		b, _ := json.Marshal(wireChunk{
			ID: id, Object: "chat.completion.chunk", Created: created, Model: rec.Model,
			Choices: []wireChoice{}, Usage: reply.wireUsage(rec, f.profile),
		})
		if !send(b) {
			return
		}
	}
	send([]byte("[DONE]"))
}

// toolCallChunks streams each call as a header (id, name) followed by its
// arguments in up to pieces fragments, taking the calls round-robin so that
// fragments of different calls interleave. Odd calls carry their first
// fragment in the header, as some servers do.
func toolCallChunks(calls []llm.ToolCall, pieces int) []wireToolCall {
	queues := make([][]wireToolCall, len(calls))
	for i, c := range calls {
		frags := splitN(c.Arguments, pieces)
		first := ""
		if i%2 == 1 && len(frags) > 0 {
			first, frags = frags[0], frags[1:]
		}
		q := []wireToolCall{{Index: &i, ID: c.ID, Type: "function", Function: wireFunction{Name: c.Name, Arguments: &first}}}
		for _, fr := range frags {
			q = append(q, wireToolCall{Index: &i, Function: wireFunction{Arguments: &fr}})
		}
		queues[i] = q
	}
	var out []wireToolCall
	for more := true; more; {
		more = false
		for i := range queues {
			if len(queues[i]) > 0 {
				out = append(out, queues[i][0])
				queues[i] = queues[i][1:]
				more = true
			}
		}
	}
	return out
}

// splitText splits at word boundaries, each fragment keeping its trailing
// spaces, and cuts long words into pieces of at most 16 runes.
func splitText(s string) []string {
	var out []string
	for s != "" {
		end := strings.IndexByte(s, ' ')
		if end < 0 {
			end = len(s)
		}
		for end < len(s) && s[end] == ' ' {
			end++
		}
		word := s[:end]
		s = s[end:]
		for utf8.RuneCountInString(word) > 16 {
			cut := 0
			for i := 0; i < 16; i++ {
				_, n := utf8.DecodeRuneInString(word[cut:])
				cut += n
			}
			out = append(out, word[:cut])
			word = word[cut:]
		}
		out = append(out, word)
	}
	return out
}

// splitN cuts s into at most n non-empty pieces on rune boundaries.
func splitN(s string, n int) []string {
	runes := []rune(s)
	if len(runes) == 0 {
		return nil
	}
	n = min(n, len(runes))
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, string(runes[i*len(runes)/n:(i+1)*len(runes)/n]))
	}
	return out
}

func errorBody(status int, code, message string) map[string]any {
	typ := "invalid_request_error"
	switch {
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	case status == http.StatusForbidden:
		typ = "permission_error"
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status >= 500:
		typ = "server_error"
	}
	if message == "" {
		message = defaultMessage(status, code)
	}
	var c any // JSON null when there is no code, as OpenAI sends for 500s
	if code != "" {
		c = code
	}
	return map[string]any{"message": message, "type": typ, "param": nil, "code": c}
}

func defaultMessage(status int, code string) string {
	switch {
	case code == "context_length_exceeded":
		return "This model's maximum context length is 8192 tokens. However, your messages resulted in 9001 tokens. Please reduce the length of the messages."
	case code == "model_not_found":
		return "The model does not exist or you do not have access to it."
	case status == http.StatusTooManyRequests:
		return "Rate limit reached for requests. Please try again later."
	case status == http.StatusUnauthorized:
		return "Incorrect API key provided."
	case status >= 500:
		return "The server had an error while processing your request. Sorry about that!"
	default:
		return fmt.Sprintf("fake: error %d", status)
	}
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]any{"error": errorBody(status, code, message)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "fake: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
