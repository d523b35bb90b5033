// Package convo drives one long conversation through the real gateway for
// the benchmarks: the switchboard binary as a process, with the default
// configuration and only the OpenAI-compatible chat API as its channel, a
// fake model that answers the conversation's turns, compaction's summary
// calls and learning's forced calls, and messages of a fixed size. Every
// model request can be observed as it arrives.
package convo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/switchboard-gateway/switchboard/bench/internal/gateway"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/llm"
)

// Kind is what a model request is for.
type Kind int

const (
	Turn    Kind = iota // a step of a conversation turn
	Summary             // compaction folding history into the summary
	Forced              // a structured call (learning's jobs, /plan)
	Other
)

// Request is one model request as the fake received it.
type Request struct {
	Kind Kind
	// Turn is the conversation turn a Turn request answers: the number in
	// its last user message (0 when there is none).
	Turn int
	Rec  testkit.Recorded
}

// Options configure a Rig.
type Options struct {
	Bin  string // the switchboard binary (gateway.Build)
	Root string // a directory for the run's own directory
	// Edit changes the default configuration; nil keeps it. The model,
	// the store, the HTTP address and the log format are set before.
	Edit func(*config.Config)
	// Observe sees every model request as it arrives, before it is
	// answered; it runs on the fake's handler, so keep it quick. May be nil.
	Observe func(Request)
}

// Rig is one `switchboard serve` with a fresh database, its HTTP API on a
// loopback port, and the fake model.
type Rig struct {
	Model *testkit.FakeLLM
	Proc  *gateway.Process
	Dir   string // the run's directory: config.yaml, switchboard.db, serve.log

	client *http.Client
}

// Start writes the configuration and starts the binary; it returns once
// /readyz answers 200.
func Start(ctx context.Context, o Options) (*Rig, error) {
	dir, err := os.MkdirTemp(o.Root, "convo-")
	if err != nil {
		return nil, err
	}
	r := &Rig{Model: testkit.Start("127.0.0.1:0"), Dir: dir, client: &http.Client{Timeout: 5 * time.Minute}}
	r.Model.DiscardRequests() // Observe sees them; 1,000 turns of them would be hundreds of MB
	r.Model.SetDefault(&testkit.Reply{Func: func(rec testkit.Recorded) testkit.Reply {
		req := Classify(rec)
		if o.Observe != nil {
			o.Observe(req)
		}
		return Answer(req)
	}})
	cfg := config.Default()
	cfg.LLM.BaseURL, cfg.LLM.APIKey, cfg.LLM.Model = r.Model.URL, "sk-bench", "fake-model"
	cfg.Store.Path = filepath.Join(dir, "switchboard.db")
	cfg.Skills.Dir = filepath.Join(dir, "skills")
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Log.Format = "json"
	if o.Edit != nil {
		o.Edit(cfg)
	}
	path := filepath.Join(dir, "config.yaml")
	if err := cfgfile.WriteFile(path, cfg); err != nil {
		r.Model.Close()
		return nil, err
	}
	r.Proc, err = gateway.Start(ctx, o.Bin, dir, path)
	if err != nil {
		r.Model.Close()
		return nil, err
	}
	return r, nil
}

// Say sends text as user through POST /v1/chat/completions and returns
// the reply once the turn is done.
func (r *Rig) Say(ctx context.Context, user, text string) (string, error) {
	body, err := json.Marshal(map[string]any{"model": "switchboard", "user": user,
		"messages": []map[string]string{{"role": "user", "content": text}}})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.Proc.Base+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("chat API: status %d: %s", resp.StatusCode, raw)
	}
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Choices) == 0 {
		return "", fmt.Errorf("chat API: unexpected answer %.200s (%v)", raw, err)
	}
	return out.Choices[0].Message.Content, nil
}

// Stop ends the process with SIGTERM (it must exit cleanly), then the fake.
func (r *Rig) Stop() error {
	err := r.Proc.Stop()
	r.Model.Close()
	return err
}

// Kill ends everything at once, after a failure.
func (r *Rig) Kill() {
	r.Proc.Kill()
	r.Model.Close()
}

// The conversation: turn n's message and the model's answer, about 240
// bytes each; the message of FactTurn carries Fact.
const (
	Fact     = "FACT-7391"
	FactTurn = 3
)

// UserText is the user's message of turn n.
func UserText(n int) string {
	if n == FactTurn {
		return fmt.Sprintf("(turn %d) Please keep this in mind: my locker code is %s. %s?", n, Fact, Words(uint64(n), 31))
	}
	return fmt.Sprintf("(turn %d) %s?", n, Words(uint64(n), 43))
}

// AnswerText is the model's answer in turn n.
func AnswerText(n int) string {
	return fmt.Sprintf("(answer %d) %s.", n, Words(uint64(n)<<32, 43))
}

