package reply_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/fallback"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/reply"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/store"
)

// The outbox keeps every reply the router sends on behalf of a message or
// a job, not only a turn's text: files (send_file, send_photo), reminders
// and command confirmations, in order within their chat.

// fileModel sends a file: to "file" it calls send_file with report.txt;
// to "text and file" it calls send_message, then send_file. Then it ends
// without more text (the turn delivered).
type fileModel struct{}

func (fileModel) Complete(_ context.Context, req llm.Request, _ func(llm.Delta)) (llm.Response, error) {
	user, done := "", 0
	for _, m := range req.Messages {
		switch m.Role {
		case llm.RoleUser:
			user, done = m.Content, 0
		case llm.RoleTool:
			done++
		}
	}
	steps := []llm.ToolCall{{Name: "send_file", Arguments: `{"file":"report.txt","caption":"the report"}`}}
	if user == "text and file" {
		steps = append([]llm.ToolCall{{Name: "send_message", Arguments: `{"text":"here it comes"}`}}, steps...)
	}
	if done >= len(steps) {
		return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: fallback.NoReply}, FinishReason: "stop"}, nil
	}
	call := steps[done]
	call.ID = fmt.Sprintf("call-%d", done)
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}},
		FinishReason: llm.FinishToolCalls}, nil
}

// workspace is a files root holding report.txt.
func workspace(t *testing.T) (root string, content []byte) {
	t.Helper()
	root = t.TempDir()
	content = []byte("quarterly numbers\n")
	if err := os.WriteFile(filepath.Join(root, "report.txt"), content, 0o600); err != nil {
		t.Fatal(err)
	}
	return root, content
}

// outage45s starts a 502 outage of methods at the fake and ends it once
// the virtual clock is 45 s past now.
func outage45s(clock *vclock, fake *tgfake.Fake, methods ...string) {
	for _, m := range methods {
		fake.Outage(m, http.StatusBadGateway, badGateway)
	}
	start := clock.Now()
	clock.mu.Lock()
	defer clock.mu.Unlock()
	clock.onAdvance = func(now time.Time) {
		if now.Sub(start) >= 45*time.Second {
			for _, m := range methods {
				fake.EndOutage(m)
			}
		}
	}
}

// fileOutage starts a router whose model sends a workspace file, on a
// virtual clock, against a fake whose method is out for 45 s.
func fileOutage(t *testing.T, method string) (fake *tgfake.Fake, st *store.Store, root string, content []byte, clock *vclock, e *tgRouter) {
	fake = tgfake.New(t, "123:ABC")
	st = openStore(t, filepath.Join(t.TempDir(), "o.db"))
	root, content = workspace(t)
	clock = newVclock(t)
	outage45s(clock, fake, method)
	e = startTgRouterWith(t, st, fake, clock, 0, fileModel{}, root)
	return fake, st, root, content, clock, e
}

// A file sent with send_file during a 45-second Telegram outage is kept
// and uploaded once after it, read from the workspace then; its message
// counts as answered once.
func TestOutboxFileDuringOutage(t *testing.T) {
	fake, st, root, content, clock, e := fileOutage(t, "sendDocument")

	fake.PushText(7, 7, "ada", "file")
	e.events.wait(t, reply.OutboxQueued, 1)
	if err := e.r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if sent := fake.Sent(); len(sent) != 0 {
		t.Fatalf("sent %+v during the outage", sent)
	}
	turn, ok, err := st.TurnForInbox(t.Context(), 1)
	if err != nil || !ok || turn.Status != store.TurnCompleted || turn.Error != "" || turn.Delivery != store.DeliveryPending {
		t.Fatalf("turn: %+v (%v), want completed without error, delivery pending", turn, err)
	}
	// The file changes before it goes out: what goes out is read then.
	content = append(content, "amended\n"...)
	if err := os.WriteFile(filepath.Join(root, "report.txt"), content, 0o600); err != nil {
		t.Fatal(err)
	}

	close(clock.run)
	e.events.wait(t, reply.OutboxDelivered, 1)
	sent := fake.Sent()
	if len(sent) != 1 || sent[0].Method != "sendDocument" || sent[0].ChatID != 7 || sent[0].Text != "the report" ||
		sent[0].FileName != "report.txt" || string(sent[0].FileData) != string(content) {
		t.Fatalf("Telegram holds %+v, want report.txt once with its caption", sent)
	}
	if n, err := st.Deliveries(t.Context(), 1); err != nil || n != 1 {
		t.Errorf("%d deliveries (%v), want 1", n, err)
	}
	if turn, _, _ := st.TurnForInbox(t.Context(), 1); turn.Delivery != store.DeliveryLate {
		t.Errorf("turn delivery %q, want late", turn.Delivery)
	}
	if left, _ := st.PendingOutbox(t.Context()); len(left) != 0 || e.r.PendingReplies() != 0 {
		t.Errorf("outbox still holds %d replies (gauge %d)", len(left), e.r.PendingReplies())
	}
}

