package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// startupResult is row 1.
type startupResult struct {
	ready []time.Duration // one per start, in order
}

// measureStartup starts serve runs times on a fresh database, each time
// from exec to the first /readyz 200. The last process is left running and
// returned, idle: its Discord session is up and Telegram has long-polled
// three more times with nothing to do (poll_timeout is 1 s).
func measureStartup(ctx context.Context, bin, root string, s settings, runs int) (startupResult, *rig, error) {
	var res startupResult
	for i := range runs {
		r, err := startRig(ctx, bin, root, s)
		if err != nil {
			return res, nil, err
		}
		res.ready = append(res.ready, r.proc.Ready)
		if i < runs-1 {
			if err := r.stop(); err != nil {
				return res, nil, err
			}
			continue
		}
		err = r.dc.WaitFor(ctx, func() bool { return r.dc.Identifies() > 0 })
		if err == nil {
			err = r.tg.WaitCalls(ctx, "getUpdates", r.tg.Calls("getUpdates")+3)
		}
		if err != nil {
			r.kill()
			return res, nil, fmt.Errorf("idle: %w", err)
		}
		return res, r, nil
	}
	return res, nil, fmt.Errorf("no start")
}

// overheadResult is row 3.
type overheadResult struct {
	times []time.Duration // per measured message
	cpu   time.Duration   // CPU time the gateway used for the measured messages
}

// measureOverhead sends warm+n messages one after another from one private
// chat to the running gateway, the model answering at once, and returns the
// n measured times from a message's arrival at the fake Telegram (PushText)
// to the arrival of the reply's sendMessage there. Each message is sent as
// soon as the previous reply arrived.
func measureOverhead(ctx context.Context, r *rig, warm, n int) (overheadResult, error) {
	var res overheadResult
	r.model.SetDefault(answer(0))
	// Kept, the requests of a long conversation grew the suite's heap to
	// tens of megabytes, and its collections ran among the measured
	// messages.
	r.model.DiscardRequests()
	base := r.tg.Calls("sendMessage")
	var cpu0 time.Duration
	for i := range warm + n {
		if i == warm {
			var err error
			if cpu0, err = r.proc.CPUTime(); err != nil {
				return res, err
			}
		}
		start := time.Now()
		r.tg.PushText(1, 1, "alice", fmt.Sprintf("message %d", i+1))
		if err := r.tg.WaitCalls(ctx, "sendMessage", base+i+1); err != nil {
			return res, fmt.Errorf("message %d: %w", i+1, err)
		}
		if i >= warm {
			res.times = append(res.times, time.Since(start))
		}
	}
	cpu1, err := r.proc.CPUTime()
	if err != nil {
		return res, err
	}
	res.cpu = cpu1 - cpu0
	// The calls count on arrival; the messages are recorded just after.
	sent, err := r.tg.WaitSent(ctx, base+warm+n)
	if err != nil {
		return res, err
	}
	if len(sent) != warm+n {
		return res, fmt.Errorf("%d replies to %d messages", len(sent), warm+n)
	}
	for i, m := range sent {
		if want := fmt.Sprintf("You said: message %d", i+1); m.ChatID != 1 || m.Text != want {
			return res, fmt.Errorf("reply %d: got %q in chat %d, want %q in chat 1", i+1, m.Text, m.ChatID, want)
		}
	}
	return res, nil
}

// burstResult is rows 4 and 5 for one N: one run, or (medianRun) the run
// of median wall time with every run's wall time and peak.
type burstResult struct {
	walls    []time.Duration // of every run, sorted
	peaks    []int           // VmHWM of every run, sorted
	chats    int
	wall     time.Duration   // first message pushed → last reply arrived
	replies  []time.Duration // each reply's arrival after the first push, in order
	peakKB   int             // VmHWM after the burst
	pushed   time.Duration   // time taken to push the N messages
	cpu      time.Duration   // CPU time the gateway used from the first push to the last reply
	fakesCPU time.Duration   // CPU time the suite (the fakes) used meanwhile
	modelAt  []time.Duration // each model request's arrival after the first push, in order
}

// medianRun is the run of median wall time, with the walls and peaks of
// all runs.
func medianRun(runs []burstResult) burstResult {
	slices.SortFunc(runs, func(a, b burstResult) int { return cmp.Compare(a.wall, b.wall) })
	m := runs[len(runs)/2]
	m.walls, m.peaks = nil, nil
	for _, r := range runs {
		m.walls = append(m.walls, r.wall)
		m.peaks = append(m.peaks, r.peakKB)
	}
	slices.Sort(m.peaks)
	return m
}

