package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// migration4 holds scheduled jobs, every fire of them, and the messages each
// fire delivered. A job is "active" exactly when it has a next_run_at.
const migration4 = `
CREATE TABLE schedules (
	id          INTEGER PRIMARY KEY,
	name        TEXT    NOT NULL,
	origin      TEXT    NOT NULL CHECK (origin IN ('config', 'chat')),
	config_hash TEXT    NOT NULL DEFAULT '',
	spec        TEXT    NOT NULL,
	timezone    TEXT    NOT NULL,
	kind        TEXT    NOT NULL CHECK (kind IN ('reminder', 'task')),
	body        TEXT    NOT NULL,
	max_steps   INTEGER NOT NULL DEFAULT 0,
	channel     TEXT    NOT NULL,
	chat_key    TEXT    NOT NULL,
	chat_type   TEXT    NOT NULL DEFAULT '',
	owner_id    TEXT    NOT NULL DEFAULT '',
	state       TEXT    NOT NULL CHECK (state IN ('active', 'done', 'cancelled', 'disabled')),
	next_run_at INTEGER,
	failures    INTEGER NOT NULL DEFAULT 0,
	last_error  TEXT    NOT NULL DEFAULT '',
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,
	CHECK ((state = 'active') = (next_run_at IS NOT NULL))
);
-- Jobs from the configuration are identified by name.
CREATE UNIQUE INDEX schedules_config ON schedules (name) WHERE origin = 'config';
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE state = 'active';
CREATE INDEX schedules_chat ON schedules (channel, chat_key, owner_id);

-- missed: how many scheduled times a 'missed' record stands for.
CREATE TABLE schedule_runs (
	id            INTEGER PRIMARY KEY,
	schedule_id   INTEGER NOT NULL REFERENCES schedules (id),
	scheduled_for INTEGER NOT NULL,
	started_at    INTEGER NOT NULL,
	finished_at   INTEGER,
	outcome       TEXT    NOT NULL CHECK (outcome IN ('running', 'ok', 'failed', 'missed', 'skipped', 'interrupted')),
	missed        INTEGER NOT NULL DEFAULT 0,
	turn_id       INTEGER REFERENCES turns (id),
	error         TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX schedule_runs_schedule ON schedule_runs (schedule_id, id);
CREATE INDEX schedule_runs_running ON schedule_runs (id) WHERE outcome = 'running';

CREATE TABLE schedule_deliveries (
	id              INTEGER PRIMARY KEY,
	run_id          INTEGER NOT NULL REFERENCES schedule_runs (id),
	turn_id         INTEGER REFERENCES turns (id),
	platform_msg_id TEXT    NOT NULL DEFAULT '',
	delivered_at    INTEGER NOT NULL
);
CREATE INDEX schedule_deliveries_run ON schedule_deliveries (run_id);
CREATE UNIQUE INDEX schedule_deliveries_platform ON schedule_deliveries (run_id, platform_msg_id) WHERE platform_msg_id <> '';
`

// Schedule states.
const (
	ScheduleActive    = "active"    // has a next run
	ScheduleDone      = "done"      // a one-shot job that ran (or whose time passed)
	ScheduleCancelled = "cancelled" // cancelled by its owner or the operator, or removed from the config
	ScheduleDisabled  = "disabled"  // turned off after repeated failures
)

// Schedule origins.
const (
	OriginConfig = "config"
	OriginChat   = "chat"
)

// Run outcomes.
const (
	RunRunning     = "running"
	RunOK          = "ok"
	RunFailed      = "failed"
	RunMissed      = "missed"      // not run: the service was down (or too late) at the time
	RunSkipped     = "skipped"     // not run: the previous run was still going
	RunInterrupted = "interrupted" // stopped by a shutdown and not resumed
)

// ErrScheduleChanged is matched (errors.Is) when a job was advanced,
// cancelled or disabled by someone else since it was read.
var ErrScheduleChanged = errors.New("store: schedule changed meanwhile")

// ErrScheduleInactive is matched (errors.Is) when cancelling a job that is
// already done, cancelled or disabled.
var ErrScheduleInactive = errors.New("store: schedule is not active")

