package llm

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Where providers differ from the OpenAI dialect, the client adapts: from
// configuration (Config.Provider, Config.Models), from what the base URL
// and the model's name say, and from the first refusal of the server
// (learnt per model for the client's life, and the request sent again at
// once). What it knows how to adapt:
//
//   - Reasoning models (OpenAI's o-series and gpt-5, by name, or any model
//     whose server refuses max_tokens in favour of max_completion_tokens):
//     the output cap goes as max_completion_tokens and no temperature is
//     sent.
//   - A temperature the server refuses is left out.
//   - Azure OpenAI: /openai/deployments/{deployment}/chat/completions with
//     an api-version and the key in an api-key header.
//   - Mistral's tool-call ids (9 letters and digits, the only form its API
//     and its tokenizer on vLLM take in a history): every other id is sent
//     as a stable 9-character form of it.
//   - A server that refuses tool_choice naming a function (llama.cpp's):
//     a forced call is sent as "required" with that one tool offered.
//
// Independent of the provider, tool-call ids are made unique: a call
// without an id, or with one that the request's history already holds
// (servers that answer call_0 at every step), gets a fresh one.

// Providers Config.Provider names. Only ProviderAzure and ProviderMistral
// change requests; the others are recognised from their hosts for doctor
// to name them.
const (
	ProviderOpenAI     = "openai"
	ProviderAzure      = "azure"
	ProviderAnthropic  = "anthropic"
	ProviderGemini     = "gemini"
	ProviderDeepSeek   = "deepseek"
	ProviderMistral    = "mistral"
	ProviderGroq       = "groq"
	ProviderOpenRouter = "openrouter"
	ProviderOllama     = "ollama"
	ProviderVLLM       = "vllm"
	ProviderLlamaCpp   = "llamacpp"
	ProviderLMStudio   = "lmstudio"
	ProviderOther      = "other"
)

// Providers lists the names Config.Provider takes ("" too: detect).
var Providers = []string{ProviderOpenAI, ProviderAzure, ProviderAnthropic, ProviderGemini, ProviderDeepSeek,
	ProviderMistral, ProviderGroq, ProviderOpenRouter, ProviderOllama, ProviderVLLM, ProviderLlamaCpp,
	ProviderLMStudio, ProviderOther}

// DefaultAzureAPIVersion is the api-version sent to Azure OpenAI when
// neither Config.APIVersion nor the base URL names one.
const DefaultAzureAPIVersion = "2024-10-21"

// ModelSettings are the request settings of one model (llm.models.NAME).
type ModelSettings struct {
	// Reasoning marks a reasoning model: the output cap is sent as
	// max_completion_tokens and no temperature is sent. nil: detected.
	Reasoning *bool
	// Temperature is sent with requests to this model; nil: Config's.
	Temperature *float64
}

// DetectProvider names the provider a base URL points at: by host for
// the hosted APIs, by the usual port for local servers (Ollama 11434, LM
// Studio 1234); ProviderOther when it cannot tell.
func DetectProvider(baseURL string) string {
	u, err := url.Parse(baseURL)
	if err != nil {
		return ProviderOther
	}
	host := strings.ToLower(u.Hostname())
	hosts := []struct{ suffix, provider string }{
		{"api.openai.com", ProviderOpenAI},
		{".openai.azure.com", ProviderAzure},
		{".cognitiveservices.azure.com", ProviderAzure},
		{"api.anthropic.com", ProviderAnthropic},
		{"generativelanguage.googleapis.com", ProviderGemini},
		{"api.deepseek.com", ProviderDeepSeek},
		{"api.mistral.ai", ProviderMistral},
		{"api.groq.com", ProviderGroq},
		{"openrouter.ai", ProviderOpenRouter},
	}
	for _, h := range hosts {
		if host == strings.TrimPrefix(h.suffix, ".") || strings.HasSuffix(host, h.suffix) {
			return h.provider
		}
	}
	if strings.Contains(u.Path, "/openai/deployments/") {
		return ProviderAzure
	}
	switch u.Port() {
	case "11434":
		return ProviderOllama
	case "1234":
		return ProviderLMStudio
	}
	return ProviderOther
}

