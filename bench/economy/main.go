// Command economy measures what a long conversation costs in requests
// (issue 22): it builds the real binary, runs `serve` with the default
// configuration against a fake model that records every request, holds a
// conversation of -turns turns of ~240-byte messages through the
// OpenAI-compatible chat API, and prints a Markdown table:
//
//	go run ./bench/economy
//
// Rows: the largest request against the naive one that carries the whole
// history at the last turn; the request at a few turns against the naive
// one there; the share of consecutive turns whose static prefix and
// summary are byte-identical (what a provider's prompt cache reuses);
// whether the fact stated at turn 3 is still in the last turn's request;
// whether every message folded into the summary was read by exactly one
// summary call, and every other one is in the last request verbatim. It
// exits 1 when a target is missed. Progress goes to stderr, the table to
// stdout. It needs Linux (/proc) and the Go toolchain.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/bench/internal/convo"
	"github.com/switchboard-gateway/switchboard/bench/internal/gateway"
	breport "github.com/switchboard-gateway/switchboard/bench/internal/report"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/llm"
)

// Targets of issue 22.
const (
	targetMaxShare    = 0.12 // of the naive request at the last turn, set for 1,000 turns
	targetShareTurns  = 1000 // the shortest conversation targetMaxShare is checked at
	targetStableShare = 0.90
)

// Targets of issue 32: the largest request of any turn, and all model
// bytes against those of the code before it (fccdcaf: history budget
// 12,000 tokens, fold to half of it, tool results stubbed only past the
// budget), measured with this program at these lengths.
const (
	targetMaxBytes   = 30_000
	targetBytesShare = 0.65
)

var beforeBytes = map[int]int{300: 12_281_400, 1000: 43_824_000}