// A waiting file whose workspace file is gone when the platform is back is
// dropped with an ERROR saying so (and the dropped event, the metric).
func TestOutboxFileGone(t *testing.T) {
	fake, st, root, _, clock, e := fileOutage(t, "sendDocument")
	fake.PushText(7, 7, "ada", "file")
	e.events.wait(t, reply.OutboxQueued, 1)
	if err := e.r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, "report.txt")); err != nil {
		t.Fatal(err)
	}
	close(clock.run)
	e.events.wait(t, reply.OutboxDropped, 1)
	if sent := fake.Sent(); len(sent) != 0 {
		t.Errorf("sent %+v", sent)
	}
	logs := e.logs()
	if !strings.Contains(logs, `level=ERROR msg="reply dropped undelivered"`) || !strings.Contains(logs, "the file to send is gone") {
		t.Errorf("no ERROR saying the file is gone in the log:\n%s", logs)
	}
	if turn, _, _ := st.TurnForInbox(t.Context(), 1); turn.Delivery != store.DeliveryDropped {
		t.Errorf("turn delivery %q, want dropped", turn.Delivery)
	}
}

// A text waiting in the outbox holds back a file for the same chat, though
// Telegram takes files: both go out after the outage, text first.
func TestOutboxKeepsOrderOfTextAndFile(t *testing.T) {
	fake, st, _, content, clock, e := fileOutage(t, "sendMessage")

	fake.PushText(7, 7, "ada", "text and file")
	e.events.wait(t, reply.OutboxQueued, 2)
	if err := e.r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if sent := fake.Sent(); len(sent) != 0 {
		t.Fatalf("sent %+v while the text waits: the file overtook it", sent)
	}
	close(clock.run)
	e.events.wait(t, reply.OutboxDelivered, 2)
	sent := fake.Sent()
	if len(sent) != 2 || sent[0].Method != "sendMessage" || sent[0].Text != "here it comes" ||
		sent[1].Method != "sendDocument" || string(sent[1].FileData) != string(content) {
		t.Fatalf("Telegram holds %+v, want the text, then the file, once each", sent)
	}
	if n, _ := st.Deliveries(t.Context(), 1); n != 2 {
		t.Errorf("%d deliveries, want 2", n)
	}
}