// Schedule is a scheduled job.
type Schedule struct {
	ID         int64
	Name       string
	Origin     string // OriginConfig or OriginChat
	ConfigHash string // for config jobs: the definition's fingerprint
	Spec       string
	Timezone   string // IANA zone the spec is read in
	Kind       string // "reminder" or "task"
	Body       string // the reminder's text or the task's prompt
	MaxSteps   int    // tasks: 0 means the agent's default
	Channel    string
	ChatKey    string
	ChatType   string
	OwnerID    string // the user who created it; empty for config jobs
	State      string
	NextRunAt  *time.Time // nil unless active
	Failures   int        // consecutive failed runs
	LastError  string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// Untrusted: created in a turn that had untrusted content in it (a
	// fetched page, a file…), so its text may be someone else's: a task
	// runs with it labelled as data, not as the owner's instruction.
	Untrusted bool
}

// ScheduleFilter selects jobs; empty fields match everything.
type ScheduleFilter struct {
	Channel, ChatKey, OwnerID, Origin string
	States                            []string
}

// ScheduleRun is one fire of a job, or a record of fires that did not happen.
type ScheduleRun struct {
	ID, ScheduleID int64
	ScheduledFor   time.Time
	StartedAt      time.Time
	FinishedAt     *time.Time
	Outcome        string
	Missed         int // for RunMissed: the scheduled times it stands for
	TurnID         int64
	Error          string
}

// NewScheduleRun is a run recorded by AdvanceSchedule.
type NewScheduleRun struct {
	ScheduledFor time.Time
	Outcome      string // RunRunning, or a final outcome (RunMissed, RunSkipped)
	Missed       int
	Error        string
}

// ScheduleRunEnd is how a running run ended.
type ScheduleRunEnd struct {
	Outcome string // RunOK, RunFailed or RunInterrupted
	Error   string
	TurnID  int64 // 0 when no turn ran
}

