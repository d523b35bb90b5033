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
	// oldResultStubAt: tool results longer than this are replaced with a
	// stub in turns older than resultTurns, and in every earlier turn at
	// layer 2.
	oldResultStubAt = 500
	// resultTurns is how many of the latest earlier turns keep their tool
	// results whole while the history is within the budget: the turn a
	// follow-up question is about. Older results are stubbed at every
	// size of history (the answers that used them stay); a result turns
	// into its stub once, when its turn ages past this, so the request
	// changes there and stays the same from then on.
	resultTurns = 1
	// summaryMaxChars caps a model-written summary (~1000 tokens).
	summaryMaxChars = 4000
	// keepTurns is how many recent earlier turns layer 3 keeps verbatim.
	keepTurns = 2
	// foldTo: a fold for the history budget leaves the history at about
	// this share of the budget (counting the new summary at its largest),
	// so that the next fold (and the next change of the summary, and of
	// the prompt's cached prefix with it) is many turns away, while the
	// latest turns stay verbatim: with the default budget (5,000 tokens)
	// a chat of ~240-byte messages keeps 15 to 35 turns and folds about
	// every 20 (bench/economy).
	foldTo = 0.6
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
	if err := a.budget(ctx, st, specs, step); err != nil {
		return nil, err
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

// budget keeps the history a request carries within Config.HistoryBudget:
// earlier turns' tool results are stubbed first (layers 1 and 2); if that
// is not enough, the oldest turns are folded into the rolling summary,
// enough of them to leave the history near foldTo of the budget, so that
// folds, and changes to the summary, are rare. This turn's messages are
// never folded; the window's own check (fit) deals with a turn that alone
// exceeds the budget.
func (a *Agent) budget(ctx context.Context, st *turnState, specs []llm.ToolSpec, step int) error {
	b := a.cfg.HistoryBudget
	if b <= 0 || a.historyTokens(st) <= b {
		return nil
	}
	if st.layer < layerStubs {
		before := EstimateTokens(a.render(st), specs)
		st.emit(a, Event{Kind: EventCompactionStart, Step: step, Layer: layerStubs, TokensBefore: before})
		st.layer = layerStubs
		st.emit(a, Event{Kind: EventCompactionEnd, Step: step, Layer: layerStubs, TokensBefore: before,
			TokensAfter: EstimateTokens(a.render(st), specs)})
		if a.historyTokens(st) <= b {
			return nil
		}
	}
	cut := a.budgetCut(st, int(float64(b)*foldTo))
	if cut == 0 {
		return nil
	}
	before := EstimateTokens(a.render(st), specs)
	st.emit(a, Event{Kind: EventCompactionStart, Step: step, Layer: layerFoldOld, TokensBefore: before})
	err := a.fold(ctx, st, cut)
	ev := Event{Kind: EventCompactionEnd, Step: step, Layer: layerFoldOld, TokensBefore: before,
		TokensAfter: EstimateTokens(a.render(st), specs)}
	if err != nil {
		ev.Err = err.Error()
	}
	st.emit(a, ev)
	if err != nil && ctx.Err() == nil {
		// The budget saves cost; the request still fits the window without
		// the fold (fit checks), so the turn goes on, and a later turn
		// folds again.
		a.log.Warn("history budget: fold failed; the request carries the longer history", "session_id", st.t.SessionID, "err", err)
		return nil
	}
	return err
}

// historyTokens estimates what the history adds to a request: the rolling
// summary and every message after the system prompt, as rendered now.
func (a *Agent) historyTokens(st *turnState) int {
	return EstimateTokens(a.render(st)[1:], nil) + len(st.summary)/4
}

// budgetCut is where a fold for the budget ends: the first turn boundary
// from which the rest of the history, this turn and a summary of the
// greatest size fit in target tokens; all earlier turns when none does.
func (a *Agent) budgetCut(st *turnState, target int) int {
	rest := EstimateTokens(st.history(), nil) + summaryMaxChars/4
	hist := a.renderHist(st)
	suffix := make([]int, len(hist)+1) // suffix[i]: tokens of hist[i:]
	for i := len(hist) - 1; i >= 0; i-- {
		suffix[i] = suffix[i+1] + EstimateTokens(hist[i:i+1], nil)
	}
	for _, s := range turnStarts(st.hist) {
		if s > 0 && rest+suffix[s] <= target {
			return s
		}
	}
	return len(st.hist)
}

// summariserSystem is the system prompt of the summary call.
const summariserSystem = "You compress chat transcripts. Write a concise summary (at most 300 words) of the conversation below for the assistant's own later reference: facts about the user, decisions, results of tool calls that still matter, and open tasks. Plain text, no preamble."

// summariserInput is the most characters one summary call reads (the
// previous summary and a chunk of transcript): about half the window, so
// that the call itself fits.
func (a *Agent) summariserInput() int { return a.cfg.ContextWindow * 2 }

// fold folds hist[:cut] into the rolling summary and stores it, in chunks
// that each fit the summariser's input with the summary so far: every
// message is read by exactly one summary call, none is dropped, and the
// summary and the boundary it covers are stored after each chunk, so that
// a failure or a restart halfway loses nothing and folds nothing twice.
func (a *Agent) fold(ctx context.Context, st *turnState, cut int) error {
	if cut <= 0 {
		return nil
	}
	old := st.hist[:cut]
	lines := make([]string, len(old))
	for i, e := range old {
		lines[i] = transcriptLine(e)
	}
	// The summary so far comes with each chunk; with a window so small
	// that it would leave less than half the input, the chunk keeps half.
	room := max(a.summariserInput()-summaryMaxChars-64, a.summariserInput()/2)
	start := 0
	for _, end := range foldChunks(old, lines, room) {
		text, err := a.summarise(ctx, st, lines[start:end])
		if err != nil {
			return err
		}
		if err := a.cfg.Store.SaveSummary(context.WithoutCancel(ctx), st.t.SessionID, old[end-1].id, text); err != nil {
			return fmt.Errorf("agent: save summary: %w", err)
		}
		st.summary, st.prompt.Summary = text, text
		st.hist = st.hist[end-start:]
		start = end
	}
	st.hist = append([]entry(nil), st.hist...)
	return nil
}

// foldChunks splits old (as lines) into chunks of at most room characters
// and returns the end of each. A chunk ends before a tool result only when
// a call with its results is by itself larger than room; a single line
// larger than room is a chunk of its own.
func foldChunks(old []entry, lines []string, room int) []int {
	var ends []int
	start, size, open := 0, 0, 0 // open: the latest index > start where a chunk may begin
	for i, line := range lines {
		n := len(line) + 1
		if i > start && size+n > room {
			end := i
			if old[i].Role == llm.RoleTool && open > start {
				end = open // keep the call with its results
			}
			ends = append(ends, end)
			size = 0
			for _, l := range lines[end:i] {
				size += len(l) + 1
			}
			start = end
		}
		if old[i].Role != llm.RoleTool {
			open = i
		}
		size += n
	}
	return append(ends, len(lines))
}

// summarise asks the model for the summary so far extended by lines.
func (a *Agent) summarise(ctx context.Context, st *turnState, lines []string) (string, error) {
	var b strings.Builder
	if st.summary != "" {
		b.WriteString("Summary so far:\n" + st.summary + "\n\nThen:\n")
	}
	b.WriteString(strings.Join(lines, "\n"))
	req := llm.Request{Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: summariserSystem},
		{Role: llm.RoleUser, Content: b.String()},
	}, MaxTokens: summaryMaxChars / 4}
	resp, err := a.cfg.Model.Complete(ctx, req, nil)
	st.modelCalls++
	if err != nil {
		return "", fmt.Errorf("agent: summarise history: %w", err)
	}
	st.usage = st.usage.Add(resp.Usage)
	text := truncate(strings.TrimSpace(resp.Message.Content), summaryMaxChars)
	if text == "" {
		return "", errors.New("agent: summarise history: the model returned an empty summary")
	}
	return text, nil
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
	out = append(out, a.renderHist(st)...)
	out = append(out, st.history()...)
	out = RepairOrphans(out)
	limit := requestResultCap(a.cfg.ContextWindow)
	for i := range out {
		if out[i].Role == llm.RoleTool {
			out[i].Content = truncate(out[i].Content, limit)
		}
	}
	return out
}