// measureBurst starts a fresh gateway, then N private chats each send one
// message at the same moment (all pushed to the fake Telegram in one loop)
// and the model takes latency per request. It checks that every chat got
// exactly its own answer.
func measureBurst(ctx context.Context, bin, root string, s settings, n int, latency time.Duration) (burstResult, error) {
	res := burstResult{chats: n}
	r, err := startRig(ctx, bin, root, s)
	if err != nil {
		return res, err
	}
	r.model.SetDefault(answer(latency))
	r.model.DiscardRequests() // the fakes' own memory is not what is measured
	msgs := make([]map[string]any, n)
	for i := range msgs {
		id := int64(i + 1)
		msgs[i] = r.tg.NewMessage(id, id, "user"+strconv.Itoa(i+1), fmt.Sprintf("hello from chat %d", i+1))
	}
	cpu0, err := r.proc.CPUTime()
	if err != nil {
		r.kill()
		return res, err
	}
	self0 := selfCPU()
	start := time.Now()
	modelAt := make(chan []time.Duration, 1)
	go func() { // when the k-th model request arrived: shows where time goes
		var at []time.Duration
		for k := 1; k <= n; k++ {
			if r.model.WaitCalls(ctx, k) != nil {
				break
			}
			at = append(at, time.Since(start))
		}
		modelAt <- at
	}()
	for _, m := range msgs {
		r.tg.PushMessage(m)
	}
	res.pushed = time.Since(start)
	for k := 1; k <= n; k++ {
		if err := r.tg.WaitCalls(ctx, "sendMessage", k); err != nil {
			r.kill()
			return res, fmt.Errorf("%d chats: %d of %d answered: %w", n, k-1, n, err)
		}
		res.replies = append(res.replies, time.Since(start))
	}
	res.wall = res.replies[n-1]
	res.modelAt = <-modelAt
	cpu1, err := r.proc.CPUTime()
	if err != nil {
		r.kill()
		return res, err
	}
	res.cpu = cpu1 - cpu0
	res.fakesCPU = selfCPU() - self0
	res.peakKB, err = r.proc.StatusKB("VmHWM")
	if err != nil {
		r.kill()
		return res, err
	}
	sent, err := r.tg.WaitSent(ctx, n) // recorded just after the calls counted
	if err != nil {
		r.kill()
		return res, err
	}
	got := map[int64]string{}
	for _, m := range sent {
		if _, dup := got[m.ChatID]; dup {
			r.kill()
			return res, fmt.Errorf("chat %d answered twice", m.ChatID)
		}
		got[m.ChatID] = m.Text
	}
	for i := range n {
		if want := fmt.Sprintf("You said: hello from chat %d", i+1); got[int64(i+1)] != want {
			r.kill()
			return res, fmt.Errorf("chat %d: got %q, want %q", i+1, got[int64(i+1)], want)
		}
	}
	if calls := r.model.Calls(); calls != n {
		r.kill()
		return res, fmt.Errorf("%d model calls for %d chats", calls, n)
	}
	return res, r.stop()
}

// tokenResult is row 6.
type tokenResult struct {
	turns      int
	actual     []int // per turn (index 0 = turn 1): estimated prompt tokens of the turn's request
	naive      []int // the same for the whole uncompacted transcript
	summaries  int   // compaction's summary requests
	summaryTok int   // their prompt tokens
	firstFold  int   // first turn whose request carried a summary; 0: none
	checked    int   // turns whose request was compared with the reconstruction
}

// measureTokens holds a conversation of turns turns in one chat and compares
// each turn's request with the naive request carrying the whole history.
// Both are counted with agent.EstimateTokens (about four bytes a token plus
// framing, tool schemas included), the estimator compaction itself uses.
//
// The naive request is rebuilt from what the model saw: the system prompt of
// turn 1 (no summary in it), every earlier user message as it arrived, every
// earlier answer as the fake gave it, and this turn's message. For the turns
// before the first compaction the rebuilt history must equal the real
// request message for message, which checks the rebuilding.
func measureTokens(ctx context.Context, bin, root string, s settings, turns int) (tokenResult, error) {
	res := tokenResult{turns: turns}
	r, err := startRig(ctx, bin, root, s)
	if err != nil {
		return res, err
	}
	r.model.SetDefault(answer(0))
	if _, err := converse(ctx, r, turns); err != nil {
		r.kill()
		return res, err
	}
	reqs := r.model.Requests()
	if err := r.stop(); err != nil {
		return res, err
	}
	byTurn := make([]*testkit.Recorded, turns+1)
	for i := range reqs {
		rq := &reqs[i]
		if isSummary(*rq) {
			res.summaries++
			res.summaryTok += agent.EstimateTokens(rq.Messages, rq.Tools)
			continue
		}
		n, ok := turnNumber(lastMessage(rq.Messages).Content)
		if !ok || n > turns || byTurn[n] != nil {
			return res, fmt.Errorf("unexpected model request %d (last message %.60q)", i+1, lastMessage(rq.Messages).Content)
		}
		byTurn[n] = rq
	}
	for t := 1; t <= turns; t++ {
		if byTurn[t] == nil {
			return res, fmt.Errorf("turn %d: no model request", t)
		}
	}
	system := byTurn[1].Messages[0]
	history := []llm.Message{system}
	for t := 1; t <= turns; t++ {
		rq := byTurn[t]
		history = append(history, lastMessage(rq.Messages))
		res.actual = append(res.actual, agent.EstimateTokens(rq.Messages, rq.Tools))
		res.naive = append(res.naive, agent.EstimateTokens(history, rq.Tools))
		if strings.Contains(rq.Messages[0].Content, "Earlier in this conversation (summary)") {
			if res.firstFold == 0 {
				res.firstFold = t
			}
		} else {
			if !sameMessages(rq.Messages[1:], history[1:]) {
				return res, fmt.Errorf("turn %d: the rebuilt history differs from the uncompacted request", t)
			}
			res.checked++
		}
		history = append(history, llm.Message{Role: llm.RoleAssistant, Content: assistantText(t)})
	}
	return res, nil
}

func sameMessages(a, b []llm.Message) bool {
	return slices.EqualFunc(a, b, func(x, y llm.Message) bool {
		return x.Role == y.Role && x.Content == y.Content && len(x.ToolCalls) == 0 && len(y.ToolCalls) == 0
	})
}

// selfCPU is the CPU time this process (the fakes, mostly) used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
