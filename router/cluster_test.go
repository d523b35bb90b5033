package router

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/cluster"
	"github.com/switchboard-gateway/switchboard/internal/waitfor"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// Replicas in these tests are routers in one process on one SQLite file,
// each with its own cluster.Replica (heartbeat, leases), channel and agent.
// What they share is what replicas share: the store. The PostgreSQL version,
// with separate processes and SIGKILL, is e2e/replicas_test.go.

// sharedLog records every send of every replica, in order.
type sharedLog struct {
	mu    sync.Mutex
	sends []sentBy
	seq   int
}

type sentBy struct {
	replica, chat, text string
}

func (l *sharedLog) add(replica, chat, text string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	l.sends = append(l.sends, sentBy{replica, chat, text})
	return fmt.Sprintf("out-%d", l.seq)
}

func (l *sharedLog) snapshot() []sentBy {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.sends)
}

// replicaChannel is replica's "fake" channel, writing to the shared log.
type replicaChannel struct {
	replica string
	log     *sharedLog
}

func (c *replicaChannel) Name() string                                   { return "fake" }
func (c *replicaChannel) Run(ctx context.Context, _ channels.Sink) error { <-ctx.Done(); return nil }
func (c *replicaChannel) Send(_ context.Context, m channels.Outbound) (string, error) {
	return c.log.add(c.replica, m.ChatID, m.Text), nil
}

// chatRunner answers "echo: <text>", blocks on held texts, and counts
// turns running per chat across every replica that uses it.
type chatRunner struct {
	mu       sync.Mutex
	running  map[string]int
	overlap  int // turns that started while another ran for the same chat
	release  map[string]chan struct{}
	started  chan string
	finished chan string
}

func newChatRunner() *chatRunner {
	return &chatRunner{running: map[string]int{}, release: map[string]chan struct{}{},
		started: make(chan string, 1000), finished: make(chan string, 1000)}
}

func (f *chatRunner) hold(text string) chan struct{} {
	ch := make(chan struct{})
	f.mu.Lock()
	f.release[text] = ch
	f.mu.Unlock()
	return ch
}

func (f *chatRunner) Run(ctx context.Context, t agent.Turn) agent.Result {
	text := t.Input.Content
	chat := t.ChatKey
	f.mu.Lock()
	if f.running[chat] > 0 {
		f.overlap++
	}
	f.running[chat]++
	wait := f.release[text]
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.running[chat]--
		f.mu.Unlock()
		f.finished <- text
	}()
	f.started <- text
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return agent.Result{StopReason: agent.StopCancelled, Err: context.Cause(ctx)}
		}
	}
	if _, err := t.Chat.Send(ctx, "echo: "+text); err != nil {
		return agent.Result{StopReason: agent.StopLLMError, Err: err}
	}
	return agent.Result{StopReason: agent.StopEndTurn, Delivered: true}
}

// flakyHeartbeat is the store as a replica sees it; once dead, heartbeats
// fail, as for a process that has stopped.
type flakyHeartbeat struct {
	*store.Store
	dead atomic.Bool
}

func (f *flakyHeartbeat) Heartbeat(ctx context.Context, replica, info string) error {
	if f.dead.Load() {
		return errors.New("replica is dead")
	}
	return f.Store.Heartbeat(ctx, replica, info)
}

type testReplica struct {
	id      string
	r       *Router
	rep     *cluster.Replica
	hb      *flakyHeartbeat
	lost    chan struct{}
	stopped bool
}

// newReplicaRouter starts a router with a replica named id on st.
func newReplicaRouter(t *testing.T, st *store.Store, id string, ttl time.Duration, runner Runner, log *sharedLog) *testReplica {
	t.Helper()
	return newReplicaRouterN(t, st, id, ttl, 8, runner, log)
}