const (
	sqlScheduleCols = `id, name, origin, config_hash, spec, timezone, kind, body, max_steps, channel, chat_key, chat_type,
		owner_id, state, next_run_at, failures, last_error, created_at, updated_at, untrusted`
	sqlInsertSchedule = `INSERT INTO schedules (name, origin, config_hash, spec, timezone, kind, body, max_steps, channel,
		chat_key, chat_type, owner_id, state, next_run_at, created_at, updated_at, untrusted)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlScheduleByID     = `SELECT ` + sqlScheduleCols + ` FROM schedules WHERE id = ?`
	sqlConfigSchedule   = `SELECT ` + sqlScheduleCols + ` FROM schedules WHERE origin = 'config' AND name = ?`
	sqlConfigSchedules  = `SELECT ` + sqlScheduleCols + ` FROM schedules WHERE origin = 'config' AND state IN ('active', 'disabled')`
	sqlSchedulesAll     = `SELECT ` + sqlScheduleCols + ` FROM schedules ORDER BY id`
	sqlDueSchedules     = `SELECT ` + sqlScheduleCols + ` FROM schedules WHERE state = 'active' AND next_run_at <= ? ORDER BY next_run_at, id`
	sqlNextScheduleRun  = `SELECT MIN(next_run_at) FROM schedules WHERE state = 'active'`
	sqlRedefineSchedule = `UPDATE schedules SET config_hash = ?, spec = ?, timezone = ?, kind = ?, body = ?, max_steps = ?,
		channel = ?, chat_key = ?, chat_type = ?, state = ?, next_run_at = ?, failures = 0, last_error = '', updated_at = ?
		WHERE id = ?`
	sqlEndSchedule = `UPDATE schedules SET state = ?, next_run_at = NULL, last_error = CASE WHEN ? <> '' THEN ? ELSE last_error END,
		updated_at = ? WHERE id = ?`
	sqlAdvanceSchedule = `UPDATE schedules SET next_run_at = ?, state = CASE WHEN CAST(? AS BIGINT) IS NULL THEN 'done' ELSE 'active' END, updated_at = ?
		WHERE id = ? AND state = 'active' AND next_run_at = ?`
	sqlScheduleFailed = `UPDATE schedules SET failures = failures + 1, last_error = ?, updated_at = ? WHERE id = ?
		RETURNING failures, state`
	sqlScheduleSucceeded = `UPDATE schedules SET failures = 0, updated_at = ? WHERE id = ?`

	sqlRunCols      = `id, schedule_id, scheduled_for, started_at, finished_at, outcome, missed, COALESCE(turn_id, 0), error`
	sqlInsertRun    = `INSERT INTO schedule_runs (schedule_id, scheduled_for, started_at, finished_at, outcome, missed, error) VALUES (?, ?, ?, ?, ?, ?, ?)`
	sqlFinishRun    = `UPDATE schedule_runs SET outcome = ?, error = ?, turn_id = ?, finished_at = ? WHERE id = ? AND outcome = 'running' RETURNING schedule_id`
	sqlRunningRuns  = `SELECT ` + sqlRunCols + ` FROM schedule_runs WHERE outcome = 'running' ORDER BY id`
	sqlRunsOf       = `SELECT ` + sqlRunCols + ` FROM schedule_runs WHERE schedule_id = ? ORDER BY id DESC LIMIT ?`
	sqlInsertSchDel = `INSERT INTO schedule_deliveries (run_id, turn_id, platform_msg_id, delivered_at) VALUES (?, ?, ?, ?)
		ON CONFLICT DO NOTHING`
	sqlCountSchDel = `SELECT (SELECT COUNT(*) FROM schedule_deliveries WHERE run_id = ?)
		+ (SELECT COUNT(*) FROM outbox WHERE schedule_run_id = ? AND status = 'pending')`
)

func scanSchedule(r rowScanner) (Schedule, error) {
	var sc Schedule
	var next sql.NullInt64
	var created, updated int64
	if err := r.Scan(&sc.ID, &sc.Name, &sc.Origin, &sc.ConfigHash, &sc.Spec, &sc.Timezone, &sc.Kind, &sc.Body,
		&sc.MaxSteps, &sc.Channel, &sc.ChatKey, &sc.ChatType, &sc.OwnerID, &sc.State, &next, &sc.Failures,
		&sc.LastError, &created, &updated, &sc.Untrusted); err != nil {
		return Schedule{}, err
	}
	sc.NextRunAt = fromNullMS(next)
	sc.CreatedAt, sc.UpdatedAt = fromMS(created), fromMS(updated)
	return sc, nil
}

func scanRun(r rowScanner) (ScheduleRun, error) {
	var run ScheduleRun
	var scheduled, started int64
	var finished sql.NullInt64
	if err := r.Scan(&run.ID, &run.ScheduleID, &scheduled, &started, &finished, &run.Outcome, &run.Missed,
		&run.TurnID, &run.Error); err != nil {
		return ScheduleRun{}, err
	}
	run.ScheduledFor, run.StartedAt, run.FinishedAt = fromMS(scheduled), fromMS(started), fromNullMS(finished)
	return run, nil
}

// nullTime stores nil or the zero time as NULL.
func nullTime(t *time.Time) sql.NullInt64 {
	if t == nil || t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

// stateFor is the state of a job with the given next run.
func stateFor(next *time.Time) string {
	if next == nil || next.IsZero() {
		return ScheduleDone
	}
	return ScheduleActive
}

func checkSchedule(sc Schedule) error {
	switch {
	case sc.Name == "" || sc.Spec == "" || sc.Timezone == "" || sc.Body == "":
		return errors.New("name, spec, timezone and body are required")
	case sc.Channel == "" || sc.ChatKey == "":
		return errors.New("channel and chat key are required")
	case sc.Kind != "reminder" && sc.Kind != "task":
		return fmt.Errorf("kind %q is neither reminder nor task", sc.Kind)
	case sc.Origin != OriginConfig && sc.Origin != OriginChat:
		return fmt.Errorf("origin %q is neither config nor chat", sc.Origin)
	}
	return nil
}

// CreateSchedule stores a new job and returns it with its id. It is active
// when NextRunAt is set, else done (a one-shot time already past).
func (s *Store) CreateSchedule(ctx context.Context, sc Schedule) (Schedule, error) {
	if err := checkSchedule(sc); err != nil {
		return Schedule{}, fmt.Errorf("store: create schedule %q: %w", sc.Name, err)
	}
	var out Schedule
	err := s.inTx(ctx, func(tx conn) error {
		var err error
		out, err = insertSchedule(ctx, tx, sc, s.nowMS())
		return err
	})
	if err != nil {
		return Schedule{}, fmt.Errorf("store: create schedule %q: %w", sc.Name, err)
	}
	return out, nil
}

func insertSchedule(ctx context.Context, tx conn, sc Schedule, now int64) (Schedule, error) {
	id, err := tx.insertID(ctx, sqlInsertSchedule, sc.Name, sc.Origin, sc.ConfigHash, sc.Spec, sc.Timezone, sc.Kind,
		sc.Body, sc.MaxSteps, sc.Channel, sc.ChatKey, sc.ChatType, sc.OwnerID, stateFor(sc.NextRunAt), nullTime(sc.NextRunAt), now, now,
		boolInt(sc.Untrusted))
	if err != nil {
		return Schedule{}, err
	}
	return scanSchedule(tx.QueryRowContext(ctx, sqlScheduleByID, id))
}

// SyncConfigSchedule makes the config job named sc.Name match sc. A new name
// is inserted; a job whose ConfigHash differs is redefined, made active
// again with sc.NextRunAt and its failure count reset; an unchanged job is
// left as it is (a job the operator cancelled or that was disabled stays so
// until its definition changes). changed reports an insert or a redefinition.
func (s *Store) SyncConfigSchedule(ctx context.Context, sc Schedule) (out Schedule, changed bool, err error) {
	sc.Origin = OriginConfig
	if err := checkSchedule(sc); err != nil {
		return Schedule{}, false, fmt.Errorf("store: sync schedule %q: %w", sc.Name, err)
	}
	err = s.inTx(ctx, func(tx conn) error {
		changed = false
		now := s.nowMS()
		cur, err := scanSchedule(tx.QueryRowContext(ctx, sqlConfigSchedule, sc.Name))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			changed = true
			out, err = insertSchedule(ctx, tx, sc, now)
			return err
		case err != nil:
			return err
		case cur.ConfigHash == sc.ConfigHash:
			out = cur
			return nil
		}
		changed = true
		if _, err := tx.ExecContext(ctx, sqlRedefineSchedule, sc.ConfigHash, sc.Spec, sc.Timezone, sc.Kind, sc.Body,
			sc.MaxSteps, sc.Channel, sc.ChatKey, sc.ChatType, stateFor(sc.NextRunAt), nullTime(sc.NextRunAt), now, cur.ID); err != nil {
			return err
		}
		out, err = scanSchedule(tx.QueryRowContext(ctx, sqlScheduleByID, cur.ID))
		return err
	})
	if err != nil {
		return Schedule{}, false, fmt.Errorf("store: sync schedule %q: %w", sc.Name, err)
	}
	return out, changed, nil
}

// RetireConfigSchedules cancels the active or disabled config jobs whose
// names are not in keep (they were removed from the configuration) and
// returns them.
func (s *Store) RetireConfigSchedules(ctx context.Context, keep []string) ([]Schedule, error) {
	var retired []Schedule
	err := s.inTx(ctx, func(tx conn) error {
		retired = nil
		rows, err := tx.QueryContext(ctx, sqlConfigSchedules)
		if err != nil {
			return err
		}
		var all []Schedule
		for rows.Next() {
			sc, err := scanSchedule(rows)
			if err != nil {
				rows.Close()
				return err
			}
			all = append(all, sc)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		const why = "removed from the configuration"
		for _, sc := range all {
			if slices.Contains(keep, sc.Name) {
				continue
			}
			if _, err := tx.ExecContext(ctx, sqlEndSchedule, ScheduleCancelled, why, why, s.nowMS(), sc.ID); err != nil {
				return err
			}
			sc.State, sc.NextRunAt, sc.LastError = ScheduleCancelled, nil, why
			retired = append(retired, sc)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: retire config schedules: %w", err)
	}
	return retired, nil
}

// Schedule returns the job with the id, or an error matching ErrNotFound.
func (s *Store) Schedule(ctx context.Context, id int64) (Schedule, error) {
	sc, err := scanSchedule(s.db.QueryRowContext(ctx, sqlScheduleByID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Schedule{}, fmt.Errorf("store: schedule %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Schedule{}, fmt.Errorf("store: schedule %d: %w", id, err)
	}
	return sc, nil
}

// matches applies the filter.
func (f ScheduleFilter) matches(sc Schedule) bool {
	return (f.Channel == "" || f.Channel == sc.Channel) && (f.ChatKey == "" || f.ChatKey == sc.ChatKey) &&
		(f.OwnerID == "" || f.OwnerID == sc.OwnerID) && (f.Origin == "" || f.Origin == sc.Origin) &&
		(len(f.States) == 0 || slices.Contains(f.States, sc.State))
}

// Schedules returns the jobs matching f, oldest first. The table is small
// (jobs, not runs), so it is filtered here rather than in SQL.
func (s *Store) Schedules(ctx context.Context, f ScheduleFilter) ([]Schedule, error) {
	rows, err := s.db.QueryContext(ctx, sqlSchedulesAll)
	if err != nil {
		return nil, fmt.Errorf("store: schedules: %w", err)
	}
	defer rows.Close()
	var out []Schedule
	for rows.Next() {
		sc, err := scanSchedule(rows)
		if err != nil {
			return nil, fmt.Errorf("store: schedules: %w", err)
		}
		if f.matches(sc) {
			out = append(out, sc)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: schedules: %w", err)
	}
	return out, nil
}

// CancelSchedule cancels an active or disabled job that matches f (so a user
// can only cancel their own jobs). A job that does not exist or does not
// match is ErrNotFound; one already finished is ErrScheduleInactive.
func (s *Store) CancelSchedule(ctx context.Context, id int64, f ScheduleFilter) (Schedule, error) {
	var sc Schedule
	err := s.inTx(ctx, func(tx conn) error {
		var err error
		sc, err = scanSchedule(tx.QueryRowContext(ctx, sqlScheduleByID, id))
		if errors.Is(err, sql.ErrNoRows) || (err == nil && !f.matches(sc)) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if sc.State != ScheduleActive && sc.State != ScheduleDisabled {
			return ErrScheduleInactive
		}
		if _, err := tx.ExecContext(ctx, sqlEndSchedule, ScheduleCancelled, "", "", s.nowMS(), id); err != nil {
			return err
		}
		sc.State, sc.NextRunAt = ScheduleCancelled, nil
		return nil
	})
	if err != nil {
		return Schedule{}, fmt.Errorf("store: cancel schedule %d: %w", id, err)
	}
	return sc, nil
}

// DueSchedules returns the active jobs whose next run is at or before now,
// earliest first.
func (s *Store) DueSchedules(ctx context.Context, now time.Time) ([]Schedule, error) {
	rows, err := s.db.QueryContext(ctx, sqlDueSchedules, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("store: due schedules: %w", err)
	}
	defer rows.Close()
	var out []Schedule
	for rows.Next() {
		sc, err := scanSchedule(rows)
		if err != nil {
			return nil, fmt.Errorf("store: due schedules: %w", err)
		}
		out = append(out, sc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: due schedules: %w", err)
	}
	return out, nil
}

// NextScheduleRun returns the earliest next run of any active job; ok is
// false when no job is active.
func (s *Store) NextScheduleRun(ctx context.Context) (next time.Time, ok bool, err error) {
	var ms sql.NullInt64
	if err := s.db.QueryRowContext(ctx, sqlNextScheduleRun).Scan(&ms); err != nil {
		return time.Time{}, false, fmt.Errorf("store: next schedule run: %w", err)
	}
	if !ms.Valid {
		return time.Time{}, false, nil
	}
	return fromMS(ms.Int64), true, nil
}

// AdvanceSchedule moves an active job whose next run is still expect to next
// (the zero time: no more runs, the job is done) and records runs, in one
// transaction, returning the runs' ids. This is how a fire is claimed: if
// the job changed meanwhile (cancelled, or claimed already) it fails with
// ErrScheduleChanged and records nothing.
func (s *Store) AdvanceSchedule(ctx context.Context, id int64, expect, next time.Time, runs []NewScheduleRun) ([]int64, error) {
	ids := make([]int64, 0, len(runs))
	err := s.inTx(ctx, func(tx conn) error {
		ids = ids[:0]
		now := s.nowMS()
		n := nullTime(&next)
		res, err := tx.ExecContext(ctx, sqlAdvanceSchedule, n, n, now, id, expect.UnixMilli())
		if err != nil {
			return err
		}
		if k, err := res.RowsAffected(); err != nil {
			return err
		} else if k == 0 {
			return ErrScheduleChanged
		}
		for _, r := range runs {
			var finished sql.NullInt64
			if r.Outcome != RunRunning {
				finished = sql.NullInt64{Int64: now, Valid: true}
			}
			rid, err := tx.insertID(ctx, sqlInsertRun, id, r.ScheduledFor.UnixMilli(), now, finished, r.Outcome, r.Missed, r.Error)
			if err != nil {
				return err
			}
			ids = append(ids, rid)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: advance schedule %d: %w", id, err)
	}
	return ids, nil
}

// FinishScheduleRun records how a running run ended and keeps the job's
// count of consecutive failures: a failure adds one, success resets it. When
// a failure brings the count to maxFailures (> 0) and the job is active, it
// is disabled and disabled is true. It returns the job as it is afterwards.
func (s *Store) FinishScheduleRun(ctx context.Context, runID int64, end ScheduleRunEnd, maxFailures int) (sc Schedule, disabled bool, err error) {
	switch end.Outcome {
	case RunOK, RunFailed, RunInterrupted:
	default:
		return Schedule{}, false, fmt.Errorf("store: finish schedule run %d: invalid outcome %q", runID, end.Outcome)
	}
	err = s.inTx(ctx, func(tx conn) error {
		disabled = false
		now := s.nowMS()
		var jobID int64
		err := tx.QueryRowContext(ctx, sqlFinishRun, end.Outcome, end.Error, nullID(end.TurnID), now, runID).Scan(&jobID)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("run %d is not running: %w", runID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		switch end.Outcome {
		case RunOK:
			if _, err := tx.ExecContext(ctx, sqlScheduleSucceeded, now, jobID); err != nil {
				return err
			}
		case RunFailed:
			var failures int
			var state string
			if err := tx.QueryRowContext(ctx, sqlScheduleFailed, end.Error, now, jobID).Scan(&failures, &state); err != nil {
				return err
			}
			if maxFailures > 0 && failures >= maxFailures && state == ScheduleActive {
				why := fmt.Sprintf("disabled after %d failed runs in a row; last: %s", failures, end.Error)
				if _, err := tx.ExecContext(ctx, sqlEndSchedule, ScheduleDisabled, why, why, now, jobID); err != nil {
					return err
				}
				disabled = true
			}
		}
		sc, err = scanSchedule(tx.QueryRowContext(ctx, sqlScheduleByID, jobID))
		return err
	})
	if err != nil {
		return Schedule{}, false, fmt.Errorf("store: finish schedule run %d: %w", runID, err)
	}
	return sc, disabled, nil
}

// RunningScheduleRuns returns the runs still marked running, oldest first:
// at startup, the runs a crash or shutdown interrupted.
func (s *Store) RunningScheduleRuns(ctx context.Context) ([]ScheduleRun, error) {
	runs, err := s.queryRuns(ctx, sqlRunningRuns)
	if err != nil {
		return nil, fmt.Errorf("store: running schedule runs: %w", err)
	}
	return runs, nil
}

// ScheduleRuns returns up to limit runs of the job, newest first; limit <= 0
// means all.
func (s *Store) ScheduleRuns(ctx context.Context, scheduleID int64, limit int) ([]ScheduleRun, error) {
	runs, err := s.queryRuns(ctx, sqlRunsOf, scheduleID, s.d.limit(limit))
	if err != nil {
		return nil, fmt.Errorf("store: runs of schedule %d: %w", scheduleID, err)
	}
	return runs, nil
}

func (s *Store) queryRuns(ctx context.Context, query string, args ...any) ([]ScheduleRun, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ScheduleRun
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// RecordScheduleDelivery records a message the platform confirmed for a run.
// turnID may be 0. The same non-empty platformMsgID recorded twice counts once.
func (s *Store) RecordScheduleDelivery(ctx context.Context, runID, turnID int64, platformMsgID string) error {
	_, err := s.write(ctx, sqlInsertSchDel, runID, nullID(turnID), platformMsgID, s.nowMS())
	if isForeignKey(err) {
		return fmt.Errorf("store: record delivery for schedule run %d, turn %d: %w", runID, turnID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("store: record delivery for schedule run %d: %w", runID, err)
	}
	return nil
}

// ScheduleDeliveries counts the confirmed messages of a run, and those
// kept in the outbox to be delivered later (a run whose reply waits there
// delivered it: it is not run again).
func (s *Store) ScheduleDeliveries(ctx context.Context, runID int64) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, sqlCountSchDel, runID, runID).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: deliveries of schedule run %d: %w", runID, err)
	}
	return n, nil
}

// migrationScheduleUntrusted marks the jobs created in a turn that had
// untrusted content in it (Schedule.Untrusted).
const migrationScheduleUntrusted = `ALTER TABLE schedules ADD COLUMN untrusted INTEGER NOT NULL DEFAULT 0;`