// TurnOf reads n from UserText(n) (or AnswerText(n) with prefix "answer").
func TurnOf(text, prefix string) (int, bool) {
	var n int
	if _, err := fmt.Sscanf(text, "("+prefix+" %d)", &n); err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// summarySystem starts the system prompt of agent/compact.go's summary call.
const summarySystem = "You compress chat transcripts."

// Classify tells what a request is for.
func Classify(rec testkit.Recorded) Request {
	req := Request{Kind: Other, Rec: rec}
	switch {
	case len(rec.Messages) > 0 && strings.HasPrefix(rec.Messages[0].Content, summarySystem):
		req.Kind = Summary
	case rec.ForcedTool != "":
		req.Kind = Forced
	case len(rec.Tools) > 0:
		req.Kind = Turn
		for i := len(rec.Messages) - 1; i >= 0; i-- {
			if m := rec.Messages[i]; m.Role == llm.RoleUser {
				req.Turn, _ = TurnOf(m.Content, "turn")
				break
			}
		}
	}
	return req
}

// Answer is the fake model's reply: a turn gets its answer; a summary call
// a 300-word summary (the most its prompt allows) that keeps the facts
// (sentences with a FACT- code) of the summary so far and of the folded
// transcript, as a real summariser keeps what it was asked to; a forced
// call the smallest arguments its schema accepts (nothing learned).
func Answer(req Request) testkit.Reply {
	switch req.Kind {
	case Summary:
		return testkit.Reply{Text: summarise(lastContent(req.Rec.Messages))}
	case Forced:
		return testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("forced", req.Rec.ForcedTool, minimalArgs(req.Rec))}}
	case Turn:
		if req.Turn > 0 {
			return testkit.Reply{Text: AnswerText(req.Turn)}
		}
	}
	return testkit.Reply{Text: "OK."}
}

func lastContent(msgs []llm.Message) string {
	if len(msgs) == 0 {
		return ""
	}
	return msgs[len(msgs)-1].Content
}

var factSentence = regexp.MustCompile(`[^.?!\n\]]*FACT-[0-9]+`)

func summarise(input string) string {
	var facts []string
	seen := map[string]bool{}
	for _, f := range factSentence.FindAllString(input, -1) {
		f = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(f), "Facts:"))
		if !seen[f] {
			seen[f] = true
			facts = append(facts, f)
		}
	}
	text := "Summary:"
	if len(facts) > 0 {
		text += " Facts: " + strings.Join(facts, ". ") + "."
	}
	n := 300 - len(strings.Fields(text))
	return text + " " + Words(uint64(len(input)), max(n, 0)) + "."
}

// minimalArgs are the smallest arguments the forced tool's schema accepts:
// each required property empty.
func minimalArgs(rec testkit.Recorded) string {
	for _, t := range rec.Tools {
		if t.Name != rec.ForcedTool {
			continue
		}
		var schema struct {
			Properties map[string]struct {
				Type any `json:"type"`
			} `json:"properties"`
			Required []string `json:"required"`
		}
		if err := json.Unmarshal(t.Parameters, &schema); err != nil {
			break
		}
		out := map[string]any{}
		for _, name := range schema.Required {
			switch schema.Properties[name].Type {
			case "array":
				out[name] = []any{}
			case "object":
				out[name] = map[string]any{}
			case "integer", "number":
				out[name] = 0
			case "boolean":
				out[name] = false
			default:
				out[name] = ""
			}
		}
		b, _ := json.Marshal(out)
		return string(b)
	}
	return "{}"
}

// vocabulary for filler text: ordinary English words of mixed length.
var vocabulary = strings.Fields(`the a of to and in that is for it with as on was be at by this
have from or one had not but what all were when we there can an your which their said if do will
each about how up out them then she many some so these would other into has more her two like him
see time could no make than first been its who now people my made over did down only way find use
may water long little very after words called just where most know get through back much go good
new write our me man too any day same right look think also around another came come work three
word must because does part even place well such here take why things help put years different
away again off went old number great tell men say small every found still between name should home
big give air line set own under read last never us left end along while might next sound below saw
something thought both few those always looked show large often together asked house world going
want school important until form food keep children feet land side without boy once animals life
enough took sometimes four head above kind began almost live page got earth need far hand high year
mother light parts country father let night following picture being study second eyes soon times
story boys since white days ever paper hard near sentence better best across during today others
however sure means knew try told young miles sun ways thing whole hear example heard several change
answer room sea against top turned learn point city play toward five using himself usually`)

// Words returns n pseudo-random words, the same for the same seed.
func Words(seed uint64, n int) string {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	out := make([]string, n)
	for i := range out {
		out[i] = vocabulary[rng.IntN(len(vocabulary))]
	}
	return strings.Join(out, " ")
}

// ErrNoReply means a turn's reply was not the model's answer.
var ErrNoReply = errors.New("convo: the reply is not the model's answer")

// Converse runs turn n for user: UserText(n) in, AnswerText(n) expected back.
func (r *Rig) Converse(ctx context.Context, user string, n int) error {
	got, err := r.Say(ctx, user, UserText(n))
	if err != nil {
		return fmt.Errorf("turn %d: %w", n, err)
	}
	if got != AnswerText(n) {
		return fmt.Errorf("turn %d: %w: %.120q", n, ErrNoReply, got)
	}
	return nil
}