// reasoningName matches the names of OpenAI's reasoning models, also
// behind a router's vendor prefix ("openai/o3-mini").
var reasoningName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(o[1-9]([-.].*)?|gpt-5.*)$`) })

// IsReasoningModel reports whether a model's name is one of OpenAI's
// reasoning models.
func IsReasoningModel(model string) bool {
	name := strings.ToLower(model)
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	return reasoningName().MatchString(name)
}

// mistralName matches Mistral's model families, served by Mistral or by
// vLLM with Mistral's tokenizer: both take only Mistral's tool-call ids.
var mistralName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(mistral|mixtral|codestral|ministral|magistral|devstral|pixtral)`)
})

// azureTarget is what an Azure base URL says: the resource's root, the
// deployment it names (if it names one) and its api-version (if any).
type azureTarget struct {
	root, deployment, apiVersion string
}

// parseAzure reads an Azure base URL: the resource's root
// (https://NAME.openai.azure.com), optionally with /openai,
// /openai/deployments/DEPLOYMENT and ?api-version=….
func parseAzure(base string) (azureTarget, error) {
	u, err := url.Parse(base)
	if err != nil {
		return azureTarget{}, err
	}
	t := azureTarget{apiVersion: u.Query().Get("api-version")}
	path := strings.TrimRight(u.Path, "/")
	if before, after, ok := strings.Cut(path, "/openai/deployments/"); ok {
		t.deployment, _, _ = strings.Cut(after, "/")
		path = before
	} else {
		path = strings.TrimSuffix(path, "/openai")
	}
	u.Path, u.RawQuery, u.RawPath = path, "", ""
	t.root = strings.TrimRight(u.String(), "/")
	return t, nil
}

// quirks is what the client learnt about a model from its server's
// refusals.
type quirks struct {
	mu         sync.Mutex
	reasoning  map[string]bool // refused max_tokens: send max_completion_tokens, no temperature
	noTemp     map[string]bool // refused the temperature
	requiredTC map[string]bool // refused tool_choice naming a function
	mistralIDs bool            // refused a tool-call id that was not Mistral's form
}

func (q *quirks) has(m map[string]bool, model string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return m[model]
}

// learn records what a refusal of model says; it reports whether there
// was something new to adapt to (then the request is worth sending again).
func (q *quirks) learn(model string, e *Error, req wireOptions, forced bool) (what string, ok bool) {
	if e.Status != http.StatusBadRequest && e.Status != http.StatusUnprocessableEntity {
		return "", false
	}
	msg := strings.ToLower(e.Message + " " + e.Code)
	q.mu.Lock()
	defer q.mu.Unlock()
	set := func(m *map[string]bool) bool {
		if *m == nil {
			*m = map[string]bool{}
		}
		if (*m)[model] {
			return false
		}
		(*m)[model] = true
		return true
	}
	switch {
	case strings.Contains(msg, "max_completion_tokens") && strings.Contains(msg, "max_tokens") && !req.reasoning:
		return "the model wants max_completion_tokens (a reasoning model)", set(&q.reasoning)
	case strings.Contains(msg, "temperature") && req.temperature != nil:
		return "the model refuses a temperature", set(&q.noTemp)
	case strings.Contains(msg, "tool_choice") && forced && !req.requiredChoice:
		return `the server refuses tool_choice naming a function: "required" instead`, set(&q.requiredTC)
	case strings.Contains(msg, "tool call id") && !q.mistralIDs:
		q.mistralIDs = true
		return "the server takes only Mistral's tool-call ids", true
	}
	return "", false
}

// wireOptions are the per-model parts of a request's body.
type wireOptions struct {
	streamOptions  bool
	reasoning      bool     // max_completion_tokens for the cap, no temperature
	temperature    *float64 // nil: none
	requiredChoice bool     // a forced call as "required" with that tool alone
}

