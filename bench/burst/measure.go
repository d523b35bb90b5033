package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// model is how the fake model answers a burst: a user's message "hello
// from chat N" gets "You said: hello from chat N" plus tail after first,
// fragment by fragment, each gap after the previous (testkit's
// ChunkDelay: the first text too);
// anything else (the learning jobs' requests) gets a short text after
// first. It records when each chat's answer began to stream.
type model struct {
	first, gap time.Duration
	tail       string

	mu    sync.Mutex
	token map[int64]time.Time // chat → when its first token left the fake
}

func (m *model) reply() *testkit.Reply {
	return &testkit.Reply{Func: func(r testkit.Recorded) testkit.Reply {
		var chat int64
		last := r.Messages[len(r.Messages)-1]
		if _, err := fmt.Sscanf(last.Content, "hello from chat %d", &chat); err != nil || last.Role != llm.RoleUser ||
			last.Content != question(chat) {
			return testkit.Reply{Text: "Nothing to note.", Delay: m.first}
		}
		first := func(fragment string, at time.Time) {
			m.mu.Lock()
			defer m.mu.Unlock()
			if _, ok := m.token[chat]; !ok && fragment != "" { // a retry's tokens come later
				m.token[chat] = at
			}
		}
		return testkit.Reply{Text: answer(chat, m.tail), Delay: m.first, ChunkDelay: m.gap, OnChunk: first}
	}}
}

func question(chat int64) string            { return fmt.Sprintf("hello from chat %d", chat) }
func answer(chat int64, tail string) string { return "You said: " + question(chat) + tail }

// burstResult is one burst of users.
type burstResult struct {
	users     int
	wall      time.Duration   // first message pushed → last answer visible
	answered  []time.Duration // per user, first push → their whole answer visible, sorted
	firstText []time.Duration // per user, first token → first text visible, sorted
	tooMany   int             // calls the Telegram fake answered 429
	calls     map[string]int  // Bot API calls by method during the burst
	idleKB    int             // VmRSS before the burst
	cpu       time.Duration   // CPU time the gateway used from the first push to the last answer
	peakKB    int             // VmHWM after it
}

// measureBurst starts a gateway with the shipped defaults, then users
// private chats each send one message at the same moment and the model
// answers as m says. Every chat must see its whole answer, once.
func measureBurst(ctx context.Context, bin, root string, users int, m *model) (burstResult, error) {
	res := burstResult{users: users}
	r, err := startRig(ctx, bin, root, users)
	if err != nil {
		return res, err
	}
	fail := func(err error) (burstResult, error) {
		r.kill()
		return res, err
	}
	m.token = map[int64]time.Time{}
	r.model.SetDefault(m.reply())
	r.model.DiscardRequests()
	msgs := make([]map[string]any, users)
	for i := range msgs {
		id := int64(i + 1)
		msgs[i] = r.tg.NewMessage(id, id, fmt.Sprintf("user%d", id), question(id))
	}
	if res.idleKB, err = r.proc.StatusKB("VmRSS"); err != nil {
		return fail(err)
	}
	cpu0, err := r.proc.CPUTime()
	if err != nil {
		return fail(err)
	}
	base := r.rec.count()
	start := time.Now()
	for _, msg := range msgs {
		r.tg.PushMessage(msg)
	}
	done := make(map[int64]time.Time, users)
	first := make(map[int64]time.Time, users)
	seen := 0
	for len(done) < users {
		calls, more := r.rec.since(base + seen)
		seen += len(calls)
		for _, c := range calls {
			if !c.visible() || c.chat < 1 || c.chat > int64(users) {
				continue
			}
			if _, ok := first[c.chat]; !ok {
				first[c.chat] = c.at
			}
			if _, ok := done[c.chat]; !ok && c.text == answer(c.chat, m.tail) {
				done[c.chat] = c.at
			}
		}
		if len(done) == users {
			break
		}
		select {
		case <-ctx.Done():
			return fail(fmt.Errorf("%d users: %d answered: %w", users, len(done), ctx.Err()))
		case <-more:
		}
	}
	cpu1, err := r.proc.CPUTime()
	if err != nil {
		return fail(err)
	}
	res.cpu = cpu1 - cpu0
	if res.peakKB, err = r.proc.StatusKB("VmHWM"); err != nil {
		return fail(err)
	}
	m.mu.Lock()
	for chat, at := range done {
		res.answered = append(res.answered, at.Sub(start))
		res.wall = max(res.wall, at.Sub(start))
		if tok, ok := m.token[chat]; ok {
			res.firstText = append(res.firstText, max(first[chat].Sub(tok), 0))
		}
	}
	m.mu.Unlock()
	slices.Sort(res.answered)
	slices.Sort(res.firstText)
	res.calls = map[string]int{}
	finals := map[int64]int{}
	all, _ := r.rec.since(base)
	for _, c := range all {
		res.calls[c.method]++
		if c.status == 429 {
			res.tooMany++
		}
		if c.method == "sendmessage" && c.status == 200 && c.text == answer(c.chat, m.tail) {
			finals[c.chat]++
		}
	}
	for chat, n := range finals {
		if n > 1 {
			return fail(fmt.Errorf("chat %d got its answer %d times", chat, n))
		}
	}
	return res, r.stop()
}
