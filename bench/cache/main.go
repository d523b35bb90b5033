// Command cache measures what share of a long conversation's prompt
// tokens a provider's prompt cache serves (issue 32): it builds the real
// binary, runs `serve` with the default configuration against a fake model
// that caches by prefix as OpenAI documents it (prompts of 1,024 tokens or
// more; the longest earlier-seen prefix in whole blocks of -block tokens,
// tools first, then the messages in order; nothing evicted) and reports
// its cached tokens in usage.prompt_tokens_details.cached_tokens, holds a
// conversation of -turns turns through the OpenAI-compatible chat API, and
// prints a Markdown table:
//
//	go run ./bench/cache
//
// The fake counts a token per 4 bytes. It models the cache twice: as the
// requests came (turns seconds apart, so the "Now:" line of the system
// prompt's context tail changes only when the minute does), and as if each
// turn came in another minute (the line differs every turn, as in a
// conversation of people), and, as a what-if, with the context tail sent
// after the history instead of in the system message. The usage it
// reports is the first; the table
// checks that `/status` shows the same share as the fake served. Rows: the
// share of the prompt tokens of the turns' requests that were cached, of
// all requests (summaries and learning's forced calls too), the share of
// consecutive turns whose static prefix and summary are byte-identical
// (the 98.2 % of bench/economy), and `/status`. Progress goes to stderr,
// the table to stdout. It needs Linux (/proc) and the Go toolchain.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/bench/internal/convo"
	"github.com/switchboard-gateway/switchboard/bench/internal/gateway"
	breport "github.com/switchboard-gateway/switchboard/bench/internal/report"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// OpenAI caches prompts of at least this many tokens.
const minCachedPrompt = 1024

func main() {
	turns := flag.Int("turns", 200, "turns of the conversation")
	block := flag.Int("block", 1024, "tokens of a cache block")
	keep := flag.Bool("keep", false, "keep the run's directory (config, database, serve.log)")
	flag.Parse()
	if *turns < 2 || *block < 1 {
		fmt.Fprintln(os.Stderr, "cache: -turns must be at least 2 and -block at least 1")
		os.Exit(2)
	}
	if err := run(*turns, *block, *keep, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "cache: %v\n", err)
		os.Exit(1)
	}
}

// prefixCache is a provider's prompt cache: the hashes of every prompt
// prefix of whole blocks seen so far.
type prefixCache struct {
	blockBytes int
	seen       map[[sha256.Size]byte]bool
}

func newPrefixCache(blockTokens int) *prefixCache {
	return &prefixCache{blockBytes: blockTokens * 4, seen: map[[sha256.Size]byte]bool{}}
}

// serve returns the prompt's tokens and those served from the cache, and
// caches its prefixes.
func (c *prefixCache) serve(prompt []byte) (tokens, cached int) {
	tokens = (len(prompt) + 3) / 4
	if tokens < minCachedPrompt {
		return tokens, 0
	}
	h := sha256.New()
	hit := true
	for end := c.blockBytes; end <= len(prompt); end += c.blockBytes {
		h.Write(prompt[end-c.blockBytes : end])
		var sum [sha256.Size]byte
		h.Sum(sum[:0])
		if hit && c.seen[sum] {
			cached = end / 4
		} else {
			hit = false
		}
		c.seen[sum] = true
	}
	return tokens, cached
}

// promptBytes is the request as a cache sees it: the tools, then each
// message in order.
func promptBytes(rec testkit.Recorded, each func(llm.Message) llm.Message) []byte {
	var b []byte
	tools, _ := json.Marshal(rec.Tools)
	b = append(b, tools...)
	for _, m := range rec.Messages {
		if each != nil {
			m = each(m)
		}
		m.Images = nil
		one, _ := json.Marshal(m)
		b = append(b, one...)
	}
	return b
}

// nowLine is the context tail's clock line.
var nowLine = regexp.MustCompile(`(?m)^- Now: .*$`)

// tailAfterHistory is the request as it would be with the system prompt's
// context tail (its clock line differing every turn) moved from the system
// message to a system message just before the last user message: what a
// prompt built for the cache would send.
func tailAfterHistory(rec testkit.Recorded, turn int) testkit.Recorded {
	if len(rec.Messages) < 2 || rec.Messages[0].Role != llm.RoleSystem {
		return rec
	}
	stable, tail, ok := strings.Cut(rec.Messages[0].Content, "\n\n# Context\n")
	if !ok {
		return rec
	}
	tail = nowLine.ReplaceAllString(tail, fmt.Sprintf("- Now: minute %d", turn))
	msgs := append([]llm.Message{{Role: llm.RoleSystem, Content: stable}}, rec.Messages[1:len(rec.Messages)-1]...)
	msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: "# Context\n" + tail}, rec.Messages[len(rec.Messages)-1])
	rec.Messages = msgs
	return rec
}

// tally sums a kind of request's tokens.
type tally struct{ requests, tokens, cached int }

func (t *tally) add(tokens, cached int) {
	t.requests++
	t.tokens += tokens
	t.cached += cached
}

// meter is the fake's cache and what it served, under both models.
type meter struct {
	mu                sync.Mutex
	asRun, perMinute  *prefixCache
	tailLast          *prefixCache
	turns, all        tally // as run
	turnsMin, allMin  tally // each turn in its own minute
	turnsTail         tally // each turn in its own minute, the tail after the history
	stable            []string
	problems          []string
	requestsPerTurn   map[int]int
	firstCachedTurnAt int
}

