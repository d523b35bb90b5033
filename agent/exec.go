package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/llm"
)

// repeatWarnAt and repeatStopAt are the repeat guard's thresholds: the third
// identical call in a row is refused with an explanation; a fourth stops.
const (
	repeatWarnAt = 3
	repeatStopAt = 4
)

// pending is a call being prepared or run.
type pending struct {
	call   llm.ToolCall
	tool   *Tool
	args   json.RawMessage
	result string
	isErr  bool
	done   bool // result already decided (not run)
}

// execute runs a step's tool calls and returns their results in call order.
// Contiguous concurrency-safe calls run together; any other call runs alone,
// so side effects keep their order.
func (a *Agent) execute(ctx context.Context, st *turnState, step int, calls []llm.ToolCall, ts *Toolset) []llm.Message {
	ps := make([]*pending, len(calls))
	for i, c := range calls {
		if c.ID == "" {
			c.ID = fmt.Sprintf("call_%d_%d", step, i)
			calls[i].ID = c.ID
		}
		p := &pending{call: c}
		ps[i] = p
		st.called[c.Name]++
		st.calls = append(st.calls, c.Name)
		t, ok := ts.Lookup(c.Name)
		if !ok {
			p.result, p.isErr, p.done = unknownTool(c.Name, ts), true, true
			continue
		}
		p.tool = t
		if t.RequiresApproval && !st.approved[approvalKey(step, c.ID)] {
			p.result, p.isErr, p.done = fmt.Sprintf("error: %s needs the user's approval before it runs, and approvals are not available here; tell the user what you wanted to do instead", c.Name), true, true
			continue
		}
		args, msg := t.validate(c.Arguments)
		if msg != "" {
			p.result, p.isErr, p.done = msg, true, true
			continue
		}
		p.args = args
		key := c.Name + "\x00" + canonicalJSON(args)
		if key == st.lastKey {
			st.repeats++
		} else {
			st.lastKey, st.repeats = key, 1
		}
		switch {
		case st.repeats >= repeatStopAt:
			st.stopRepeat = true
			p.result, p.isErr, p.done = fmt.Sprintf("error: %s was called with the same arguments %d times in a row; the turn is being stopped.", c.Name, st.repeats), true, true
		case st.repeats >= repeatWarnAt:
			p.result, p.isErr, p.done = fmt.Sprintf("error: you have called %s with the same arguments %d times in a row and the result will not change. Do something different, or answer the user.", c.Name, st.repeats), true, true
		}
	}

	for i := 0; i < len(ps); {
		if ps[i].done {
			i++
			continue
		}
		j := i + 1
		if ps[i].tool.ConcurrencySafe {
			for j < len(ps) && (ps[j].done || ps[j].tool.ConcurrencySafe) {
				j++
			}
		}
		batch := ps[i:j]
		if err := ctx.Err(); err != nil {
			for _, p := range batch {
				if !p.done {
					p.result, p.isErr, p.done = "error: not run: the turn was cancelled", true, true
				}
			}
			i = j
			continue
		}
		var wg sync.WaitGroup
		for _, p := range batch {
			if p.done {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				a.runTool(ctx, st, step, p)
			}()
		}
		wg.Wait()
		i = j
	}

	out := make([]llm.Message, len(ps))
	for i, p := range ps {
		if p.tool == nil || p.args == nil {
			// Not run at all: report it like a finished call for observers.
			st.emit(a, Event{Kind: EventToolStart, Step: step, Tool: p.call.Name, CallID: p.call.ID, Args: p.call.Arguments})
			st.emit(a, Event{Kind: EventToolEnd, Step: step, Tool: p.call.Name, CallID: p.call.ID, Args: p.call.Arguments, Result: p.result, IsError: true})
		}
		out[i] = llm.Message{Role: llm.RoleTool, ToolCallID: p.call.ID, Name: p.call.Name, Content: p.result}
	}
	return out
}

// runTool runs one call, turning errors and panics into error results.
func (a *Agent) runTool(ctx context.Context, st *turnState, step int, p *pending) {
	if p.done {
		return
	}
	st.emit(a, Event{Kind: EventToolStart, Step: step, Tool: p.call.Name, CallID: p.call.ID, Args: p.call.Arguments,
		Text: p.tool.Description})
	began := time.Now()
	res, err := a.safeCall(ctx, st, p.tool, p.args)
	if err != nil {
		p.result, p.isErr = "error: "+err.Error(), true
	} else {
		p.result = res
		if strings.TrimSpace(res) == "" {
			p.result = "(no output)" // strict servers reject an empty tool message
		}
		if p.tool.Untrusted {
			p.result = UntrustedLabel(p.tool.Name) + "\n" + p.result
		}
		if p.tool.Delivers {
			st.markDelivered()
		}
	}
	limit := p.tool.MaxResultChars
	if limit <= 0 {
		limit = a.cfg.ToolResultMaxChars
	}
	if a.cfg.Redact != nil { // secrets never reach the store, the model or observers
		p.result = a.cfg.Redact(p.result)
	}
	p.result = truncate(p.result, limit)
	p.done = true
	st.emit(a, Event{Kind: EventToolEnd, Step: step, Tool: p.call.Name, CallID: p.call.ID, Args: p.call.Arguments,
		Result: p.result, IsError: p.isErr, Duration: time.Since(began)})
}

func (st *turnState) markDelivered() {
	st.mu.Lock()
	st.delivered = true
	st.mu.Unlock()
}

// safeCall runs a tool and recovers a panic into an error; the panic's
// stack goes to the log (the model gets only the error).
func (a *Agent) safeCall(ctx context.Context, st *turnState, t *Tool, args json.RawMessage) (res string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("tool %s crashed: %v", t.Name, r)
			msg, stack := err.Error(), string(debug.Stack())
			if a.cfg.Redact != nil { // as for the tool's result: the panic value may carry a secret
				msg, stack = a.cfg.Redact(msg), a.cfg.Redact(stack)
			}
			a.log.Error("tool panicked", "chat_id", st.t.ChatID, "session_id", st.t.SessionID, "turn_id", st.turnID,
				"tool", t.Name, "err", msg, "stack", stack)
		}
	}()
	if t.Fn == nil {
		return "", fmt.Errorf("tool %s has no implementation", t.Name)
	}
	return t.Fn(ctx, args)
}

func unknownTool(name string, ts *Toolset) string {
	if slices.Contains(ts.Withdrawn, name) {
		return fmt.Sprintf("error: %s is not available for the rest of this turn: untrusted content (a web page, a file, a tool's output) is in the conversation, and %s acts beyond the reply. Do not try to get around this; tell the user what you would have done, so they can ask for it themselves", name, name)
	}
	names := ts.Names()
	if len(names) == 0 {
		return fmt.Sprintf("error: unknown tool %q; no tools are available in this step", name)
	}
	return fmt.Sprintf("error: unknown tool %q; available tools: %s", name, strings.Join(names, ", "))
}

// truncate caps s at limit characters (runes), saying how much was cut.
func truncate(s string, limit int) string {
	if limit <= 0 || len(s) <= limit {
		return s
	}
	r := []rune(s)
	if len(r) <= limit {
		return s
	}
	return string(r[:limit]) + fmt.Sprintf("\n\n[truncated: showing %d of %d characters]", limit, len(r))
}

// canonicalJSON re-encodes JSON so that key order and spacing do not matter.
func canonicalJSON(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	b, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		return string(raw)
	}
	return string(b)
}