// renderHist renders the earlier turns, one message an entry, with the
// compaction layers in force applied.
func (a *Agent) renderHist(st *turnState) []llm.Message {
	out := make([]llm.Message, 0, len(st.hist))
	seen := map[string]bool{}
	limit := requestResultCap(a.cfg.ContextWindow)
	recent := 0 // hist[recent:] are the resultTurns latest earlier turns
	if starts := turnStarts(st.hist); len(starts) > resultTurns {
		recent = starts[len(starts)-resultTurns]
	}
	for i, e := range st.hist {
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
		if (st.layer >= layerStubs || i < recent) && m.Role == llm.RoleTool && len(m.Content) > oldResultStubAt {
			m.Content = fmt.Sprintf("[earlier tool result omitted: %d characters]", len(m.Content))
		}
		if m.Role == llm.RoleTool {
			m.Content = truncate(m.Content, limit)
		}
		out = append(out, m)
	}
	return out
}

// requestBytes is the size of a request's text: every message's content,
// name and tool calls, and every tool's spec (the JSON framing around them
// is not counted).
func requestBytes(msgs []llm.Message, tools []llm.ToolSpec) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Role) + len(m.Content) + len(m.Name) + len(m.ToolCallID)
		for _, c := range m.ToolCalls {
			n += len(c.ID) + len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return n
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
