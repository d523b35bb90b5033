package router

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/llm"
)

// deliveries collects what a job's Delivered callback saw.
type deliveries struct {
	mu  sync.Mutex
	ids []string
}

func (d *deliveries) record(_ context.Context, _ int64, id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ids = append(d.ids, id)
}

func (d *deliveries) get() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.ids)
}

type jobResult struct {
	res agent.Result
	err error
}

func (e *env) runJob(ctx context.Context, j JobTurn) <-chan jobResult {
	out := make(chan jobResult, 1)
	go func() {
		res, err := e.r.RunJob(ctx, j)
		out <- jobResult{res, err}
	}()
	return out
}

// A reminder is sent verbatim without the model, reported to Delivered,
// and recorded in the conversation as a job turn.
func TestRunJobReminder(t *testing.T) {
	e := newEnv(t, 4, everyone)
	var d deliveries
	res, err := e.r.RunJob(e.ctx, JobTurn{Name: "water", Channel: "fake", ChatID: "c1", ChatType: channels.DM,
		UserID: "u1", Text: "Drink some water.", Delivered: d.record})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Delivered || res.Reply != "Drink some water." || res.TurnID == 0 {
		t.Errorf("result = %+v", res)
	}
	if got := e.ch.Texts(); !slices.Equal(got, []string{"Drink some water."}) {
		t.Errorf("sent %q", got)
	}
	if len(e.runner.Turns) != 0 {
		t.Errorf("a reminder called the agent: %+v", e.runner.Turns)
	}
	if got := d.get(); !slices.Equal(got, []string{"out-1"}) {
		t.Errorf("delivered = %q, want [out-1]", got)
	}
	chat, _ := e.st.EnsureChat(e.ctx, "fake", "c1", "", "")
	turns, _ := e.st.Turns(e.ctx, chat.ID, 0)
	if len(turns) != 1 || turns[0].Kind != "job" || turns[0].Status != "completed" || turns[0].UserID != "u1" || turns[0].InboxID != 0 {
		t.Fatalf("turns = %+v", turns)
	}
	sess, _ := e.st.CurrentSession(e.ctx, chat.ID)
	msgs, _ := e.st.Messages(e.ctx, sess.ID)
	if len(msgs) != 2 || msgs[0].Content != "[scheduled reminder water]" || msgs[1].Role != llm.RoleAssistant || msgs[1].Content != "Drink some water." {
		t.Errorf("transcript = %+v", msgs)
	}
}

// A job waits for the chat's running turn, and a message that arrives
// meanwhile waits for the job: one FIFO per chat for both.
func TestRunJobSharesTheChatFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 4, everyone)
		release := e.runner.Hold("first")
		e.deliver(t, msg("c1", "u1", "first"))
		if got := <-e.runner.Started; got != "first" {
			t.Fatalf("started %q", got)
		}
		var d deliveries
		done := e.runJob(e.ctx, JobTurn{Name: "digest", Channel: "fake", ChatID: "c1", UserID: "u1",
			Prompt: "Summarise the news.", MaxSteps: 3, Delivered: d.record})
		synctest.Wait()
		if n := len(e.runner.Started); n != 0 {
			t.Fatalf("the job started while the chat's turn was running (%d started)", n)
		}
		if d := e.r.QueueDepth(); d != 1 {
			t.Fatalf("queue depth = %d, want 1 (the job)", d)
		}
		e.deliver(t, msg("c1", "u1", "second"))
		close(release)
		r := <-done
		if r.err != nil || !r.res.Delivered {
			t.Fatalf("RunJob = %+v, %v", r.res, r.err)
		}
		e.waitSent(t, 3)
		jobText := "Summarise the news."
		want := []string{"echo: first", "echo: " + jobText, "echo: second"}
		if got := e.ch.Texts(); !slices.Equal(got, want) {
			t.Fatalf("sent %q, want %q", got, want)
		}
		// The job's turn: kind job, the owner, the chat key, its own step cap.
		jt := e.runner.Turns[1]
		if jt.Kind != "job" || jt.UserID != "u1" || jt.ChatKey != "c1" || jt.MaxSteps != 3 || jt.InboxID != 0 || jt.Input.Content != jobText ||
			!strings.HasPrefix(jt.Note, "[scheduled task digest] ") {
			t.Errorf("job turn = %+v", jt)
		}
		if e.runner.Turns[2].ChatKey != "c1" || e.runner.Turns[2].Kind != "" {
			t.Errorf("user turn after the job = %+v", e.runner.Turns[2])
		}
		if got := d.get(); !slices.Equal(got, []string{"out-2"}) {
			t.Errorf("job deliveries = %q, want [out-2]", got)
		}
		if e.runner.MaxSeen != 1 {
			t.Errorf("one chat ran %d turns at once", e.runner.MaxSeen)
		}
		_ = e.r.Shutdown(context.Background())
		e.st.Close()
	})
}

// /stop drops a queued job (RunJob says so); a job whose caller gave up
// never runs; shutdown refuses new jobs.
func TestRunJobDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 4, everyone)
		e.runner.Hold("long")
		e.deliver(t, msg("c1", "u1", "long"))
		<-e.runner.Started
		stopped := e.runJob(e.ctx, JobTurn{Name: "a", Channel: "fake", ChatID: "c1", Text: "never sent"})
		synctest.Wait()
		e.deliver(t, msg("c1", "u1", "/stop"))
		if r := <-stopped; !errors.Is(r.err, ErrJobStopped) {
			t.Fatalf("RunJob after /stop: %v, want ErrJobStopped", r.err)
		}

		release := e.runner.Hold("again")
		e.deliver(t, msg("c1", "u1", "again"))
		<-e.runner.Started
		ctx, cancel := context.WithCancel(e.ctx)
		withdrawn := e.runJob(ctx, JobTurn{Name: "b", Channel: "fake", ChatID: "c1", Prompt: "never run"})
		synctest.Wait()
		cancel()
		if r := <-withdrawn; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("RunJob with its ctx cancelled: %v", r.err)
		}
		close(release)
		if err := e.r.Drain(e.ctx); err != nil {
			t.Fatal(err)
		}
		want := []string{"Stopped. I also dropped 1 queued message(s).", "echo: again"}
		if got := e.ch.Texts(); !slices.Equal(got, want) {
			t.Fatalf("sent %q, want %q", got, want)
		}
		if n := len(e.runner.Turns); n != 2 {
			t.Errorf("%d agent turns, want 2 (no job ran)", n)
		}

		_ = e.r.Shutdown(context.Background())
		if _, err := e.r.RunJob(e.ctx, JobTurn{Name: "c", Channel: "fake", ChatID: "c1", Text: "x"}); !errors.Is(err, ErrShuttingDown) {
			t.Errorf("RunJob after shutdown: %v, want ErrShuttingDown", err)
		}
		e.st.Close()
	})
}

func TestRunJobRejectsBadJobs(t *testing.T) {
	e := newEnv(t, 4, everyone)
	for _, j := range []JobTurn{
		{Name: "no chat", Channel: "fake", Text: "x"},
		{Name: "both", Channel: "fake", ChatID: "c1", Text: "x", Prompt: "y"},
		{Name: "neither", Channel: "fake", ChatID: "c1"},
		{Name: "unknown channel", Channel: "pigeon", ChatID: "c1", Text: "x"},
	} {
		if _, err := e.r.RunJob(e.ctx, j); err == nil {
			t.Errorf("RunJob(%s) succeeded", j.Name)
		}
	}
	if len(e.ch.Texts()) != 0 || len(e.runner.Turns) != 0 {
		t.Error("a rejected job sent or ran something")
	}
}
