// Command learning measures what background learning costs over a long
// conversation (issue #22):
//
//  1. tokens: one user talks to the real gateway (gateway.Build, default
//     configuration, the fake model on 127.0.0.1) for -turns turns of
//     ~-msg-byte messages; every request and answer is counted, the turns'
//     and the learning calls' apart. Tokens are bytes / 4 on both sides, so
//     the ratio is the ratio of bytes.
//
//  2. CPU: one learning pass over the last 10 turns of a chat of 10 turns
//     and of 1,000 turns (store on a temporary file, the model answered in
//     process after encoding the request as the client would), repeated
//     -reps times with the cursor put back: the pass's CPU per message must
//     not grow with the chat. The transcript query (its CPU per call) is
//     timed beside it on the same chats, and so is the query of before #22.
//
//     go run ./bench/learning
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/switchboard-gateway/switchboard/bench/internal/report"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/gateway"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/learning"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/memory"
	"github.com/switchboard-gateway/switchboard/profile"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/store"
)

func main() {
	turns := flag.Int("turns", 1000, "turns of the conversation")
	msg := flag.Int("msg", 240, "bytes per user message (and per reply)")
	reps := flag.Int("reps", 300, "passes timed at each chat length")
	skipTokens := flag.Bool("cpu-only", false, "skip the conversation through the gateway")
	flag.Parse()
	ctx := context.Background()
	fmt.Printf("machine: %s; load %s\n\n", report.Machine(), report.LoadAverage())
	failed := false
	if !*skipTokens {
		ok, err := tokens(ctx, *turns, *msg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "tokens:", err)
			os.Exit(1)
		}
		failed = failed || !ok
	}
	ok, err := cpu(ctx, *msg, *reps)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cpu:", err)
		os.Exit(1)
	}
	if failed || !ok {
		os.Exit(1)
	}
}

// message is the user's n-th message, about size bytes, every tenth with a
// fact in it.
func message(n, size int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Message %d. ", n)
	if n%10 == 3 {
		fmt.Fprintf(&b, "By the way, my sister number %d lives in Lisbon and I am allergic to peanuts. ", n)
	}
	for b.Len() < size {
		b.WriteString("We talked about the weather, the trains and what to cook tonight. ")
	}
	return b.String()[:size]
}

// counter adds up the bytes of the fake model's requests and answers.
type counter struct {
	mu                      sync.Mutex
	turnReq, turnResp       int
	learnReq, learnResp     int
	turnCalls, learnCalls   int
	firstTurnReq, lastTurnR int
}

func (c *counter) reply(size int) func(testkit.Recorded) testkit.Reply {
	return func(rec testkit.Recorded) testkit.Reply {
		c.mu.Lock()
		defer c.mu.Unlock()
		if rec.ForcedTool != "" {
			args := `{"facts":[],"profile":[]}`
			c.learnCalls++
			c.learnReq += len(rec.Raw)
			c.learnResp += len(args)
			return testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("l1", rec.ForcedTool, args)}}
		}
		text := strings.Repeat("Sure, here is what I think about that. ", size/39+1)[:size]
		c.turnCalls++
		c.turnReq += len(rec.Raw)
		c.turnResp += len(text)
		if c.firstTurnReq == 0 {
			c.firstTurnReq = len(rec.Raw)
		}
		c.lastTurnR = len(rec.Raw)
		return testkit.Reply{Text: text}
	}
}

// benchChan is an in-process chat channel whose replies the driver waits for.
type benchChan struct{ out chan string }

func (c *benchChan) Name() string                                   { return "bench" }
func (c *benchChan) Run(ctx context.Context, _ channels.Sink) error { <-ctx.Done(); return nil }
func (c *benchChan) Send(_ context.Context, m channels.Outbound) (string, error) {
	c.out <- m.Text
	return "m", nil
}

