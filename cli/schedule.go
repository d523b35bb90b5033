package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/switchboard-gateway/switchboard/schedule"
	"github.com/switchboard-gateway/switchboard/store"
)

// scheduleCommand lists scheduled jobs or cancels one. It works on the
// database directly, so it also works while the service runs: a cancelled
// job is skipped when its time comes.
func scheduleCommand(ctx context.Context, c *adminRun, args []string) error {
	st, out := c.st, c.out
	switch {
	case args[0] == "list" && len(args) == 1:
		jobs, err := st.Schedules(ctx, store.ScheduleFilter{})
		if err != nil {
			return err
		}
		finished := 0
		for _, sc := range jobs {
			if sc.State != store.ScheduleActive && sc.State != store.ScheduleDisabled {
				finished++
				continue
			}
			who := "from the configuration"
			if sc.Origin == store.OriginChat {
				who = "for user " + sc.OwnerID
			}
			fmt.Fprintf(out, "%s\n    in %s chat %s, %s\n", schedule.Describe(sc), sc.Channel, sc.ChatKey, who)
			runs, err := st.ScheduleRuns(ctx, sc.ID, listRuns)
			if err != nil {
				return err
			}
			writeRuns(out, runs)
		}
		switch {
		case len(jobs) == finished && finished == 0:
			fmt.Fprintln(out, "no scheduled jobs")
		case len(jobs) == finished:
			fmt.Fprintf(out, "no active jobs (%d finished or cancelled)\n", finished)
		case finished > 0:
			fmt.Fprintf(out, "(and %d finished or cancelled)\n", finished)
		}
		return nil
	case args[0] == "cancel" && len(args) == 2:
		id, err := strconv.ParseInt(strings.TrimPrefix(args[1], "#"), 10, 64)
		if err != nil {
			return usageError{fmt.Sprintf("%q is not a job id; see `switchboard schedule list`", args[1])}
		}
		sc, err := st.CancelSchedule(ctx, id, store.ScheduleFilter{})
		switch {
		case errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("no job #%d; see `switchboard schedule list`", id)
		case errors.Is(err, store.ErrScheduleInactive):
			return fmt.Errorf("job #%d is already finished or cancelled", id)
		case err != nil:
			return err
		}
		fmt.Fprintf(out, "cancelled #%d %s %q\n", sc.ID, sc.Kind, sc.Name)
		if sc.Origin == store.OriginConfig {
			fmt.Fprintln(out, "it is in the configuration: it stays cancelled until its definition there changes; remove it there to keep things tidy")
		}
		return nil
	}
	return errUsage
}

// listRuns is how many of a job's last runs `schedule list` shows: enough
// to see a missed or failed run next to the one that followed it.
const listRuns = 3

// writeRuns lists a job's last runs, newest first: when each was
// scheduled for, its outcome and, for one that did not run as planned,
// why (a missed record stands for the times it counts).
func writeRuns(out io.Writer, runs []store.ScheduleRun) {
	if len(runs) == 0 {
		return
	}
	fmt.Fprintln(out, "    last runs, newest first:")
	for _, r := range runs {
		fmt.Fprintf(out, "      %s  %s", r.ScheduledFor.UTC().Format("2006-01-02 15:04 UTC"), r.Outcome)
		if r.Error != "" && r.Outcome != store.RunOK {
			fmt.Fprintf(out, ": %s", r.Error)
		}
		fmt.Fprintln(out)
	}
}
