package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"net/http"
)

// Probe checks that the model server answers, with GET {base_url}/models
// and no retries, for readiness checks. A server that answers but has no
// /models route (404, 405) is reachable; a rejected key (401, 403), a
// server error or a network failure is an *Error saying so.
func (c *Client) Probe(ctx context.Context) error {
	_, err := c.Models(ctx)
	return err
}

// Models lists the model ids the server offers (GET {base_url}/models, no
// retries). A server without that route gives nil and no error.
func (c *Client) Models(ctx context.Context) ([]string, error) {
	list, err := c.api.ListModels(ctx)
	if err != nil {
		e := c.classify(ctx, ctx, c.cfg.Model, err, &captured{}, false)
		if le, ok := e.(*Error); ok && (le.Status == http.StatusNotFound || le.Status == http.StatusMethodNotAllowed) {
			return nil, nil
		}
		return nil, e
	}
	if c.provider == ProviderAzure {
		return nil, nil // Azure lists base models, not the deployments llm.model names
	}
	ids := make([]string, 0, len(list.Models))
	for _, m := range list.Models {
		ids = append(ids, m.ID)
	}
	return ids, nil
}

// Capabilities is what Features found the model and its server can do.
type Capabilities struct {
	Provider string // configured or detected from the base URL
	// Tools: offered a tool and asked to use it, the model answered with a
	// structured call to it.
	Tools Capability
	// ForcedCall: a call forced with tool_choice (structured output, which
	// learning needs) came back as that call.
	ForcedCall Capability
	// StreamUsage: a streamed answer reported its token usage.
	StreamUsage Capability
	// Images: a request with an image input was answered.
	Images Capability
}

// Capability is one probe's outcome: OK, or Detail says what happened.
type Capability struct {
	OK     bool
	Detail string
}

// probePNG is an 8×8 white PNG.
func probePNG() []byte {
	img := image.NewGray(image.Rect(0, 0, 8, 8))
	for i := range img.Pix {
		img.Pix[i] = 0xff
	}
	var b bytes.Buffer
	_ = png.Encode(&b, img) // into memory: cannot fail
	return b.Bytes()
}

// Features probes the primary model with three short requests (a tool
// offered, a forced call, an image) and reports what works. Each request
// is a real model call: it costs a few hundred tokens. Errors other than
// the model refusing a feature (the server unreachable, the key refused)
// end the probe early with err.
func (c *Client) Features(ctx context.Context) (Capabilities, error) {
	caps := Capabilities{Provider: c.provider}
	clock := ToolSpec{Name: "current_time", Description: "Returns the current time.",
		Parameters: []byte(`{"type":"object","properties":{}}`)}
	status := ToolSpec{Name: "report_status", Description: "Reports a status.",
		Parameters: []byte(`{"type":"object","properties":{"status":{"type":"string"}},"required":["status"]}`)}
	probes := []struct {
		req              Request
		into             *Capability
		refused, textual string // what an error, and an answer without the call, say
	}{
		{Request{Messages: []Message{
			{Role: RoleSystem, Content: "You answer questions about the time by calling current_time."},
			{Role: RoleUser, Content: "What time is it now? Call the current_time tool."},
		}, Tools: []ToolSpec{clock}, MaxTokens: 200}, &caps.Tools,
			"refused a request with tools: ", "answered in text instead of calling the tool offered"},
		{Request{Messages: []Message{{Role: RoleUser, Content: `Report the status "ok".`}},
			Tools: []ToolSpec{status}, ForceTool: status.Name, MaxTokens: 200}, &caps.ForcedCall,
			"refused a forced call: ", "answered in text although the call was forced (tool_choice ignored)"},
		{Request{Messages: []Message{{Role: RoleUser, Content: "What colour is this image? One word.",
			Images: []Image{{MIME: "image/png", Data: probePNG()}}}}, MaxTokens: 50}, &caps.Images,
			"refused an image input: ", ""},
	}
	for i, p := range probes {
		resp, err := c.Complete(ctx, p.req, nil)
		switch {
		case fatalProbe(err):
			return caps, err
		case err != nil:
			p.into.Detail = p.refused + err.Error()
		case len(p.req.Tools) == 0:
			*p.into = Capability{OK: true, Detail: "answered"}
		case hasCall(resp, p.req.Tools[0].Name):
			*p.into = Capability{OK: true, Detail: "called " + p.req.Tools[0].Name}
		default:
			p.into.Detail = p.textual
		}
		if i > 0 || err != nil {
			continue
		}
		if resp.Usage.TotalTokens > 0 || resp.Usage.PromptTokens > 0 {
			caps.StreamUsage = Capability{OK: true, Detail: fmt.Sprintf("%d prompt + %d completion tokens", resp.Usage.PromptTokens, resp.Usage.CompletionTokens)}
		} else {
			caps.StreamUsage.Detail = "a streamed answer carried no usage: token budgets and /status count nothing"
		}
	}
	return caps, nil
}

// fatalProbe reports whether a probe's error says nothing about the model's
// features: the context ended, the server is unreachable or failing, or the
// key was refused.
func fatalProbe(err error) bool {
	if err == nil {
		return false
	}
	e, ok := errorsAs[*Error](err)
	if !ok {
		return true
	}
	return e.Status == 0 || e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden ||
		e.Status == http.StatusNotFound || e.Status == http.StatusTooManyRequests || e.Status >= 500
}

func hasCall(resp Response, name string) bool {
	for _, c := range resp.Message.ToolCalls {
		if c.Name == name && json.Valid([]byte(c.Arguments)) {
			return true
		}
	}
	return false
}