func newReplicaRouterN(t *testing.T, st *store.Store, id string, ttl time.Duration, slots int, runner Runner, log *sharedLog) *testReplica {
	t.Helper()
	tr := &testReplica{id: id, hb: &flakyHeartbeat{Store: st}, lost: make(chan struct{})}
	var err error
	tr.rep, err = cluster.New(cluster.Config{Store: tr.hb, ID: id, TTL: ttl, Poll: 10 * time.Millisecond,
		Lost: func() { close(tr.lost) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.rep.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	tr.r, err = New(Config{Store: st, Agent: runner, MaxConcurrentTurns: slots, Cluster: tr.rep,
		NewTicker: func(time.Duration) Ticker { return stoppedTicker{} }})
	if err != nil {
		t.Fatal(err)
	}
	tr.r.AddChannel(&replicaChannel{replica: id, log: log}, everyone)
	if err := tr.r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-tr.lost:
			if !tr.hb.dead.Load() {
				t.Errorf("replica %s lost its heartbeat without being killed", id)
			}
		default:
		}
		tr.stop()
	})
	return tr
}

// stop is a graceful stop: the router drains, the replica leaves.
func (tr *testReplica) stop() {
	if tr.stopped {
		return
	}
	tr.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = tr.r.Shutdown(ctx)
	_ = tr.rep.Stop(ctx)
}

// kill is a crash: heartbeats stop and running turns are cut off where
// they are, without handing anything over.
func (tr *testReplica) kill(t *testing.T) {
	t.Helper()
	tr.hb.dead.Store(true)
	tr.stopped = true
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	_ = tr.r.Shutdown(expired) // checkpoints running turns; messages stay pending
	select {
	case <-tr.lost:
	case <-time.After(10 * time.Second):
		t.Fatal("the dead replica never noticed that its heartbeat stopped")
	}
}

func openShared(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "shared.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	testStore.Store(st)
	return st
}

var testStore atomic.Pointer[store.Store]

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := waitfor.Poll(ctx, 5*time.Millisecond, cond); err != nil {
		var sb strings.Builder
		if st := testStore.Load(); st != nil {
			items, _ := st.PendingInbox(context.Background())
			for _, it := range items {
				fmt.Fprintf(&sb, " pending %d %s/%s;", it.ID, it.ChatKey, it.MessageID)
			}
			turns, _ := st.RunningTurns(context.Background())
			fmt.Fprintf(&sb, " running turns %+v", turns)
		}
		t.Fatalf("waiting for %s: %v;%s", what, err, sb.String())
	}
}