// tokens runs the conversation through the gateway with the default
// configuration and reports the learning calls' share of the tokens.
func tokens(ctx context.Context, turns, size int) (bool, error) {
	fake := testkit.Start("127.0.0.1:0")
	defer fake.Close()
	fake.DiscardRequests()
	cnt := &counter{}
	fake.SetDefault(&testkit.Reply{Func: cnt.reply(size)})
	dir, err := os.MkdirTemp("", "bench-learning-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	cfg := config.Default()
	cfg.LLM.BaseURL, cfg.LLM.APIKey, cfg.LLM.Model = fake.URL, "sk-bench", "fake-model"
	cfg.Store.Path = filepath.Join(dir, "s.db")
	cfg.Skills.Dir = filepath.Join(dir, "skills")
	cfg.HTTP.Listen = ""
	if err := os.MkdirAll(cfg.Skills.Dir, 0o755); err != nil {
		return false, err
	}
	if err := cfg.Validate(); err != nil {
		return false, err
	}
	g, err := gateway.Build(ctx, cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return false, err
	}
	defer g.Close()
	ch := &benchChan{out: make(chan string, 1)}
	g.Router().AddChannel(ch, router.Access{AllowAll: true})
	if err := g.Router().Start(ctx); err != nil {
		return false, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = g.Router().Shutdown(sctx)
	}()
	start := time.Now()
	for i := 1; i <= turns; i++ {
		in := channels.Inbound{Channel: "bench", ChatID: "c1", ChatType: channels.DM, MessageID: strconv.Itoa(i),
			UserID: "u1", UserName: "ada", DisplayName: "Ada", Text: message(i, size), Mentioned: true}
		if err := g.Router().Deliver(ctx, in); err != nil {
			return false, err
		}
		select {
		case <-ch.out:
		case <-time.After(time.Minute):
			return false, fmt.Errorf("no reply to turn %d", i)
		}
	}
	if err := g.Router().Drain(ctx); err != nil {
		return false, err
	}
	if err := g.LearningRunner().Drain(ctx); err != nil {
		return false, err
	}
	elapsed := time.Since(start)
	cnt.mu.Lock()
	defer cnt.mu.Unlock()
	turnTok, learnTok := float64(cnt.turnReq+cnt.turnResp)/4, float64(cnt.learnReq+cnt.learnResp)/4
	ratio := learnTok / turnTok
	perMsg := learnTok / float64(turns)
	s := g.LearningRunner().Stats()
	fmt.Printf("Conversation: %d turns of %d-byte messages through the gateway, default configuration (learning.every_n_turns %d, idle_after %s), %s\n",
		turns, size, cfg.Learning.EveryNTurns, cfg.Learning.IdleAfter, elapsed.Round(time.Millisecond))
	fmt.Printf("  turns:    %d calls, %.0f tokens (requests %d B, answers %d B); first request %d B, last %d B\n",
		cnt.turnCalls, turnTok, cnt.turnReq, cnt.turnResp, cnt.firstTurnReq, cnt.lastTurnR)
	fmt.Printf("  learning: %d calls (%d passes run, %d failed), %.0f tokens (requests %d B, answers %d B)\n",
		cnt.learnCalls, s.Succeeded, s.Failed, learnTok, cnt.learnReq, cnt.learnResp)
	fmt.Printf("  learning / turns: %.2f %% (target <= 25 %%)\n", 100*ratio)
	fmt.Printf("  learning per message: %.0f tokens = %.1f %% of the smallest turn (the first request, %.0f tokens)\n\n",
		perMsg, 100*perMsg/(float64(cnt.firstTurnReq+size)/4), float64(cnt.firstTurnReq+size)/4)
	return ratio <= 0.25, nil
}

// stubModel answers the pass's call in process, after encoding the request
// as JSON (as the client does), with nothing learned.
type stubModel struct{ reqBytes int }

func (m *stubModel) Complete(_ context.Context, req llm.Request, _ func(llm.Delta)) (llm.Response, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return llm.Response{}, err
	}
	m.reqBytes += len(b)
	return llm.Response{Message: llm.Message{ToolCalls: []llm.ToolCall{{Name: req.ForceTool, Arguments: `{"facts":[],"profile":[]}`}}}}, nil
}

