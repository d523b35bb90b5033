package store

import (
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/llm"
)

// The outbox keeps replies in order, claims each for one attempt, and
// records a late delivery (with the inbox's delivery record) or a drop on
// the reply and its turn.
func TestOutbox(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, _ := db.openTest(t)
		ctx := t.Context()
		chat, err := s.EnsureChat(ctx, "telegram", "42", "dm", "")
		if err != nil {
			t.Fatal(err)
		}
		inbox, _, err := s.Intake(ctx, InboxItem{Channel: "telegram", ChatKey: "42", MessageID: "7"})
		if err != nil {
			t.Fatal(err)
		}
		turn, _, err := s.BeginTurn(ctx, TurnStart{ChatID: chat.ID, InboxID: inbox, Channel: "telegram", Kind: "user"},
			[]llm.Message{{Role: llm.RoleUser, Content: "hi"}})
		if err != nil {
			t.Fatal(err)
		}
		now := clk.Now()
		first := OutboxItem{InboxID: inbox, TurnID: turn, Channel: "telegram", ChatKey: "42", MessageID: "7",
			Text: "one", Attempts: 1, LastError: "HTTP 502", NextAttemptAt: now.Add(5 * time.Second)}
		id1, err := s.EnqueueOutbox(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		id2, err := s.EnqueueOutbox(ctx, OutboxItem{InboxID: inbox, TurnID: turn, Channel: "telegram", ChatKey: "42", Text: "two"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.EnqueueOutbox(ctx, OutboxItem{Channel: "discord", ChatKey: "c", Text: "job reply"}); err != nil {
			t.Fatal(err)
		}
		pending, err := s.PendingOutbox(ctx)
		if err != nil || len(pending) != 3 || pending[0].ID != id1 || pending[1].ID != id2 {
			t.Fatalf("PendingOutbox = %+v, %v; want three, oldest first", pending, err)
		}
		if p := pending[0]; p.Text != "one" || p.Attempts != 1 || p.LastError != "HTTP 502" || !p.NextAttemptAt.Equal(now.Add(5*time.Second)) ||
			!p.CreatedAt.Equal(now) || p.InboxID != inbox || p.TurnID != turn || p.MessageID != "7" {
			t.Errorf("first = %+v", p)
		}
		if !pending[1].NextAttemptAt.Equal(now) || pending[2].InboxID != 0 || pending[2].TurnID != 0 {
			t.Errorf("second, third = %+v, %+v", pending[1], pending[2])
		}
		if n, err := s.OutboxWaiting(ctx, "telegram", "42"); err != nil || n != 2 {
			t.Errorf("OutboxWaiting = %d, %v; want 2", n, err)
		}
		if n, err := s.OutboxFor(ctx, inbox); err != nil || n != 2 {
			t.Errorf("OutboxFor = %d, %v; want 2", n, err)
		}
		if tr, _ := s.Turn(ctx, turn); tr.Delivery != DeliveryPending {
			t.Errorf("turn delivery = %q, want pending", tr.Delivery)
		}

		// One claim per reading: a second one with the same view loses.
		next := now.Add(10 * time.Second)
		if ok, err := s.ClaimOutbox(ctx, id1, pending[0].NextAttemptAt, next); err != nil || !ok {
			t.Fatalf("ClaimOutbox = %v, %v", ok, err)
		}
		if ok, err := s.ClaimOutbox(ctx, id1, pending[0].NextAttemptAt, next); err != nil || ok {
			t.Fatalf("second ClaimOutbox = %v, %v; want false", ok, err)
		}
		if err := s.RetryOutbox(ctx, id1, 2, next, "HTTP 503"); err != nil {
			t.Fatal(err)
		}
		pending, _ = s.PendingOutbox(ctx)
		if p := pending[0]; p.Attempts != 2 || p.LastError != "HTTP 503" || !p.NextAttemptAt.Equal(next) {
			t.Errorf("after a retry: %+v", p)
		}

		clk.Advance(time.Minute)
		if err := s.DeliverOutbox(ctx, pending[0], "100"); err != nil {
			t.Fatal(err)
		}
		if tr, _ := s.Turn(ctx, turn); tr.Delivery != DeliveryPending {
			t.Errorf("turn delivery with a reply still waiting = %q, want pending", tr.Delivery)
		}
		if err := s.DeliverOutbox(ctx, pending[1], "101"); err != nil {
			t.Fatal(err)
		}
		if tr, _ := s.Turn(ctx, turn); tr.Delivery != DeliveryLate {
			t.Errorf("turn delivery = %q, want late", tr.Delivery)
		}
		if n, _ := s.Deliveries(ctx, inbox); n != 2 {
			t.Errorf("%d deliveries recorded, want 2", n)
		}
		if n, _ := s.OutboxFor(ctx, inbox); n != 2 {
			t.Errorf("OutboxFor after delivery = %d, want 2 (delivered counts)", n)
		}
		if err := s.DropOutbox(ctx, pending[2], "too old"); err != nil {
			t.Fatal(err)
		}
		if pending, err := s.PendingOutbox(ctx); err != nil || len(pending) != 0 {
			t.Errorf("PendingOutbox at the end = %+v, %v", pending, err)
		}
		if n, _ := s.OutboxWaiting(ctx, "telegram", "42"); n != 0 {
			t.Errorf("OutboxWaiting at the end = %d", n)
		}
	})
}

// A file is kept by reference with its caption and photo flag; a reply of
// a scheduled run counts as its delivery while it waits (a restart does
// not run it again) and is recorded for the run when delivered late.
func TestOutboxFilesAndScheduledRuns(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, _ := db.openTest(t)
		ctx := t.Context()
		at := clk.Now().Truncate(time.Minute).Add(time.Minute)
		sc, err := s.CreateSchedule(ctx, Schedule{Name: "tea", Origin: OriginChat, Spec: "in 1m", Timezone: "UTC",
			Kind: "reminder", Body: "Time for tea", Channel: "telegram", ChatKey: "42", NextRunAt: &at})
		if err != nil {
			t.Fatal(err)
		}
		runs, err := s.AdvanceSchedule(ctx, sc.ID, at, time.Time{}, []NewScheduleRun{{ScheduledFor: at, Outcome: RunRunning}})
		if err != nil {
			t.Fatal(err)
		}
		run := runs[0]
		if _, err := s.EnqueueOutbox(ctx, OutboxItem{Channel: "telegram", ChatKey: "42", Text: "Time for tea", ScheduleRunID: run}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.EnqueueOutbox(ctx, OutboxItem{Channel: "telegram", ChatKey: "42", Text: "the chart",
			FilePath: "/work/chart.png", Photo: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.EnqueueOutbox(ctx, OutboxItem{Channel: "telegram", ChatKey: "42", FileURL: "https://example.com/a.pdf"}); err != nil {
			t.Fatal(err)
		}
		pending, err := s.PendingOutbox(ctx)
		if err != nil || len(pending) != 3 {
			t.Fatalf("PendingOutbox = %+v, %v", pending, err)
		}
		if p := pending[0]; p.ScheduleRunID != run || p.FilePath != "" || p.FileURL != "" || p.Photo {
			t.Errorf("reminder = %+v", p)
		}
		if p := pending[1]; p.FilePath != "/work/chart.png" || !p.Photo || p.Text != "the chart" || p.ScheduleRunID != 0 {
			t.Errorf("photo = %+v", p)
		}
		if p := pending[2]; p.FileURL != "https://example.com/a.pdf" || p.Photo || p.FilePath != "" {
			t.Errorf("document = %+v", p)
		}
		if n, err := s.ScheduleDeliveries(ctx, run); err != nil || n != 1 {
			t.Errorf("ScheduleDeliveries while waiting = %d, %v; want 1", n, err)
		}
		if err := s.DeliverOutbox(ctx, pending[0], "501"); err != nil {
			t.Fatal(err)
		}
		if n, err := s.ScheduleDeliveries(ctx, run); err != nil || n != 1 {
			t.Errorf("ScheduleDeliveries after the late delivery = %d, %v; want 1", n, err)
		}
		var msgID string
		if err := s.db.QueryRowContext(ctx, `SELECT platform_msg_id FROM schedule_deliveries WHERE run_id = ?`, run).Scan(&msgID); err != nil || msgID != "501" {
			t.Errorf("the run's delivery record: %q, %v; want 501", msgID, err)
		}
	})
}
