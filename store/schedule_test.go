package store

import (
	"errors"
	"testing"
	"time"
)

func newJob(name string, next time.Time) Schedule {
	return Schedule{Name: name, Origin: OriginChat, Spec: "0 9 * * *", Timezone: "UTC", Kind: "reminder",
		Body: "stretch", Channel: "telegram", ChatKey: "42", ChatType: "dm", OwnerID: "u1", NextRunAt: &next}
}

func TestScheduleLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, _ := db.openTest(t)
		ctx := t.Context()
		nine := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
		sc, err := s.CreateSchedule(ctx, newJob("stretch", nine))
		if err != nil {
			t.Fatal(err)
		}
		if sc.ID == 0 || sc.State != ScheduleActive || sc.NextRunAt == nil || !sc.NextRunAt.Equal(nine) {
			t.Fatalf("created = %+v", sc)
		}
		if _, err := s.CreateSchedule(ctx, Schedule{Name: "x"}); err == nil {
			t.Error("CreateSchedule accepted a job without spec and chat")
		}

		// Not due before nine; due at nine.
		if due, _ := s.DueSchedules(ctx, nine.Add(-time.Second)); len(due) != 0 {
			t.Errorf("due before its time: %+v", due)
		}
		if next, ok, err := s.NextScheduleRun(ctx); err != nil || !ok || !next.Equal(nine) {
			t.Errorf("NextScheduleRun = %s, %v, %v", next, ok, err)
		}
		due, err := s.DueSchedules(ctx, nine)
		if err != nil || len(due) != 1 || due[0].ID != sc.ID {
			t.Fatalf("DueSchedules = %+v, %v", due, err)
		}

		// Claiming advances the job and records a running run, once.
		tomorrow := nine.Add(24 * time.Hour)
		ids, err := s.AdvanceSchedule(ctx, sc.ID, nine, tomorrow, []NewScheduleRun{{ScheduledFor: nine, Outcome: RunRunning}})
		if err != nil || len(ids) != 1 {
			t.Fatalf("AdvanceSchedule = %v, %v", ids, err)
		}
		if _, err := s.AdvanceSchedule(ctx, sc.ID, nine, tomorrow, []NewScheduleRun{{ScheduledFor: nine, Outcome: RunRunning}}); !errors.Is(err, ErrScheduleChanged) {
			t.Errorf("second claim of the same run: err = %v, want ErrScheduleChanged", err)
		}
		running, _ := s.RunningScheduleRuns(ctx)
		if len(running) != 1 || running[0].ID != ids[0] || !running[0].ScheduledFor.Equal(nine) {
			t.Errorf("RunningScheduleRuns = %+v", running)
		}

		// Deliveries count per run; a confirmed platform id counts once.
		for range 2 {
			if err := s.RecordScheduleDelivery(ctx, ids[0], 0, "m1"); err != nil {
				t.Fatal(err)
			}
		}
		if n, _ := s.ScheduleDeliveries(ctx, ids[0]); n != 1 {
			t.Errorf("deliveries = %d, want 1", n)
		}
		if err := s.RecordScheduleDelivery(ctx, 999, 0, "m1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("delivery for an unknown run: %v, want ErrNotFound", err)
		}

		clk.Advance(time.Minute)
		got, disabled, err := s.FinishScheduleRun(ctx, ids[0], ScheduleRunEnd{Outcome: RunOK}, 3)
		if err != nil || disabled || got.State != ScheduleActive || !got.NextRunAt.Equal(tomorrow) {
			t.Fatalf("FinishScheduleRun = %+v, %v, %v", got, disabled, err)
		}
		if _, _, err := s.FinishScheduleRun(ctx, ids[0], ScheduleRunEnd{Outcome: RunOK}, 3); !errors.Is(err, ErrNotFound) {
			t.Errorf("finishing a finished run: %v, want ErrNotFound", err)
		}
		runs, _ := s.ScheduleRuns(ctx, sc.ID, 0)
		if len(runs) != 1 || runs[0].Outcome != RunOK || runs[0].FinishedAt == nil {
			t.Errorf("runs = %+v", runs)
		}
	})
}

func TestScheduleDisabledAfterFailures(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
		sc, err := s.CreateSchedule(ctx, newJob("flaky", at))
		if err != nil {
			t.Fatal(err)
		}
		fire := func(outcome string) (Schedule, bool) {
			t.Helper()
			ids, err := s.AdvanceSchedule(ctx, sc.ID, at, at.Add(time.Hour), []NewScheduleRun{{ScheduledFor: at, Outcome: RunRunning}})
			if err != nil {
				t.Fatal(err)
			}
			at = at.Add(time.Hour)
			got, disabled, err := s.FinishScheduleRun(ctx, ids[0], ScheduleRunEnd{Outcome: outcome, Error: "boom"}, 3)
			if err != nil {
				t.Fatal(err)
			}
			return got, disabled
		}
		fire(RunFailed)
		fire(RunFailed)
		if got, _ := fire(RunOK); got.Failures != 0 {
			t.Errorf("a success left failures = %d, want 0", got.Failures)
		}
		fire(RunFailed)
		fire(RunFailed)
		got, disabled := fire(RunFailed)
		if !disabled || got.State != ScheduleDisabled || got.NextRunAt != nil || got.Failures != 3 {
			t.Fatalf("after 3 failures in a row: disabled=%v job=%+v", disabled, got)
		}
		if got.LastError != "disabled after 3 failed runs in a row; last: boom" {
			t.Errorf("last error = %q", got.LastError)
		}
		if due, _ := s.DueSchedules(ctx, at.Add(48*time.Hour)); len(due) != 0 {
			t.Errorf("a disabled job is due: %+v", due)
		}
	})
}