// sqlBefore is the transcript query before #22 (store/cursors.go), timed
// for comparison: it walks every turn of the user in the chat and sorts.
const sqlBefore = `SELECT m.id, m.session_id, COALESCE(m.turn_id, 0), m.role, m.content, m.tool_calls, m.tool_call_id, m.name,
		m.images, m.hidden, m.created_at FROM messages m JOIN turns t ON t.id = m.turn_id
		WHERE t.chat_id = ? AND t.channel = ? AND t.user_id = ? AND t.kind = 'user'
			AND m.hidden = 0 AND m.role IN ('user', 'assistant')
			AND m.turn_id < COALESCE((SELECT MIN(id) FROM turns
				WHERE chat_id = ? AND channel = ? AND user_id = ? AND status = 'running'), 9223372036854775807)
		AND m.id > ? ORDER BY m.id LIMIT ?`

// lengthRig is a chat of some length whose last 10 turns a pass reads
// again and again.
type lengthRig struct {
	turns int
	mark  int64 // the newest message before the last 10 turns
	cfg   learning.PassConfig
	trig  learning.Trigger
	c     store.Cursor
}

// sample is one round's figures for a chat length, per message.
type sample struct{ cpu, wall, qNow, qBefore time.Duration }

// cpu times a pass over the last 10 turns of chats of 10, 100 and 1,000
// turns. The lengths take turns in rounds, so that the load of a shared
// machine weighs on each alike; each figure is the median of its rounds.
func cpu(ctx context.Context, size, reps int) (bool, error) {
	dir, err := os.MkdirTemp("", "bench-learning-cpu-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(ctx, filepath.Join(dir, "s.db"))
	if err != nil {
		return false, err
	}
	defer st.Close()
	var rigs []*lengthRig
	for _, n := range []int{10, 100, 1000} {
		r, err := newLengthRig(ctx, st, n, size)
		if err != nil {
			return false, err
		}
		rigs = append(rigs, r)
	}
	const rounds = 21
	samples := make([][]sample, len(rigs))
	for round := range rounds + 1 {
		for i, r := range rigs {
			sm, err := r.measure(ctx, st, max(reps/rounds, 1))
			if err != nil {
				return false, err
			}
			if round > 0 { // the first round warms up
				samples[i] = append(samples[i], sm)
			}
		}
	}
	fmt.Printf("Learning pass over the last 10 turns (20 messages) of a chat, %d passes per length in %d rounds (medians), model answered in process:\n",
		reps, rounds)
	fmt.Printf("  %-12s %14s %14s %16s %16s\n", "chat length", "CPU/message", "wall/message", "query CPU (now)", "(before #22)")
	var cpus []time.Duration
	for i, r := range rigs {
		m := sample{
			cpu:     median(samples[i], func(s sample) time.Duration { return s.cpu }),
			wall:    median(samples[i], func(s sample) time.Duration { return s.wall }),
			qNow:    median(samples[i], func(s sample) time.Duration { return s.qNow }),
			qBefore: median(samples[i], func(s sample) time.Duration { return s.qBefore }),
		}
		cpus = append(cpus, m.cpu)
		fmt.Printf("  %-12s %14s %14s %16s %16s\n", fmt.Sprintf("%d turns", r.turns), m.cpu.Round(time.Microsecond/10),
			m.wall.Round(time.Microsecond/10), m.qNow.Round(time.Microsecond/10), m.qBefore.Round(time.Microsecond/10))
	}
	growth := float64(cpus[len(cpus)-1])/float64(cpus[0]) - 1
	fmt.Printf("  CPU per message at 1,000 turns vs 10: %+.1f %% (target within 20 %%)\n", 100*growth)
	return growth <= 0.20, nil
}

func median(ss []sample, f func(sample) time.Duration) time.Duration {
	ds := make([]time.Duration, len(ss))
	for i, s := range ss {
		ds[i] = f(s)
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// newLengthRig stores a chat of n turns of u1.
func newLengthRig(ctx context.Context, st *store.Store, n, size int) (*lengthRig, error) {
	chat, err := st.EnsureChat(ctx, "bench", "len"+strconv.Itoa(n), "dm", "")
	if err != nil {
		return nil, err
	}
	sess, err := st.CurrentSession(ctx, chat.ID)
	if err != nil {
		return nil, err
	}
	r := &lengthRig{turns: n}
	for i := 1; i <= n; i++ {
		if i == n-9 {
			if err := st.DB().QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM messages`).Scan(&r.mark); err != nil {
				return nil, err
			}
		}
		if err := say(ctx, st, chat.ID, sess.ID, message(i, size), size); err != nil {
			return nil, err
		}
	}
	model := &stubModel{}
	r.cfg = learning.PassConfig{Store: st, Model: model, Parts: []learning.Part{
		memory.New(memory.Config{Store: st, Model: model}).Part(), profile.New(profile.Config{Store: st, Model: model}).Part()}}
	r.trig = learning.Trigger{Channel: "bench", UserID: "u1", ChatID: chat.ID}
	r.c = store.Cursor{Job: learning.PassJobName, Channel: "bench", UserID: "u1", ChatID: chat.ID}
	if _, err := st.LearningCursor(ctx, r.c, 0); err != nil {
		return nil, err
	}
	return r, nil
}

// rewind puts the cursor back before the last 10 turns.
func (r *lengthRig) rewind(ctx context.Context, st *store.Store) error {
	_, err := st.DB().ExecContext(ctx, `UPDATE learning_cursors SET message_id = ? WHERE job = ? AND user_key = ? AND chat_id = ?`,
		r.mark, r.c.Job, r.c.UserKey(), r.c.ChatID)
	return err
}

// measure runs reps passes (the rewinds timed apart and taken off) and
// times the transcript query, now and as it was.
func (r *lengthRig) measure(ctx context.Context, st *store.Store, reps int) (sample, error) {
	rw0, rwWall0 := cpuTime(), time.Now()
	for range reps {
		if err := r.rewind(ctx, st); err != nil {
			return sample{}, err
		}
	}
	rwCPU, rwWall := cpuTime()-rw0, time.Since(rwWall0)
	c0, w0 := cpuTime(), time.Now()
	for range reps {
		if err := r.rewind(ctx, st); err != nil {
			return sample{}, err
		}
		if err := learning.RunPass(ctx, r.cfg, r.trig); err != nil {
			return sample{}, err
		}
	}
	passCPU, passWall := cpuTime()-c0-rwCPU, time.Since(w0)-rwWall
	msgs := time.Duration(reps * 10)
	q0 := cpuTime()
	for range reps {
		if _, err := st.LearningMessages(ctx, r.c, r.mark, 40); err != nil {
			return sample{}, err
		}
	}
	qNow := (cpuTime() - q0) / time.Duration(reps)
	q0 = cpuTime()
	for range reps {
		rows, err := st.DB().QueryContext(ctx, sqlBefore, r.c.ChatID, "bench", "u1", r.c.ChatID, "bench", "u1", r.mark, 40)
		if err != nil {
			return sample{}, err
		}
		vals := make([]any, 11) // the columns, read as the store reads them
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				return sample{}, err
			}
		}
		if err := rows.Close(); err != nil {
			return sample{}, err
		}
	}
	qBefore := (cpuTime() - q0) / time.Duration(reps)
	return sample{cpu: passCPU / msgs, wall: passWall / msgs, qNow: qNow, qBefore: qBefore}, nil
}

// say stores one finished turn of u1: the message and a reply.
func say(ctx context.Context, st *store.Store, chat, sess int64, text string, size int) error {
	id, _, err := st.BeginTurn(ctx, store.TurnStart{ChatID: chat, SessionID: sess, UserID: "u1", Channel: "bench", Kind: "user"},
		[]llm.Message{{Role: llm.RoleUser, Content: text}})
	if err != nil {
		return err
	}
	reply := strings.Repeat("Sure, here is what I think about that. ", size/39+1)[:size]
	if _, err := st.CommitStep(ctx, id, 1, []store.StepMessage{{Message: llm.Message{Role: llm.RoleAssistant, Content: reply}}}, llm.Usage{}); err != nil {
		return err
	}
	return st.FinishTurn(ctx, id, store.TurnEnd{StopReason: "end_turn", Status: store.TurnCompleted})
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
