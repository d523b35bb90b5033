package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/store"
)

func TestScheduleCommand(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	cfg := storeConfig(t, db, nil)
	st, err := store.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	next := time.Date(2026, 4, 13, 7, 0, 0, 0, time.UTC)
	for _, sc := range []store.Schedule{
		{Name: "standup", Origin: store.OriginConfig, Spec: "0 9 * * MON-FRI", Timezone: "Europe/Berlin", Kind: "reminder",
			Body: "Stand-up!", Channel: "telegram", ChatKey: "42", NextRunAt: &next},
		{Name: "mum", Origin: store.OriginChat, Spec: "at 2026-04-13 09:00", Timezone: "Europe/Berlin", Kind: "reminder",
			Body: "Call mum", Channel: "telegram", ChatKey: "42", OwnerID: "7", NextRunAt: &next},
	} {
		if _, err := st.CreateSchedule(t.Context(), sc); err != nil {
			t.Fatal(err)
		}
	}
	// The standup job missed two mornings and ran on the third.
	later := next.Add(24 * time.Hour)
	ids, err := st.AdvanceSchedule(t.Context(), 1, next, later, []store.NewScheduleRun{
		{ScheduledFor: next.Add(-48 * time.Hour), Outcome: store.RunMissed, Missed: 2,
			Error: "2 scheduled times missed, 48h to 24h ago, while the service was down or busy (only the latest, 5m ago, runs)"},
		{ScheduledFor: next, Outcome: store.RunRunning}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.FinishScheduleRun(t.Context(), ids[1], store.ScheduleRunEnd{Outcome: store.RunOK}, 3); err != nil {
		t.Fatal(err)
	}
	st.Close()
	steps := []struct {
		args     []string
		code     int
		out, err string
	}{
		{[]string{"schedule", "list"}, 0, `#1 reminder "standup": "0 9 * * MON-FRI" (Europe/Berlin), next Tue 14 Apr 2026 09:00 CEST
    in telegram chat 42, from the configuration
    last runs, newest first:
      2026-04-13 07:00 UTC  ok
      2026-04-11 07:00 UTC  missed: 2 scheduled times missed, 48h to 24h ago, while the service was down or busy (only the latest, 5m ago, runs)
#2 reminder "mum": "at 2026-04-13 09:00" (Europe/Berlin), next Mon 13 Apr 2026 09:00 CEST
    in telegram chat 42, for user 7
`, ""},
		{[]string{"schedule", "cancel", "#2"}, 0, `cancelled #2 reminder "mum"`, ""},
		{[]string{"schedule", "cancel", "2"}, 1, "", "job #2 is already finished or cancelled"},
		{[]string{"schedule", "cancel", "9"}, 1, "", "no job #9"},
		{[]string{"schedule", "cancel", "x"}, 2, "", `"x" is not a job id`},
		{[]string{"schedule", "cancel", "1"}, 0, "stays cancelled until its definition there changes", ""},
		{[]string{"schedule", "list"}, 0, "no active jobs (2 finished or cancelled)", ""},
		{[]string{"schedule"}, 2, "", "usage: switchboard schedule list | cancel ID"},
	}
	for _, s := range steps {
		var out, errb bytes.Buffer
		code := run(t.Context(), append(s.args, "--config", cfg), strings.NewReader(""), &out, &errb)
		if code != s.code || !strings.Contains(out.String(), s.out) || !strings.Contains(errb.String(), s.err) {
			t.Fatalf("%v: code %d\nstdout %s\nstderr %s", s.args, code, out.String(), errb.String())
		}
	}
}