func TestScheduleCancelScopedAndOneShotDone(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		at := time.Date(2026, 12, 24, 9, 0, 0, 0, time.UTC)
		sc, err := s.CreateSchedule(ctx, newJob("gift", at))
		if err != nil {
			t.Fatal(err)
		}
		// Somebody else, or the same user in another chat, cannot cancel it.
		for _, f := range []ScheduleFilter{{Channel: "telegram", ChatKey: "42", OwnerID: "u2"}, {Channel: "telegram", ChatKey: "43", OwnerID: "u1"}} {
			if _, err := s.CancelSchedule(ctx, sc.ID, f); !errors.Is(err, ErrNotFound) {
				t.Errorf("cancel with %+v: %v, want ErrNotFound", f, err)
			}
		}
		mine := ScheduleFilter{Channel: "telegram", ChatKey: "42", OwnerID: "u1"}
		if list, _ := s.Schedules(ctx, mine); len(list) != 1 {
			t.Errorf("Schedules(mine) = %d jobs, want 1", len(list))
		}
		// A one-shot claimed with no next run is done.
		if _, err := s.AdvanceSchedule(ctx, sc.ID, at, time.Time{}, []NewScheduleRun{{ScheduledFor: at, Outcome: RunRunning}}); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Schedule(ctx, sc.ID)
		if got.State != ScheduleDone || got.NextRunAt != nil {
			t.Errorf("one-shot after its run: %+v", got)
		}
		if _, err := s.CancelSchedule(ctx, sc.ID, mine); !errors.Is(err, ErrScheduleInactive) {
			t.Errorf("cancel a done job: %v, want ErrScheduleInactive", err)
		}

		other, _ := s.CreateSchedule(ctx, newJob("daily", at))
		if got, err := s.CancelSchedule(ctx, other.ID, mine); err != nil || got.State != ScheduleCancelled {
			t.Errorf("cancel own job: %+v, %v", got, err)
		}
		if active, _ := s.Schedules(ctx, ScheduleFilter{States: []string{ScheduleActive}}); len(active) != 0 {
			t.Errorf("active jobs after cancelling: %+v", active)
		}
		if _, err := s.Schedule(ctx, 999); !errors.Is(err, ErrNotFound) {
			t.Errorf("Schedule(999): %v, want ErrNotFound", err)
		}
	})
}

func TestSyncConfigSchedules(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, path := db.openTest(t)
		ctx := t.Context()
		at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
		def := newJob("digest", at)
		def.Origin, def.OwnerID, def.ConfigHash = OriginConfig, "", "h1"

		first, changed, err := s.SyncConfigSchedule(ctx, def)
		if err != nil || !changed || first.Origin != OriginConfig {
			t.Fatalf("first sync = %+v, %v, %v", first, changed, err)
		}
		// Unchanged: untouched, even if cancelled meanwhile.
		if _, err := s.CancelSchedule(ctx, first.ID, ScheduleFilter{}); err != nil {
			t.Fatal(err)
		}
		again, changed, err := s.SyncConfigSchedule(ctx, def)
		if err != nil || changed || again.ID != first.ID || again.State != ScheduleCancelled {
			t.Errorf("unchanged sync = %+v, %v, %v", again, changed, err)
		}
		// A changed definition is active again.
		def.ConfigHash, def.Body = "h2", "new text"
		later := at.Add(time.Hour)
		def.NextRunAt = &later
		re, changed, err := s.SyncConfigSchedule(ctx, def)
		if err != nil || !changed || re.ID != first.ID || re.State != ScheduleActive || re.Body != "new text" || !re.NextRunAt.Equal(later) {
			t.Errorf("redefined = %+v, %v, %v", re, changed, err)
		}
		// Removed from the config: cancelled; jobs made in chats are not touched.
		chatJob, _ := s.CreateSchedule(ctx, newJob("digest", at))
		retired, err := s.RetireConfigSchedules(ctx, []string{"other"})
		if err != nil || len(retired) != 1 || retired[0].ID != first.ID {
			t.Fatalf("retired = %+v, %v", retired, err)
		}
		if got, _ := s.Schedule(ctx, chatJob.ID); got.State != ScheduleActive {
			t.Errorf("a chat job named like a config job was retired: %+v", got)
		}

		// Everything survives reopening the file.
		s.Close()
		s2 := db.openAt(t, path, newClock())
		got, err := s2.Schedule(ctx, first.ID)
		if err != nil || got.State != ScheduleCancelled || got.LastError != "removed from the configuration" {
			t.Errorf("after reopen: %+v, %v", got, err)
		}
	})
}