// options returns the body options for model.
func (c *Client) options(model string, streamOptions bool) wireOptions {
	o := wireOptions{streamOptions: streamOptions, temperature: c.cfg.Temperature}
	set := c.cfg.Models[model]
	if set.Temperature != nil {
		o.temperature = set.Temperature
	}
	switch {
	case set.Reasoning != nil:
		o.reasoning = *set.Reasoning
	default:
		o.reasoning = IsReasoningModel(model) || c.quirks.has(c.quirks.reasoning, model)
	}
	if o.reasoning || c.quirks.has(c.quirks.noTemp, model) {
		o.temperature = nil
	}
	o.requiredChoice = c.quirks.has(c.quirks.requiredTC, model)
	return o
}

// mistralIDs reports whether tool-call ids go out in Mistral's form.
func (c *Client) mistralIDs() bool {
	if c.provider == ProviderMistral {
		return true
	}
	c.quirks.mu.Lock()
	learnt := c.quirks.mistralIDs
	c.quirks.mu.Unlock()
	if learnt {
		return true
	}
	return slices.ContainsFunc(append([]string{c.cfg.Model}, c.cfg.FallbackModels...), mistralName().MatchString)
}

// prepare rewrites a request for the provider: tool-call ids in Mistral's
// form where it needs them. req is not modified.
func (c *Client) prepare(req Request) Request {
	if !c.mistralIDs() {
		return req
	}
	msgs := slices.Clone(req.Messages)
	for i, m := range msgs {
		if len(m.ToolCalls) > 0 {
			calls := slices.Clone(m.ToolCalls)
			for j := range calls {
				calls[j].ID = mistralForm(calls[j].ID)
			}
			msgs[i].ToolCalls = calls
		}
		if m.Role == RoleTool && m.ToolCallID != "" {
			msgs[i].ToolCallID = mistralForm(m.ToolCallID)
		}
	}
	req.Messages = msgs
	return req
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

var mistralIDForm = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9]{9}$`) })

// mistralForm is id as Mistral takes it: itself if it is 9 letters and
// digits, else 9 drawn from its hash (stable, so a call and its result
// keep matching, and the prompt prefix stays the same from step to step).
func mistralForm(id string) string {
	if mistralIDForm().MatchString(id) {
		return id
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	n := h.Sum64()
	b := make([]byte, 9)
	for i := range b {
		b[i] = idAlphabet[n%uint64(len(idAlphabet))]
		n /= uint64(len(idAlphabet))
		if n == 0 {
			n = h.Sum64() ^ uint64(i+1)*0x9e3779b97f4a7c15
		}
	}
	return string(b)
}

// idAssigner gives each call of an answer an id unique within the
// request's history: the server's own when it sent one not seen before,
// else a fresh one.
type idAssigner struct {
	used    map[string]bool
	mistral bool
}

func newIDAssigner(history []Message, mistral bool) *idAssigner {
	a := &idAssigner{used: map[string]bool{}, mistral: mistral}
	for _, m := range history {
		for _, tc := range m.ToolCalls {
			a.used[tc.ID] = true
		}
		if m.ToolCallID != "" {
			a.used[m.ToolCallID] = true
		}
	}
	return a
}

// assign returns the id a call the server named server (maybe "") gets.
func (a *idAssigner) assign(server string) string {
	if server != "" && !a.used[server] {
		a.used[server] = true
		return server
	}
	for {
		id := randomID(a.mistral)
		if !a.used[id] {
			a.used[id] = true
			return id
		}
	}
}

func randomID(mistral bool) string {
	n, prefix := 24, "call_"
	if mistral {
		n, prefix = 9, ""
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = idAlphabet[rand.IntN(len(idAlphabet))]
	}
	return prefix + string(b)
}

// checkProvider validates Config.Provider.
func checkProvider(p string) error {
	if p == "" || slices.Contains(Providers, p) {
		return nil
	}
	return fmt.Errorf("llm: config: Provider %q is not one of %s", p, strings.Join(Providers, ", "))
}
