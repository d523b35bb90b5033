package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/switchboard-gateway/switchboard/llm"
)

// errOverflow means the request cannot be made to fit the context window.
var errOverflow = errors.New("agent: context overflow: the request does not fit the model's context window even after compaction")

const (
	// fitRatio: compaction starts when a request would fill more than 90% of
	// the window, leaving room for the answer.
	fitRatio = 0.9
	// oldResultStubAt: layer 2 replaces earlier turns' tool results longer
	// than this with a stub.
	oldResultStubAt = 500
	// summaryMaxChars caps a model-written summary (~1000 tokens).
	summaryMaxChars = 4000
	// keepTurns is how many recent earlier turns layer 3 keeps verbatim.
	keepTurns = 2
)

// Compaction layers, cheapest first.
const (
	layerNone      = 0
	layerRedundant = 1 // drop text beside earlier tool calls, duplicate results
	layerStubs     = 2 // stub earlier turns' large tool results
	layerFoldOld   = 3 // a model-written summary of older turns
	layerFoldAll   = 4 // a summary of everything before this turn
)

// EstimateTokens is a cheap, conservative token estimate: about four
// characters a token, plus a few tokens of framing per message.
func EstimateTokens(msgs []llm.Message, tools []llm.ToolSpec) int {
	n := 0
	for _, m := range msgs {
		n += 4 + len(m.Content)/4 + len(m.Name)/4
		for _, c := range m.ToolCalls {
			n += 4 + (len(c.Name)+len(c.Arguments))/4
		}
		n += 800 * len(m.Images) // a typical image costs hundreds of tokens
	}
	for _, t := range tools {
		n += 8 + (len(t.Name)+len(t.Description)+len(t.Parameters))/4
	}
	return n
}

// requestResultCap is the request-time cap on a single tool result:
// max(5000, 0.2 × window × 4) characters. The stored copy stays whole.
func requestResultCap(window int) int {
	return max(5000, window*4/5)
}

// fit renders the request messages for a step, escalating compaction until
// they fit in fitRatio of the window.
func (a *Agent) fit(ctx context.Context, st *turnState, specs []llm.ToolSpec, step int) ([]llm.Message, error) {
	limit := int(float64(a.cfg.ContextWindow) * fitRatio)
	sys := []llm.Message{{Role: llm.RoleSystem, Content: st.prompt.Text()}}
	if EstimateTokens(sys, specs) > a.cfg.ContextWindow {
		return nil, fmt.Errorf("%w (the system prompt and tools alone need about %d tokens)", errOverflow, EstimateTokens(sys, specs))
	}
	for {
		msgs := a.render(st)
		if EstimateTokens(msgs, specs) <= limit {
			return msgs, nil
		}
		if err := a.escalate(ctx, st, specs, step); err != nil {
			return nil, err
		}
	}
}

// escalate applies the next compaction layer.
func (a *Agent) escalate(ctx context.Context, st *turnState, specs []llm.ToolSpec, step int) error {
	if st.layer >= layerFoldAll {
		return errOverflow
	}
	before := EstimateTokens(a.render(st), specs)
	next := st.layer + 1
	if next == layerFoldOld && len(turnStarts(st.hist)) <= keepTurns {
		next = layerFoldAll // nothing old enough to fold separately
	}
	if next >= layerFoldOld && len(st.hist) == 0 {
		st.layer = layerFoldAll
		return errOverflow
	}
	st.emit(a, Event{Kind: EventCompactionStart, Step: step, Layer: next, TokensBefore: before})
	if next >= layerFoldOld {
		cut := len(st.hist)
		if next == layerFoldOld {
			starts := turnStarts(st.hist)
			cut = starts[len(starts)-keepTurns]
		}
		if err := a.fold(ctx, st, cut); err != nil {
			st.emit(a, Event{Kind: EventCompactionEnd, Step: step, Layer: next, TokensBefore: before, TokensAfter: before, Err: err.Error()})
			return err
		}
		st.prompt.Tail = a.tail(st, st.t.Location, a.cfg.Now())
	}
	st.layer = next
	after := EstimateTokens(a.render(st), specs)
	st.emit(a, Event{Kind: EventCompactionEnd, Step: step, Layer: next, TokensBefore: before, TokensAfter: after})
	return nil
}

// turnStarts returns the indexes of visible user messages in hist: the
// boundaries where a fold never separates a tool call from its result.
func turnStarts(hist []entry) []int {
	var out []int
	for i, e := range hist {
		if e.Role == llm.RoleUser && !e.hidden {
			out = append(out, i)
		}
	}
	return out
}

