package skills

// Kind prompt: a templated sub-call to the model.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-gateway/switchboard/llm"
)

// defaultPromptTimeout leaves a sub-call time to write a few paragraphs.
const defaultPromptTimeout = 60 * time.Second

// Model is the part of the LLM client prompt tools need.
type Model interface {
	Complete(ctx context.Context, req llm.Request, onDelta func(llm.Delta)) (llm.Response, error)
}

var _ Model = (*llm.Client)(nil)

type promptTool struct {
	model   Model
	prompt  tmpl
	system  *tmpl
	timeout time.Duration
}

func (b *defBuilder) prompt(m Model) (func(context.Context, json.RawMessage) (string, error), int) {
	d := b.def
	p := &promptTool{model: m, timeout: d.Timeout}
	if p.timeout == 0 {
		p.timeout = defaultPromptTimeout
	}
	if strings.TrimSpace(d.Prompt) == "" {
		b.add("prompt", "required: the message sent to the model, such as \"Summarise in {style}: {text}\"")
	} else {
		p.prompt, _ = b.template("prompt", d.Prompt, false)
	}
	if d.System != "" {
		t, _ := b.template("system", d.System, false)
		p.system = &t
	}
	return p.call, d.MaxResponseChars
}

func (p *promptTool) call(parent context.Context, raw json.RawMessage) (string, error) {
	if p.model == nil {
		return "", errors.New("no model is configured for prompt tools")
	}
	args, err := parseArgs(raw)
	if err != nil {
		return "", err
	}
	text := func(s segment) (string, error) { return argText(args[s.param]), nil }
	var msgs []llm.Message
	if p.system != nil {
		sys, _ := p.system.expand(text)
		msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: sys})
	}
	user, _ := p.prompt.expand(text)
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: user})

	ctx, cancel := context.WithTimeout(parent, p.timeout)
	defer cancel()
	resp, err := p.model.Complete(ctx, llm.Request{Messages: msgs}, func(llm.Delta) {})
	if err != nil {
		if parent.Err() == nil && ctx.Err() != nil {
			return "", fmt.Errorf("the model did not answer within %s: %w", p.timeout, err)
		}
		return "", fmt.Errorf("model call: %w", err)
	}
	if strings.TrimSpace(resp.Message.Content) == "" {
		return "", fmt.Errorf("the model returned an empty reply (finish reason %q)", resp.FinishReason)
	}
	return resp.Message.Content, nil
}