// Messages of many chats, each delivered to any of three replicas, are
// each answered once, in order within the chat, and never by two replicas
// at once for one chat.
func TestClusterEachMessageOnceInOrder(t *testing.T) {
	st := openShared(t)
	log := &sharedLog{}
	runner := newChatRunner()
	reps := []*testReplica{
		newReplicaRouter(t, st, "a", 5*time.Second, runner, log),
		newReplicaRouter(t, st, "b", 5*time.Second, runner, log),
		newReplicaRouter(t, st, "c", 5*time.Second, runner, log),
	}
	const chats, perChat = 20, 4
	var wg sync.WaitGroup
	for c := range chats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range perChat {
				in := channels.Inbound{Channel: "fake", ChatID: fmt.Sprint("chat", c), ChatType: channels.DM,
					MessageID: fmt.Sprint(n), UserID: "u", Text: fmt.Sprintf("chat%d/%d", c, n), Mentioned: true}
				if err := reps[(c+n)%len(reps)].r.Deliver(t.Context(), in); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	waitUntil(t, "every answer", func() bool { return len(log.snapshot()) >= chats*perChat })

	sends := log.snapshot()
	seen := map[string]int{}
	last := map[string]int{}
	by := map[string]int{}
	for _, s := range sends {
		seen[s.text]++
		by[s.replica]++
		chat, n, _ := strings.Cut(strings.TrimPrefix(s.text, "echo: "), "/")
		var k int
		fmt.Sscan(n, &k)
		if prev, ok := last[chat]; ok && k != prev+1 {
			t.Errorf("chat %s: answer %d after %d", chat, k, prev)
		}
		last[chat] = k
	}
	for c := range chats {
		for n := range perChat {
			if got := seen[fmt.Sprintf("echo: chat%d/%d", c, n)]; got != 1 {
				t.Errorf("chat%d/%d answered %d times", c, n, got)
			}
		}
	}
	if len(sends) != chats*perChat {
		t.Errorf("%d sends; want %d", len(sends), chats*perChat)
	}
	runner.mu.Lock()
	overlap := runner.overlap
	runner.mu.Unlock()
	if overlap != 0 {
		t.Errorf("%d turns ran while another ran for the same chat", overlap)
	}
	if len(by) < 2 {
		t.Errorf("all answers came from %v; the work should spread over the replicas that took it in", by)
	}
	waitUntil(t, "no message pending", func() bool {
		pending, err := st.PendingInbox(t.Context())
		return err == nil && len(pending) == 0
	})
	// Idle chats are given back, so a job on any replica can take them.
	for _, tr := range reps {
		waitUntil(t, "idle chats given back", func() bool {
			leases, err := st.Leases(t.Context(), tr.id)
			return err == nil && len(leases) == 0
		})
	}
}

// A message taken in by a replica that does not own its chat is answered
// by the owner, after the owner's running turn, in order.
func TestClusterOwnerAnswersMessagesTakenInElsewhere(t *testing.T) {
	st := openShared(t)
	log := &sharedLog{}
	runner := newChatRunner()
	a := newReplicaRouter(t, st, "a", 5*time.Second, runner, log)

	release := runner.hold("x/0")
	if err := a.r.Deliver(t.Context(), msg("x", "u", "x/0")); err != nil {
		t.Fatal(err)
	}
	if got := <-runner.started; got != "x/0" {
		t.Fatalf("started %q", got)
	}
	b := newReplicaRouter(t, st, "b", 5*time.Second, runner, log) // once a has the chat (see the job test)
	for n := 1; n <= 2; n++ {
		if err := b.r.Deliver(t.Context(), msg("x", "u", fmt.Sprintf("x/%d", n))); err != nil {
			t.Fatal(err)
		}
	}
	// b stored them but may not run them while a owns the chat.
	if ok, err := st.AcquireChat(t.Context(), "fake", "x", "b", 5*time.Second); err != nil || ok {
		t.Fatalf("b could take the chat a owns: %v %v", ok, err)
	}
	close(release)
	waitUntil(t, "three answers", func() bool { return len(log.snapshot()) >= 3 })
	got := log.snapshot()
	want := []sentBy{{"a", "x", "echo: x/0"}, {"a", "x", "echo: x/1"}, {"a", "x", "echo: x/2"}}
	if !slices.Equal(got, want) {
		t.Fatalf("sends %v; want %v", got, want)
	}
}

// A replica that dies mid-turn loses its chats after the lease TTL, not
// before; another replica then resumes the unfinished message and answers
// it once.
func TestClusterTakeOverAfterLeaseExpiry(t *testing.T) {
	st := openShared(t)
	log := &sharedLog{}
	runner := newChatRunner()
	const ttl = 3 * time.Second
	a := newReplicaRouter(t, st, "a", ttl, runner, log)

	runner.hold("y/0") // never released: a dies in this turn
	if err := a.r.Deliver(t.Context(), msg("y", "u", "y/0")); err != nil {
		t.Fatal(err)
	}
	if got := <-runner.started; got != "y/0" {
		t.Fatalf("started %q", got)
	}
	b := newReplicaRouter(t, st, "b", ttl, runner, log) // once a has the chat (see the job test)
	if err := b.r.Deliver(t.Context(), msg("y", "u", "y/1")); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	a.kill(t)
	<-runner.finished // a's cut-off turn
	runner.mu.Lock()
	delete(runner.release, "y/0") // b's resumed turn answers at once
	runner.mu.Unlock()

	waitUntil(t, "b to answer both", func() bool { return len(log.snapshot()) >= 2 })
	took := time.Since(killed)
	got := log.snapshot()
	want := []sentBy{{"b", "y", "echo: y/0"}, {"b", "y", "echo: y/1"}}
	if !slices.Equal(got, want) {
		t.Fatalf("sends %v; want %v", got, want)
	}
	// a's last heartbeat was at most a quarter TTL before it died, so b may
	// not have taken the chat before three quarters of the TTL.
	if took < ttl*3/4-50*time.Millisecond {
		t.Errorf("b took the chat %s after a died; the lease lasts %s", took, ttl)
	}
	if took > 2*ttl+2*time.Second {
		t.Errorf("b took the chat only %s after a died (TTL %s)", took, ttl)
	}
	turns, err := st.RunningTurns(t.Context())
	if err != nil || len(turns) != 0 {
		t.Errorf("running turns after the takeover: %v %v", turns, err)
	}
}

// Turns a dead replica left running: the replica that takes the chat over
// resumes the one whose message is pending (here the fake runner answers
// it, without turn rows of its own) and records any other, such as a job's,
// as cancelled instead of leaving it running for ever.
func TestClusterTakeOverEndsTurnsLeftRunning(t *testing.T) {
	st := openShared(t)
	log := &sharedLog{}
	runner := newChatRunner()
	const ttl = 2 * time.Second
	a := newReplicaRouter(t, st, "a", ttl, runner, log)
	ctx := t.Context()

	runner.hold("j/0") // never released: a dies in this turn
	if err := a.r.Deliver(ctx, msg("j", "u", "j/0")); err != nil {
		t.Fatal(err)
	}
	<-runner.started
	newReplicaRouter(t, st, "b", ttl, runner, log) // takes the chat over; started once a has it (see the job test)
	// The rows a's agent would have written: the message's turn, and a
	// job's turn in the same chat.
	chat, err := st.EnsureChat(ctx, "fake", "j", "dm", "")
	if err != nil {
		t.Fatal(err)
	}
	pending, err := st.PendingInboxOf(ctx, "fake", "j")
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending %v, %v; want j/0", pending, err)
	}
	begin := func(kind string, inbox int64) int64 {
		t.Helper()
		id, _, err := st.BeginTurn(ctx, store.TurnStart{ChatID: chat.ID, InboxID: inbox, UserID: "u", Channel: "fake", Kind: kind},
			[]llm.Message{{Role: llm.RoleUser, Content: kind}})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	userTurn, jobTurn := begin("user", pending[0].ID), begin("job", 0)

	a.kill(t)
	<-runner.finished // a's cut-off turn
	runner.mu.Lock()
	delete(runner.release, "j/0")
	runner.mu.Unlock()
	waitUntil(t, "b to answer j/0", func() bool { return len(log.snapshot()) >= 1 })
	if got := log.snapshot(); got[0] != (sentBy{"b", "j", "echo: j/0"}) {
		t.Fatalf("sends %v; want b's answer to j/0", got)
	}
	job, err := st.Turn(ctx, jobTurn)
	if err != nil {
		t.Fatal(err)
	}
	if job.Status != "cancelled" || !strings.Contains(job.Error, "replica") {
		t.Errorf("the job's turn: status %q, error %q; want cancelled, saying its replica stopped", job.Status, job.Error)
	}
	user, err := st.Turn(ctx, userTurn)
	if err != nil {
		t.Fatal(err)
	}
	if user.Status != "running" {
		t.Errorf("the pending message's turn: status %q; want it left running for its message to resume", user.Status)
	}
}

// A job (from the scheduler, which runs on one replica) for a chat another
// replica is busy with waits for that chat and runs after its turn.
func TestClusterJobWaitsForTheChatsOwner(t *testing.T) {
	st := openShared(t)
	log := &sharedLog{}
	runner := newChatRunner()
	a := newReplicaRouter(t, st, "a", 5*time.Second, runner, log)

	release := runner.hold("z/0")
	if err := a.r.Deliver(t.Context(), msg("z", "u", "z/0")); err != nil {
		t.Fatal(err)
	}
	<-runner.started
	// b starts once a runs the chat: started before, its poll could take
	// the chat between a storing the message and taking its lease.
	b := newReplicaRouter(t, st, "b", 5*time.Second, runner, log)
	done := make(chan error, 1)
	go func() {
		_, err := b.r.RunJob(t.Context(), JobTurn{Name: "j", Channel: "fake", ChatID: "z", ChatType: channels.DM,
			UserID: "u", Prompt: "z/job"})
		done <- err
	}()
	// The job is queued on b but may not start while a runs the chat.
	waitUntil(t, "b to queue the job", func() bool { return b.r.Busy() == 1 })
	select {
	case s := <-runner.started:
		t.Fatalf("%q started while a still ran the chat", s)
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := log.snapshot()
	if len(got) != 2 || got[0] != (sentBy{"a", "z", "echo: z/0"}) || got[1].replica != "b" || !strings.Contains(got[1].text, "z/job") {
		t.Fatalf("sends %v; want a's answer, then b's job", got)
	}
	runner.mu.Lock()
	defer runner.mu.Unlock()
	if runner.overlap != 0 {
		t.Errorf("%d overlapping turns in one chat", runner.overlap)
	}
}

// A replica whose turn slots are all busy leaves new chats to replicas with
// room (with long polling, every update comes in on one replica).
func TestClusterBusyReplicaLeavesNewChatsToOthers(t *testing.T) {
	st := openShared(t)
	log := &sharedLog{}
	runner := newChatRunner()
	a := newReplicaRouterN(t, st, "a", 5*time.Second, 1, runner, log)

	release := runner.hold("p/0")
	if err := a.r.Deliver(t.Context(), msg("p", "u", "p/0")); err != nil {
		t.Fatal(err)
	}
	<-runner.started
	newReplicaRouterN(t, st, "b", 5*time.Second, 1, runner, log) // once a has the chat (see the job test)
	if err := a.r.Deliver(t.Context(), msg("q", "u", "q/0")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "b to answer the new chat", func() bool { return len(log.snapshot()) >= 1 })
	if got := log.snapshot(); got[0] != (sentBy{"b", "q", "echo: q/0"}) {
		t.Fatalf("sends %v; want b to answer q while a is busy", got)
	}
	close(release)
	waitUntil(t, "a's answer", func() bool { return len(log.snapshot()) >= 2 })
	if got := log.snapshot()[1]; got != (sentBy{"a", "p", "echo: p/0"}) {
		t.Fatalf("second send %v", got)
	}
}

// localChannel answers in the process that took the message in (like the
// HTTP API, whose reply goes out on the request's connection).
type localChannel struct{ replicaChannel }

func (c *localChannel) Name() string           { return "local" }
func (c *localChannel) RepliesInProcess() bool { return true }

// A message for an in-process channel is answered by the replica that took
// it in: it waits while another replica answers the chat, then takes it.
func TestClusterInProcessChannelAnswersWhereTakenIn(t *testing.T) {
	st := openShared(t)
	log := &sharedLog{}
	runner := newChatRunner()
	a := newReplicaRouter(t, st, "a", 5*time.Second, runner, log)
	b := newReplicaRouter(t, st, "b", 5*time.Second, runner, log)
	for _, tr := range []*testReplica{a, b} {
		tr.r.AddChannel(&localChannel{replicaChannel{replica: tr.id, log: log}}, everyone)
	}
	local := func(id, text string) channels.Inbound {
		return channels.Inbound{Channel: "local", ChatID: "user1", ChatType: channels.DM, MessageID: id,
			UserID: "user1", Text: text, Mentioned: true}
	}
	release := runner.hold("l/0")
	if err := a.r.Deliver(t.Context(), local("m0", "l/0")); err != nil {
		t.Fatal(err)
	}
	<-runner.started
	stored := make(chan error, 1)
	go func() { stored <- b.r.Deliver(t.Context(), local("m1", "l/1")) }()
	// b waits for the chat rather than storing a message a would answer.
	waitUntil(t, "b to wait for the chat", func() bool {
		b.r.mu.Lock()
		defer b.r.mu.Unlock()
		return b.r.own.(*leased).pinned["local\x00user1"] == 1
	})
	if items, err := st.PendingInbox(t.Context()); err != nil || len(items) != 1 {
		t.Fatalf("pending while b waits: %d %v; want only a's message", len(items), err)
	}
	close(release)
	if err := <-stored; err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "both answers", func() bool { return len(log.snapshot()) >= 2 })
	want := []sentBy{{"a", "user1", "echo: l/0"}, {"b", "user1", "echo: l/1"}}
	if got := log.snapshot(); !slices.Equal(got, want) {
		t.Fatalf("sends %v; want %v", got, want)
	}
}