func main() {
	turns := flag.Int("turns", 1000, "turns of the conversation")
	budget := flag.Int("history-budget", -1, "agent.history_budget; -1 keeps the default")
	keep := flag.Bool("keep", false, "keep the run's directory (config, database, serve.log)")
	flag.Parse()
	if *turns < convo.FactTurn+1 {
		fmt.Fprintf(os.Stderr, "economy: -turns must be more than %d\n", convo.FactTurn)
		os.Exit(2)
	}
	ok, err := run(*turns, *budget, *keep, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "economy: %v\n", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// turnRequest is what is kept of a turn's request.
type turnRequest struct {
	bytes, tokens int
	naiveBytes    int
	stable        string // the system prompt's static prefix and summary
	fact          string // where the fact is: "summary", "tail", "history" or ""
	verbatim      map[string]bool
}

// recorder keeps what the model saw, request by request.
type recorder struct {
	mu       sync.Mutex
	last     int // the conversation's last turn
	turns    map[int]*turnRequest
	folded   map[string]int // message key → summary calls that read it
	folds    int
	learning struct{ calls, bytes int }
	bytes    [4]int // every request's bytes as sent, by convo.Kind
	problems []string
}

func newRecorder(last int) *recorder {
	return &recorder{last: last, turns: map[int]*turnRequest{}, folded: map[string]int{}}
}

func userKey(n int) string   { return fmt.Sprintf("user %d", n) }
func answerKey(n int) string { return fmt.Sprintf("answer %d", n) }

// keyOf names a conversation message ("" for others).
func keyOf(role llm.Role, content string) string {
	switch {
	case role == llm.RoleUser:
		if n, ok := convo.TurnOf(content, "turn"); ok {
			return userKey(n)
		}
	case role == llm.RoleAssistant:
		if n, ok := convo.TurnOf(content, "answer"); ok {
			return answerKey(n)
		}
	}
	return ""
}

func (r *recorder) observe(req convo.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if req.Kind >= 0 && int(req.Kind) < len(r.bytes) {
		r.bytes[req.Kind] += len(req.Rec.Raw)
	}
	switch req.Kind {
	case convo.Summary:
		r.folds++
		r.fold(req)
	case convo.Forced:
		r.learning.calls++
		r.learning.bytes += len(req.Rec.Raw)
	case convo.Turn:
		if req.Turn == 0 || r.turns[req.Turn] != nil {
			r.problems = append(r.problems, fmt.Sprintf("an unexpected turn request (turn %d)", req.Turn))
			return
		}
		r.turns[req.Turn] = r.turnOf(req)
	}
}

// fold counts the messages a summary call reads (not the summary so far).
func (r *recorder) fold(req convo.Request) {
	in := req.Rec.Messages[len(req.Rec.Messages)-1].Content
	if strings.HasPrefix(in, "Summary so far:\n") {
		_, in, _ = strings.Cut(in, "\n\nThen:\n")
	}
	for _, line := range strings.Split(in, "\n") {
		role, text, ok := strings.Cut(strings.TrimPrefix(line, "["), "] ")
		if !ok {
			continue
		}
		if k := keyOf(llm.Role(role), text); k != "" {
			r.folded[k]++
		}
	}
}

func (r *recorder) turnOf(req convo.Request) *turnRequest {
	msgs := req.Rec.Messages
	sys := msgs[0].Content
	stable, tail, _ := strings.Cut(sys, "\n\n# Context\n")
	tr := &turnRequest{bytes: len(req.Rec.Raw), tokens: agent.EstimateTokens(msgs, req.Rec.Tools), stable: stable}
	switch {
	case strings.Contains(stable, convo.Fact):
		tr.fact = "summary"
	case strings.Contains(tail, convo.Fact):
		tr.fact = "memories"
	}
	tr.verbatim = map[string]bool{}
	for _, m := range msgs[1:] {
		if k := keyOf(m.Role, m.Content); k != "" {
			tr.verbatim[k] = true
		}
		if tr.fact == "" && strings.Contains(m.Content, convo.Fact) {
			tr.fact = "history"
		}
	}
	tr.naiveBytes = naiveBytes(req)
	if req.Turn != r.last {
		tr.verbatim = nil // only the last turn's are checked
	}
	return tr
}

// naiveBytes is the size of the request had it carried the whole history:
// the same request with the summary left out of the system prompt and every
// message of the conversation so far in place of those it carries.
func naiveBytes(req convo.Request) int {
	var body map[string]json.RawMessage
	if err := json.Unmarshal(req.Rec.Raw, &body); err != nil {
		return 0
	}
	sys := req.Rec.Messages[0].Content
	if stable, tail, ok := strings.Cut(sys, "\n\n"+agent.SummaryTitle+"\n"); ok {
		_, after, _ := strings.Cut(tail, "\n\n# Context\n")
		sys = stable + "\n\n# Context\n" + after
	}
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	msgs := []message{{"system", sys}}
	for t := 1; t < req.Turn; t++ {
		msgs = append(msgs, message{"user", convo.UserText(t)}, message{"assistant", convo.AnswerText(t)})
	}
	msgs = append(msgs, message{"user", convo.UserText(req.Turn)})
	var err error
	if body["messages"], err = json.Marshal(msgs); err != nil {
		return 0
	}
	out, err := json.Marshal(body)
	if err != nil {
		return 0
	}
	return len(out)
}

func run(turns, budget int, keep bool, out, progress io.Writer) (bool, error) {
	root, err := os.MkdirTemp("", "switchboard-economy-")
	if err != nil {
		return false, err
	}
	if keep {
		fmt.Fprintf(progress, "run kept in %s\n", root)
	} else {
		defer os.RemoveAll(root)
	}
	fmt.Fprintln(progress, "building switchboard (go build -trimpath -tags goolm)…")
	bin, err := gateway.Build(root)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	rec := newRecorder(turns)
	var cfg config.Config
	rig, err := convo.Start(ctx, convo.Options{Bin: bin, Root: root, Observe: rec.observe, Edit: func(c *config.Config) {
		if budget >= 0 {
			c.Agent.HistoryBudget = budget
		}
		cfg = *c
	}})
	if err != nil {
		return false, err
	}
	start := time.Now()
	for t := 1; t <= turns; t++ {
		if err := rig.Converse(ctx, "bench", t); err != nil {
			rig.Kill()
			return false, err
		}
		if t%100 == 0 {
			fmt.Fprintf(progress, "  turn %d (%s)\n", t, time.Since(start).Round(time.Second))
		}
	}
	status, err := rig.Say(ctx, "bench", "/status")
	if err != nil {
		rig.Kill()
		return false, err
	}
	if err := rig.Stop(); err != nil {
		return false, err
	}
	rep, err := rec.report(turns)
	if err != nil {
		return false, err
	}
	rep.cfg, rep.status, rep.wall = cfg, status, time.Since(start)
	return rep.write(out), nil
}

// result is what the table shows.
type result struct {
	cfg    config.Config
	status string
	wall   time.Duration
	turns  int

	maxBytes, maxTurn, maxTokens int
	naiveLast                    int
	at                           []int // turns shown one by one
	reqs                         map[int]*turnRequest
	stablePairs, pairs           int
	fact                         string
	folds, folded, verbatim      int
	coverage                     []string // what is wrong with the coverage
	learning                     struct{ calls, bytes int }
	bytes                        [4]int // all model bytes, by convo.Kind
}

func (r *recorder) report(turns int) (result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.problems) > 0 {
		return result{}, fmt.Errorf("%s", strings.Join(r.problems, "; "))
	}
	res := result{turns: turns, reqs: r.turns, folds: r.folds, learning: r.learning, bytes: r.bytes}
	for t := 1; t <= turns; t++ {
		tr := r.turns[t]
		if tr == nil {
			return res, fmt.Errorf("turn %d made no model request", t)
		}
		if tr.bytes > res.maxBytes {
			res.maxBytes, res.maxTurn, res.maxTokens = tr.bytes, t, tr.tokens
		}
		if t > 1 {
			res.pairs++
			if tr.stable == r.turns[t-1].stable {
				res.stablePairs++
			}
		}
	}
	last := r.turns[turns]
	res.naiveLast = last.naiveBytes
	res.fact = last.fact
	for _, t := range []int{1, 20, 100, 500, 901, turns} {
		if t <= turns && (len(res.at) == 0 || res.at[len(res.at)-1] < t) {
			res.at = append(res.at, t)
		}
	}
	// Every message before the last turn's is read by exactly one summary
	// call, or is in the last request verbatim; not both, not neither.
	for t := 1; t <= turns; t++ {
		keys := []string{userKey(t), answerKey(t)}
		if t == turns {
			keys = keys[:1]
		}
		for _, k := range keys {
			n, v := r.folded[k], last.verbatim[k]
			switch {
			case n == 1 && !v:
				res.folded++
			case n == 0 && v:
				res.verbatim++
			default:
				res.coverage = append(res.coverage, fmt.Sprintf("%s: read by %d summary calls, in the last request: %v", k, n, v))
			}
		}
	}
	return res, nil
}

func kb(b int) string { return fmt.Sprintf("%.1f KB", float64(b)/1000) }

func pct(a, b int) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f %%", 100*float64(a)/float64(b))
}