// fold replaces hist[:cut] with a model-written summary and stores it.
func (a *Agent) fold(ctx context.Context, st *turnState, cut int) error {
	if cut <= 0 {
		return nil
	}
	old := st.hist[:cut]
	var b strings.Builder
	if st.summary != "" {
		b.WriteString("Summary so far:\n" + st.summary + "\n\nThen:\n")
	}
	budget := a.cfg.ContextWindow * 2 // characters: about half the window
	lines := make([]string, 0, len(old))
	for _, e := range old {
		lines = append(lines, transcriptLine(e))
	}
	// Keep the most recent lines when the old part is itself too large.
	total := 0
	first := len(lines)
	for first > 0 && total+len(lines[first-1]) < budget {
		first--
		total += len(lines[first])
	}
	b.WriteString(strings.Join(lines[first:], "\n"))
	req := llm.Request{Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: "You compress chat transcripts. Write a concise summary (at most 300 words) of the conversation below for the assistant's own later reference: facts about the user, decisions, results of tool calls that still matter, and open tasks. Plain text, no preamble."},
		{Role: llm.RoleUser, Content: b.String()},
	}, MaxTokens: summaryMaxChars / 4}
	resp, err := a.cfg.Model.Complete(ctx, req, nil)
	st.modelCalls++
	if err != nil {
		return fmt.Errorf("agent: summarise history: %w", err)
	}
	st.usage = st.usage.Add(resp.Usage)
	text := truncate(strings.TrimSpace(resp.Message.Content), summaryMaxChars)
	if text == "" {
		return errors.New("agent: summarise history: the model returned an empty summary")
	}
	upTo := old[len(old)-1].id
	if err := a.cfg.Store.SaveSummary(context.WithoutCancel(ctx), st.t.SessionID, upTo, text); err != nil {
		return fmt.Errorf("agent: save summary: %w", err)
	}
	st.summary = text
	st.hist = append([]entry(nil), st.hist[cut:]...)
	return nil
}

func transcriptLine(e entry) string {
	const max = 2000
	switch {
	case e.Role == llm.RoleTool:
		return fmt.Sprintf("[tool %s result] %s", e.Name, truncate(e.Content, max))
	case len(e.ToolCalls) > 0:
		var parts []string
		for _, c := range e.ToolCalls {
			parts = append(parts, fmt.Sprintf("%s(%s)", c.Name, truncate(c.Arguments, 300)))
		}
		return "[assistant called] " + strings.Join(parts, ", ")
	default:
		return fmt.Sprintf("[%s] %s", e.Role, truncate(e.Content, max))
	}
}

// render builds the request messages: system prompt, earlier turns with the
// compaction layers in force applied, this turn verbatim; orphaned tool calls
// repaired and every tool result capped for the request. The entries
// themselves (and the store) are never modified.
func (a *Agent) render(st *turnState) []llm.Message {
	out := make([]llm.Message, 0, len(st.hist)+len(st.cur)+1)
	out = append(out, llm.Message{Role: llm.RoleSystem, Content: st.prompt.Text()})
	seen := map[string]bool{}
	for _, e := range st.hist {
		m := e.Message
		if st.layer >= layerRedundant {
			if m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0 {
				m.Content = ""
			}
			if m.Role == llm.RoleTool {
				key := m.Name + "\x00" + m.Content
				if seen[key] && len(m.Content) > 200 {
					m.Content = "[same result as an earlier call]"
				}
				seen[key] = true
			}
		}
		if st.layer >= layerStubs && m.Role == llm.RoleTool && len(m.Content) > oldResultStubAt {
			m.Content = fmt.Sprintf("[earlier tool result omitted: %d characters]", len(m.Content))
		}
		out = append(out, m)
	}
	for _, e := range st.cur {
		out = append(out, e.Message)
	}
	out = RepairOrphans(out)
	limit := requestResultCap(a.cfg.ContextWindow)
	for i := range out {
		if out[i].Role == llm.RoleTool {
			out[i].Content = truncate(out[i].Content, limit)
		}
	}
	return out
}

// pairedInOrder reports whether msgs need no repair: each assistant
// message's tool calls are followed by exactly their results, in order, and
// no other message is a tool result.
func pairedInOrder(msgs []llm.Message) bool {
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role == llm.RoleTool {
			return false
		}
		if m.Role != llm.RoleAssistant {
			continue
		}
		for _, c := range m.ToolCalls {
			i++
			if i >= len(msgs) || msgs[i].Role != llm.RoleTool || msgs[i].ToolCallID != c.ID {
				return false
			}
		}
	}
	return true
}

// orphanResult is the synthetic result for a call that never got one.
const orphanResult = "error: no result was recorded for this call (the turn was interrupted)"

// RepairOrphans makes a message list valid for strict providers: every
// assistant tool call is followed by its result (a synthetic error result is
// added for a missing one), and tool results without a preceding call are
// dropped. It returns a new slice.
func RepairOrphans(msgs []llm.Message) []llm.Message {
	if pairedInOrder(msgs) {
		return msgs
	}
	out := make([]llm.Message, 0, len(msgs))
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role == llm.RoleTool {
			continue // a result whose call was not just before it
		}
		out = append(out, m)
		if m.Role != llm.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		results := map[string]llm.Message{}
		j := i + 1
		for ; j < len(msgs) && msgs[j].Role == llm.RoleTool; j++ {
			results[msgs[j].ToolCallID] = msgs[j]
		}
		for _, c := range m.ToolCalls {
			if r, ok := results[c.ID]; ok {
				out = append(out, r)
			} else {
				out = append(out, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: orphanResult})
			}
		}
		i = j - 1
	}
	return out
}