// A reminder fired during an outage is kept (the run counts as sent) and
// delivered once after it; its run's delivery is recorded then, by the
// store, as the scheduler's callback is gone.
func TestOutboxReminderDuringOutage(t *testing.T) {
	fake := tgfake.New(t, "123:ABC")
	st := openStore(t, filepath.Join(t.TempDir(), "o.db"))
	clock := newVclock(t)
	outage45s(clock, fake, "sendMessage")
	e := startTgRouter(t, st, fake, clock, 0)
	runID := scheduleRun(t, st)

	var mu sync.Mutex
	var calls int
	res, err := e.r.RunJob(t.Context(), router.JobTurn{Name: "tea", Channel: "telegram", ChatID: "7", ChatType: channels.DM,
		Text: "Time for tea", RunID: runID, Delivered: func(ctx context.Context, turnID int64, id string) {
			mu.Lock()
			calls++
			mu.Unlock()
			_ = st.RecordScheduleDelivery(ctx, runID, turnID, id)
		}})
	if err != nil || !res.Delivered {
		t.Fatalf("RunJob = %+v, %v; want delivered (kept), no error", res, err)
	}
	if n, err := st.ScheduleDeliveries(t.Context(), runID); err != nil || n != 1 {
		t.Errorf("the run counts %d deliveries (%v) while its reminder waits, want 1 (not run again after a restart)", n, err)
	}
	close(clock.run)
	e.events.wait(t, reply.OutboxDelivered, 1)
	if got := sentByChat(fake); fmt.Sprint(got) != fmt.Sprint(map[int64][]string{7: {"Time for tea"}}) {
		t.Fatalf("Telegram holds %v, want the reminder once", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 0 {
		t.Errorf("Delivered called %d times for a kept reminder", calls)
	}
	if n, err := st.ScheduleDeliveries(t.Context(), runID); err != nil || n != 1 {
		t.Errorf("the run has %d deliveries (%v), want 1", n, err)
	}
}

// scheduleRun records a running run of a reminder in chat telegram/7.
func scheduleRun(t *testing.T, st *store.Store) int64 {
	t.Helper()
	at := time.Now().UTC().Truncate(time.Minute)
	sc, err := st.CreateSchedule(t.Context(), store.Schedule{Name: "tea", Origin: store.OriginChat, Spec: "in 1m",
		Timezone: "UTC", Kind: "reminder", Body: "Time for tea", Channel: "telegram", ChatKey: "7", NextRunAt: &at})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := st.AdvanceSchedule(t.Context(), sc.ID, at, time.Time{}, []store.NewScheduleRun{{ScheduledFor: at, Outcome: store.RunRunning}})
	if err != nil {
		t.Fatal(err)
	}
	return ids[0]
}

// Command confirmations during an outage are kept and delivered once
// after it: /new's (a queued command) and /stop's (an immediate one); each
// message counts as answered, and no turn ran.
func TestOutboxCommandConfirmations(t *testing.T) {
	fake := tgfake.New(t, "123:ABC")
	st := openStore(t, filepath.Join(t.TempDir(), "o.db"))
	clock := newVclock(t)
	outage45s(clock, fake, "sendMessage")
	e := startTgRouter(t, st, fake, clock, 0)

	fake.PushText(7, 7, "ada", "/new")
	e.events.wait(t, reply.OutboxQueued, 1)
	update, _ := fake.PushText(8, 8, "bob", "/stop")
	e.events.wait(t, reply.OutboxQueued, 1)
	if err := e.r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := fake.WaitOffset(t.Context(), update+1); err != nil { // /stop was handled whole
		t.Fatal(err)
	}
	if pending, _ := st.PendingInbox(t.Context()); len(pending) != 0 {
		t.Errorf("%d messages still pending", len(pending))
	}
	close(clock.run)
	e.events.wait(t, reply.OutboxDelivered, 2)
	want := map[int64][]string{7: {"Started a new conversation. The previous one stays stored."}, 8: {"Nothing to stop."}}
	if got := sentByChat(fake); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Telegram holds %v, want %v", got, want)
	}
	for _, inbox := range []int64{1, 2} {
		if n, _ := st.Deliveries(t.Context(), inbox); n != 1 {
			t.Errorf("inbox %d has %d deliveries, want 1", inbox, n)
		}
	}
	if n := e.model.count(); n != 0 {
		t.Errorf("the model ran %d times, want none", n)
	}
}

// Replies to a requester waiting in this process (the HTTP API, the
// terminal) are never kept: it gets the failure at once.
func TestOutboxNotForInProcessRequesters(t *testing.T) {
	e := newFlakyEnv(t, 0)
	ch := &inProcessChannel{flakyChannel: e.ch}
	e.r.AddChannel(ch, everyone)
	e.ch.set(true, false)
	// A turn in the chat (the fake runner sends "echo: hi" through its
	// chat binding).
	in := channels.Inbound{Channel: ch.Name(), ChatID: "c1"}
	res := e.r.RunTurn(t.Context(), router.ChatTurn{In: in, Reply: in, Adjust: func(t *agent.Turn) { t.Input.Content = "hi" }})
	if err := res.Err; err == nil || !strings.Contains(err.Error(), "502") {
		t.Fatalf("the turn's send = %v, want the platform's error", err)
	}
	if left, _ := e.st.PendingOutbox(t.Context()); len(left) != 0 {
		t.Errorf("outbox holds %d replies, want none", len(left))
	}
}

// inProcessChannel is a flakyChannel answering a requester in this process.
type inProcessChannel struct{ *flakyChannel }

func (inProcessChannel) Name() string           { return "api" }
func (inProcessChannel) RepliesInProcess() bool { return true }

// logs is the router's log so far.
func (e *tgRouter) logs() string {
	return e.log.String()
}

var _ agent.Model = fileModel{}