func (m *meter) answer(rec testkit.Recorded) testkit.Reply {
	req := convo.Classify(rec)
	reply := convo.Answer(req)
	m.mu.Lock()
	defer m.mu.Unlock()
	tokens, cached := m.asRun.serve(promptBytes(rec, nil))
	_, cachedMin := m.perMinute.serve(promptBytes(rec, func(msg llm.Message) llm.Message {
		if msg.Role == llm.RoleSystem {
			msg.Content = nowLine.ReplaceAllString(msg.Content, fmt.Sprintf("- Now: minute %d", req.Turn))
		}
		return msg
	}))
	_, cachedTail := m.tailLast.serve(promptBytes(tailAfterHistory(rec, req.Turn), nil))
	m.all.add(tokens, cached)
	m.allMin.add(tokens, cachedMin)
	if req.Kind == convo.Turn {
		m.turns.add(tokens, cached)
		m.turnsMin.add(tokens, cachedMin)
		m.turnsTail.add(tokens, cachedTail)
		stable, _, _ := strings.Cut(rec.Messages[0].Content, "\n\n# Context\n")
		m.stable = append(m.stable, stable)
		if cached > 0 && m.firstCachedTurnAt == 0 {
			m.firstCachedTurnAt = req.Turn
		}
	}
	completion := max(len(reply.Text)/4, 1)
	reply.Usage = &llm.Usage{PromptTokens: tokens, CachedTokens: cached, CompletionTokens: completion,
		TotalTokens: tokens + completion}
	return reply
}

func run(turns, block int, keep bool, out, progress io.Writer) error {
	root, err := os.MkdirTemp("", "switchboard-cache-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintf(progress, "run kept in %s\n", root)
	} else {
		defer os.RemoveAll(root)
	}
	fmt.Fprintln(progress, "building switchboard (go build -trimpath -tags goolm)…")
	bin, err := gateway.Build(root)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	rig, err := convo.Start(ctx, convo.Options{Bin: bin, Root: root})
	if err != nil {
		return err
	}
	m := &meter{asRun: newPrefixCache(block), perMinute: newPrefixCache(block), tailLast: newPrefixCache(block)}
	rig.Model.SetDefault(&testkit.Reply{Func: m.answer})
	start := time.Now()
	for t := 1; t <= turns; t++ {
		if err := rig.Converse(ctx, "bench", t); err != nil {
			rig.Kill()
			return err
		}
		if t%50 == 0 {
			fmt.Fprintf(progress, "  turn %d (%s)\n", t, time.Since(start).Round(time.Second))
		}
	}
	status, err := rig.Say(ctx, "bench", "/status")
	if err != nil {
		rig.Kill()
		return err
	}
	if err := rig.Stop(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.write(out, turns, block, status, time.Since(start))
}

func pct(a, b int) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f %%", 100*float64(a)/float64(b))
}

// statusShare reads the cache share from /status's tokens line.
var statusShare = regexp.MustCompile(`(\d+)% of them cached`)

func (m *meter) write(w io.Writer, turns, block int, status string, wall time.Duration) error {
	stablePairs := 0
	for i := 1; i < len(m.stable); i++ {
		if m.stable[i] == m.stable[i-1] {
			stablePairs++
		}
	}
	fmt.Fprintf(w, "## Prompt cache: a conversation of %d turns (%s)\n\n", turns, time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(w, "Machine: %s. Configuration: the defaults, the OpenAI-compatible chat API; messages and answers of ~240 bytes; "+
		"a fake model caching by prefix in blocks of %d tokens (4 bytes a token, prompts of %d tokens or more). Wall time %s.\n\n",
		breport.Machine(), block, minCachedPrompt, wall.Round(time.Second))
	fmt.Fprintln(w, "| what | as run (turns seconds apart) | each turn in another minute |")
	fmt.Fprintln(w, "|---|---|---|")
	fmt.Fprintf(w, "| prompt tokens of the turns' requests served from the cache | %d of %d: %s | %d: %s |\n",
		m.turns.cached, m.turns.tokens, pct(m.turns.cached, m.turns.tokens), m.turnsMin.cached, pct(m.turnsMin.cached, m.turnsMin.tokens))
	fmt.Fprintf(w, "| the same, were the context tail sent after the history (a what-if: the fake moves it) | | %d: %s |\n",
		m.turnsTail.cached, pct(m.turnsTail.cached, m.turnsTail.tokens))
	fmt.Fprintf(w, "| of all %d requests (turns, summaries, learning's forced calls) | %d of %d: %s | %d: %s |\n",
		m.all.requests, m.all.cached, m.all.tokens, pct(m.all.cached, m.all.tokens), m.allMin.cached, pct(m.allMin.cached, m.allMin.tokens))
	fmt.Fprintf(w, "| consecutive turns whose static prefix and summary are byte-identical | %d of %d: %s | |\n",
		stablePairs, len(m.stable)-1, pct(stablePairs, len(m.stable)-1))
	fmt.Fprintf(w, "\n`/status` after the last turn:\n\n```\n%s\n```\n", status)
	got := statusShare.FindStringSubmatch(status)
	want := 0
	if m.turns.tokens > 0 {
		want = m.turns.cached * 100 / m.turns.tokens
	}
	if got == nil || got[1] != fmt.Sprint(want) {
		return fmt.Errorf("/status shows a cache share of %v, the fake served %d %%", got, want)
	}
	return nil
}