func mark(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}

// write prints the table and reports whether every target was met.
func (res result) write(w io.Writer) bool {
	shareOK := float64(res.maxBytes) <= targetMaxShare*float64(res.naiveLast)
	maxOK := res.maxBytes <= targetMaxBytes
	all := res.bytes[convo.Turn] + res.bytes[convo.Summary] + res.bytes[convo.Forced] + res.bytes[convo.Other]
	before, bytesOK := beforeBytes[res.turns], true
	if before > 0 {
		bytesOK = float64(all) <= targetBytesShare*float64(before)
	}
	stableOK := res.pairs > 0 && float64(res.stablePairs) >= targetStableShare*float64(res.pairs)
	factOK := res.fact != ""
	coverOK := len(res.coverage) == 0 && res.folded > 0
	budget := fmt.Sprint(res.cfg.Agent.HistoryBudget)
	fmt.Fprintf(w, "## Economy: a conversation of %d turns (%s)\n\n", res.turns, time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(w, "Machine: %s. Configuration: the defaults (agent.history_budget %s, llm.context_window %d, learning %v), "+
		"the OpenAI-compatible chat API; messages and answers of ~240 bytes; the fake model answers summary calls with 300 words "+
		"that keep the facts it is given. Wall time %s.\n\n",
		breport.Machine(), budget, res.cfg.LLM.ContextWindow, res.cfg.Learning.Enabled, res.wall.Round(time.Second))
	fmt.Fprintln(w, "| what | result | target | |")
	fmt.Fprintln(w, "|---|---|---|---|")
	fmt.Fprintf(w, "| largest request of any turn (bytes as sent; estimated tokens) | %s at turn %d, ~%d tokens | ≤ %s | %s |\n",
		kb(res.maxBytes), res.maxTurn, res.maxTokens, kb(targetMaxBytes), mark(maxOK))
	shareMark := mark(shareOK)
	if res.turns < targetShareTurns {
		shareOK, shareMark = true, fmt.Sprintf("(set for %d turns)", targetShareTurns)
	}
	fmt.Fprintf(w, "| the largest request against the naive request at turn %d (%s) | %s | ≤ %.0f %% | %s |\n",
		res.turns, kb(res.naiveLast), pct(res.maxBytes, res.naiveLast), 100*targetMaxShare, shareMark)
	for _, t := range res.at {
		tr := res.reqs[t]
		fmt.Fprintf(w, "| request at turn %d against the naive one then | %s of %s: %s | | |\n", t, kb(tr.bytes), kb(tr.naiveBytes), pct(tr.bytes, tr.naiveBytes))
	}
	fmt.Fprintf(w, "| consecutive turns whose static prefix and summary are byte-identical | %d of %d: %s (%d folds) | ≥ %.0f %% | %s |\n",
		res.stablePairs, res.pairs, pct(res.stablePairs, res.pairs), res.folds, 100*targetStableShare, mark(stableOK))
	where := res.fact
	if where == "" {
		where = "not found"
	}
	fmt.Fprintf(w, "| the fact stated at turn %d, in the request at turn %d | %s | found | %s |\n", convo.FactTurn, res.turns, where, mark(factOK))
	cover := fmt.Sprintf("%d messages read by exactly one summary call, %d in the last request verbatim", res.folded, res.verbatim)
	if len(res.coverage) > 0 {
		cover += fmt.Sprintf("; %d wrong, first: %s", len(res.coverage), res.coverage[0])
	}
	fmt.Fprintf(w, "| every message covered by one summary exactly once (or still in the request) | %s | all | %s |\n", cover, mark(coverOK))
	bytesTarget, bytesMark := "", ""
	if before > 0 {
		bytesTarget = fmt.Sprintf("≤ %.2f× %s (before issue 32)", targetBytesShare, kb(before))
		bytesMark = fmt.Sprintf("%.3f× %s", float64(all)/float64(before), mark(bytesOK))
	}
	fmt.Fprintf(w, "| all model bytes over the %d turns (turns' requests / summary calls / forced calls / other) | %s (%s / %s / %s / %s) | %s | %s |\n",
		res.turns, kb(all), kb(res.bytes[convo.Turn]), kb(res.bytes[convo.Summary]), kb(res.bytes[convo.Forced]), kb(res.bytes[convo.Other]), bytesTarget, bytesMark)
	fmt.Fprintf(w, "| learning's forced calls (for issue 22's learning piece) | %d calls, %s of requests | | |\n", res.learning.calls, kb(res.learning.bytes))
	fmt.Fprintf(w, "\n`/status` after the last turn:\n\n```\n%s\n```\n", res.status)
	return maxOK && shareOK && bytesOK && stableOK && factOK && coverOK
}
