// Package schedule runs scheduled jobs: reminders (a text sent as is) and
// tasks (an agent turn), defined in the configuration or created in
// conversation with the schedule_* tools.
//
// robfig/cron (through package spec) only parses specs and computes next
// times. Every job's next_run_at lives in SQLite and our own loop, on an
// injectable Clock, fires what is due, so schedules survive restarts and
// tests need no sleeps. A fire is claimed in one transaction that advances
// next_run_at and records the run; each run's outcome is recorded when it
// ends, and each message it delivered is recorded as it is confirmed, so a
// restart neither loses nor repeats a run.
//
// Missed runs (the service was down, or the machine asleep): a job found due
// runs once if its latest missed time is at most MissedGrace ago; older
// times are skipped and recorded as one "missed" run. A job whose runs fail
// MaxFailures times in a row is disabled and its owner told in its chat.
package schedule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/schedule/spec"
	"github.com/switchboard-gateway/switchboard/store"
)

// Defaults and bounds.
const (
	// DefaultMissedGrace: an hour late, "remind me at 9" is still useful.
	DefaultMissedGrace = time.Hour
	// DefaultMaxFailures: three in a row is a broken job, not a glitch.
	DefaultMaxFailures = 3
	// lateTolerance: a run this late is never "missed", whatever the grace:
	// a busy machine or a slow database must not cost anyone a reminder.
	lateTolerance = time.Minute
	// maxSleep bounds one wait of the loop, so a jump of the wall clock
	// (NTP, a suspended machine) delays runs by at most this much.
	maxSleep = 5 * time.Minute
	// retryDelay is the wait after the store failed.
	retryDelay = 30 * time.Second
	// maxWalk bounds the missed times counted for one job (an @every 1m job
	// after a month offline); the count then says "at least".
	maxWalk = 10_000
)

// Store is the part of the store the scheduler needs.
type Store interface {
	CreateSchedule(ctx context.Context, sc store.Schedule) (store.Schedule, error)
	SyncConfigSchedule(ctx context.Context, sc store.Schedule) (store.Schedule, bool, error)
	RetireConfigSchedules(ctx context.Context, keep []string) ([]store.Schedule, error)
	Schedule(ctx context.Context, id int64) (store.Schedule, error)
	Schedules(ctx context.Context, f store.ScheduleFilter) ([]store.Schedule, error)
	CancelSchedule(ctx context.Context, id int64, f store.ScheduleFilter) (store.Schedule, error)
	DueSchedules(ctx context.Context, now time.Time) ([]store.Schedule, error)
	NextScheduleRun(ctx context.Context) (time.Time, bool, error)
	AdvanceSchedule(ctx context.Context, id int64, expect, next time.Time, runs []store.NewScheduleRun) ([]int64, error)
	FinishScheduleRun(ctx context.Context, runID int64, end store.ScheduleRunEnd, maxFailures int) (store.Schedule, bool, error)
	RunningScheduleRuns(ctx context.Context) ([]store.ScheduleRun, error)
	RecordScheduleDelivery(ctx context.Context, runID, turnID int64, platformMsgID string) error
	ScheduleDeliveries(ctx context.Context, runID int64) (int, error)
}

// Runner runs a job in its chat (router.Router implements it).
type Runner interface {
	RunJob(ctx context.Context, j router.JobTurn) (agent.Result, error)
}

// Config wires a Scheduler. Zero values take the documented defaults.
type Config struct {
	Store Store
	// Jobs from the configuration, synchronised into the store at Start.
	Jobs []config.ScheduleJob
	// Location is the default zone of jobs (agent.timezone); nil is UTC.
	Location *time.Location
	// ZoneFor returns a user's own zone (their profile), or nil if unknown;
	// it is the default zone of the jobs they create. May be nil.
	ZoneFor     func(userID string) *time.Location
	MissedGrace time.Duration // default DefaultMissedGrace
	MaxFailures int           // default DefaultMaxFailures
	Clock       Clock         // nil: the wall clock
	// OnRun observes every recorded outcome (metrics, tests); may be nil.
	// It is called synchronously; keep it fast.
	OnRun  func(Report)
	Logger *slog.Logger
}

// Report is an outcome the scheduler recorded.
type Report struct {
	Job      store.Schedule // as it is after the outcome
	RunID    int64
	Outcome  string // store.RunOK, RunFailed, RunInterrupted, RunMissed, RunSkipped
	Error    string
	Disabled bool // this failure disabled the job
}

// Scheduler fires due jobs. Create it with New, wire its Source into the
// agent, then Start it once the router runs, and Stop it before the router.
type Scheduler struct {
	cfg   Config
	log   *slog.Logger
	clock Clock
	wake  chan struct{} // buffered: a job was created

	mu       sync.Mutex
	runner   Runner
	inflight map[int64]bool // job id → a run is going
	stopping bool
	maxSleep time.Duration      // see MaxSleep; 0: an hour
	stop     context.CancelFunc // ends the loop
	loopDone chan struct{}
	runCtx   context.Context // runs; cancelled when Stop's deadline passes
	runStop  context.CancelFunc
	runs     sync.WaitGroup
}

// New returns a Scheduler with defaults applied.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Store == nil {
		return nil, errors.New("schedule: a store is required")
	}
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	if cfg.MissedGrace <= 0 {
		cfg.MissedGrace = DefaultMissedGrace
	}
	if cfg.MaxFailures <= 0 {
		cfg.MaxFailures = DefaultMaxFailures
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{cfg: cfg, log: cfg.Logger, clock: cfg.Clock, wake: make(chan struct{}, 1),
		inflight: map[int64]bool{}}, nil
}

// Start synchronises the configured jobs, deals with runs a crash or
// shutdown interrupted, and starts the loop. Jobs run through runner.
func (s *Scheduler) Start(ctx context.Context, runner Runner) error {
	if runner == nil {
		return errors.New("schedule: start: a runner is required")
	}
	s.mu.Lock()
	if s.stop != nil {
		s.mu.Unlock()
		return errors.New("schedule: already started")
	}
	s.runner = runner
	s.runCtx, s.runStop = context.WithCancel(context.WithoutCancel(ctx))
	loopCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop, s.loopDone = stop, make(chan struct{})
	s.mu.Unlock()

	if err := s.syncConfig(ctx); err != nil {
		stop()
		close(s.loopDone)
		return err
	}
	if err := s.recoverRuns(ctx); err != nil {
		stop()
		close(s.loopDone)
		return err
	}
	go s.loop(loopCtx)
	return nil
}

// Stop stops firing jobs and waits for running ones until ctx ends; then it
// cancels them. A run cut short by Stop stays recorded as running, and the
// next Start finishes it (if it delivered something) or runs it again (if it
// is still within the grace window).
func (s *Scheduler) Stop(ctx context.Context) error {
	s.mu.Lock()
	stop, done := s.stop, s.loopDone
	s.stopping = true
	s.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	<-done
	idle := make(chan struct{})
	go func() { s.runs.Wait(); close(idle) }()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		s.runStop()
		<-idle
		return fmt.Errorf("schedule: stop: runs still going were cancelled: %w", ctx.Err())
	}
}

// kick wakes the loop (a job was created).
func (s *Scheduler) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// loop fires due jobs and sleeps until the next one is due.
func (s *Scheduler) loop(ctx context.Context) {
	defer close(s.loopDone)
	for {
		wait := s.pass(ctx)
		t := s.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.wake:
			t.Stop()
		case <-t.C():
		}
	}
}

// pass fires every due job and returns how long to sleep.
func (s *Scheduler) pass(ctx context.Context) time.Duration {
	now := s.clock.Now()
	due, err := s.cfg.Store.DueSchedules(ctx, now)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("load due jobs", "err", err, "retry_in", retryDelay)
		}
		return retryDelay
	}
	failed := false
	for _, sc := range due {
		if err := s.fire(ctx, sc, now); err != nil && ctx.Err() == nil {
			s.log.Error("fire job", "job_id", sc.ID, "job", sc.Name, "err", err)
			failed = true
		}
	}
	if failed {
		return retryDelay
	}
	next, ok, err := s.cfg.Store.NextScheduleRun(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("load next run", "err", err, "retry_in", retryDelay)
		}
		return retryDelay
	}
	if !ok {
		return s.sleepCap()
	}
	return min(max(next.Sub(s.clock.Now()), 0), s.sleepCap())
}

// MaxSleep caps the wait between passes (default: an hour), for when jobs
// are also created by other processes on the store, which cannot wake this
// one. Call it before Start.
func (s *Scheduler) MaxSleep(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxSleep = d
}

func (s *Scheduler) sleepCap() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.maxSleep > 0 {
		return min(s.maxSleep, maxSleep)
	}
	return maxSleep
}

// plan is what a due job does at one pass.
type plan struct {
	run        time.Time // the time to run for; zero: no run
	missed     int       // earlier times skipped
	missedFrom time.Time // the first of them
	missedTo   time.Time // the last of them
	next       time.Time // the next run after now; zero: none (done)
}

// planFire applies the missed-run policy to a job due at due: of the
// scheduled times up to now, the latest runs if it is within grace (never
// less than lateTolerance); all others are missed.
func planFire(sch spec.Schedule, due, now time.Time, grace time.Duration) plan {
	windowStart := now.Add(-max(grace, lateTolerance))
	var p plan
	n := due
	for steps := 0; !n.IsZero() && !n.After(now); steps++ {
		if steps == maxWalk && n.Before(windowStart) {
			// Too many to count: jump to the grace window.
			n = sch.After(due, windowStart.Add(-time.Nanosecond))
			continue
		}
		switch {
		case n.Before(windowStart):
			p.skip(n)
		case !p.run.IsZero():
			p.skip(p.run)
			p.run = n
		default:
			p.run = n
		}
		n = sch.After(due, n)
	}
	p.next = n
	return p
}

func (p *plan) skip(t time.Time) {
	if p.missed == 0 {
		p.missedFrom = t
	}
	p.missedTo = t
	p.missed++
}

// missedWhy says which times a plan skips, how long ago they were, and
// why: past the grace, or a later time runs instead.
func (p plan) missedWhy(now time.Time, grace time.Duration) string {
	var b strings.Builder
	if p.missed == 1 {
		fmt.Fprintf(&b, "1 scheduled time missed %s ago", ago(now.Sub(p.missedFrom)))
	} else {
		fmt.Fprintf(&b, "%d scheduled times missed, %s to %s ago", p.missed, ago(now.Sub(p.missedFrom)), ago(now.Sub(p.missedTo)))
	}
	b.WriteString(", while the service was down or busy")
	if p.run.IsZero() {
		fmt.Fprintf(&b, " (more than schedule.missed_grace, %s, late)", ago(max(grace, lateTolerance)))
	} else {
		fmt.Fprintf(&b, " (only the latest, %s ago, runs)", ago(now.Sub(p.run)))
	}
	return b.String()
}

// ago is a duration as a person reads it: to the second under an hour, to
// the minute under a day, in hours beyond ("45s", "3m20s", "2h30m", "50h").
func ago(d time.Duration) string {
	switch {
	case d < time.Hour:
		d = d.Round(time.Second)
	case d < 24*time.Hour:
		d = d.Round(time.Minute)
	default:
		d = d.Round(time.Hour)
	}
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s") // "3m0s" → "3m"
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m") // "50h0m" → "50h"
	}
	return out
}

// parse reads a stored job's spec in its zone.
func parse(sc store.Schedule) (spec.Schedule, error) {
	loc, err := time.LoadLocation(sc.Timezone)
	if err != nil {
		return spec.Schedule{}, fmt.Errorf("time zone %q: %w", sc.Timezone, err)
	}
	return spec.Parse(sc.Spec, loc)
}

// fire claims a due job's run (advancing its next run in the same
// transaction) and starts it.
func (s *Scheduler) fire(ctx context.Context, sc store.Schedule, now time.Time) error {
	due := *sc.NextRunAt
	sch, err := parse(sc)
	if err != nil {
		// Cannot happen for specs checked on the way in; end the job
		// rather than retry it forever.
		_, aerr := s.cfg.Store.AdvanceSchedule(ctx, sc.ID, due, time.Time{}, []store.NewScheduleRun{
			{ScheduledFor: due, Outcome: store.RunFailed, Error: "invalid schedule: " + err.Error()}})
		return errors.Join(err, aerr)
	}
	p := planFire(sch, due, now, s.cfg.MissedGrace)
	var runs []store.NewScheduleRun
	if p.missed > 0 {
		runs = append(runs, store.NewScheduleRun{ScheduledFor: p.missedFrom, Outcome: store.RunMissed, Missed: p.missed,
			Error: p.missedWhy(now, s.cfg.MissedGrace)})
	}
	s.mu.Lock()
	busy := s.inflight[sc.ID]
	s.mu.Unlock()
	start := !p.run.IsZero() && !busy
	if !p.run.IsZero() && busy {
		runs = append(runs, store.NewScheduleRun{ScheduledFor: p.run, Outcome: store.RunSkipped, Error: "the previous run was still going"})
	}
	if start {
		runs = append(runs, store.NewScheduleRun{ScheduledFor: p.run, Outcome: store.RunRunning})
	}
	ids, err := s.cfg.Store.AdvanceSchedule(ctx, sc.ID, due, p.next, runs)
	if errors.Is(err, store.ErrScheduleChanged) {
		return nil // cancelled or claimed meanwhile
	}
	if err != nil {
		return err
	}
	log := s.log.With("job_id", sc.ID, "job", sc.Name)
	for i, r := range runs {
		if r.Outcome == store.RunRunning {
			continue
		}
		log.Warn("job did not run", "outcome", r.Outcome, "scheduled_for", r.ScheduledFor, "why", r.Error)
		s.report(Report{Job: sc, RunID: ids[i], Outcome: r.Outcome, Error: r.Error})
	}
	if start {
		s.launch(sc, ids[len(ids)-1])
	}
	return nil
}

// launch runs a claimed run in the background.
func (s *Scheduler) launch(sc store.Schedule, runID int64) {
	s.mu.Lock()
	s.inflight[sc.ID] = true
	s.runs.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.runs.Done()
		r, recorded := s.execute(sc, runID)
		// The job is free again before anyone hears of the outcome.
		s.mu.Lock()
		delete(s.inflight, sc.ID)
		s.mu.Unlock()
		if !recorded {
			return
		}
		s.report(r)
		if r.Disabled {
			s.tellOwner(context.WithoutCancel(s.runCtx), r.Job)
		}
	}()
}

// execute runs a job once and records the outcome; recorded is false when
// the outcome is left for the next start (a shutdown cut the run short) or
// could not be stored.
func (s *Scheduler) execute(sc store.Schedule, runID int64) (r Report, recorded bool) {
	ctx := s.runCtx
	log := s.log.With("job_id", sc.ID, "job", sc.Name, "run_id", runID)
	j := router.JobTurn{Name: sc.Name, Channel: sc.Channel, ChatID: sc.ChatKey, ChatType: channels.ChatType(sc.ChatType),
		UserID: sc.OwnerID, MaxSteps: sc.MaxSteps, RunID: runID, Untrusted: sc.Untrusted,
		Delivered: func(ctx context.Context, turnID int64, msgID string) {
			if err := s.cfg.Store.RecordScheduleDelivery(ctx, runID, turnID, msgID); err != nil {
				log.Error("record delivery", "err", err)
			}
		}}
	if loc, err := time.LoadLocation(sc.Timezone); err == nil {
		j.Location = loc
	}
	if sc.Kind == "task" {
		j.Prompt = sc.Body
	} else {
		j.Text = sc.Body
	}
	s.mu.Lock()
	runner := s.runner
	s.mu.Unlock()
	res, err := runner.RunJob(ctx, j)
	outcome, why := classify(res, err)
	if outcome == store.RunInterrupted && s.isStopping() {
		log.Info("run interrupted by shutdown; it is resumed at the next start")
		return Report{}, false
	}
	wctx := context.WithoutCancel(ctx)
	job, disabled, ferr := s.cfg.Store.FinishScheduleRun(wctx, runID, store.ScheduleRunEnd{Outcome: outcome, Error: why,
		TurnID: res.TurnID}, s.cfg.MaxFailures)
	if ferr != nil {
		log.Error("record run outcome", "outcome", outcome, "err", ferr)
		return Report{}, false
	}
	switch outcome {
	case store.RunOK:
		log.Info("job ran", "delivered", res.Delivered)
	case store.RunFailed:
		log.Warn("job failed", "err", why, "failures_in_a_row", job.Failures, "disabled", disabled)
	default:
		log.Info("job interrupted", "why", why)
	}
	return Report{Job: job, RunID: runID, Outcome: outcome, Error: why, Disabled: disabled}, true
}

// classify turns a run's result into an outcome and a reason.
func classify(res agent.Result, err error) (outcome, why string) {
	switch {
	case errors.Is(err, router.ErrJobStopped):
		return store.RunInterrupted, "stopped with /stop"
	case errors.Is(err, router.ErrShuttingDown), errors.Is(err, context.Canceled):
		return store.RunInterrupted, "interrupted by a shutdown"
	case err != nil:
		return store.RunFailed, err.Error()
	case res.StopReason == agent.StopCancelled:
		return store.RunInterrupted, "cancelled"
	case res.StopReason.Class() == agent.ClassFailed:
		why = string(res.StopReason)
		if res.Err != nil {
			why += ": " + res.Err.Error()
		}
		return store.RunFailed, why
	}
	return store.RunOK, ""
}

func (s *Scheduler) isStopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

func (s *Scheduler) report(r Report) {
	if s.cfg.OnRun != nil {
		s.cfg.OnRun(r)
	}
}

// tellOwner says in the job's chat that the job was disabled.
func (s *Scheduler) tellOwner(ctx context.Context, job store.Schedule) {
	again := "Create it again once the problem is fixed."
	if job.Origin == store.OriginConfig {
		again = "The operator can turn it back on by changing it in the configuration."
	}
	text := fmt.Sprintf("I turned off the scheduled %s %q (#%d): it failed %d times in a row. The last error: %s. %s",
		job.Kind, job.Name, job.ID, job.Failures, lastError(job), again)
	s.mu.Lock()
	runner := s.runner
	s.mu.Unlock()
	_, err := runner.RunJob(ctx, router.JobTurn{Name: job.Name + " (disabled)", Channel: job.Channel, ChatID: job.ChatKey,
		ChatType: channels.ChatType(job.ChatType), UserID: job.OwnerID, Text: text})
	if err != nil {
		s.log.Error("could not tell the owner that a job was disabled", "job_id", job.ID, "err", err)
	}
}

// lastError is the error of the job's last failed run.
func lastError(job store.Schedule) string {
	e := job.LastError
	if _, rest, ok := strings.Cut(e, "; last: "); ok {
		e = rest
	}
	return strings.TrimSuffix(e, ".")
}

// recoverRuns finishes the runs a crash or shutdown left running: one that
// delivered is done; one that did not runs again if it is still within the
// grace window, else it is recorded as interrupted.
func (s *Scheduler) recoverRuns(ctx context.Context) error {
	runs, err := s.cfg.Store.RunningScheduleRuns(ctx)
	if err != nil {
		return fmt.Errorf("schedule: recover runs: %w", err)
	}
	now := s.clock.Now()
	for _, run := range runs {
		log := s.log.With("run_id", run.ID, "job_id", run.ScheduleID)
		sc, err := s.cfg.Store.Schedule(ctx, run.ScheduleID)
		if err != nil {
			return fmt.Errorf("schedule: recover run %d: %w", run.ID, err)
		}
		n, err := s.cfg.Store.ScheduleDeliveries(ctx, run.ID)
		if err != nil {
			return fmt.Errorf("schedule: recover run %d: %w", run.ID, err)
		}
		end := store.ScheduleRunEnd{Outcome: store.RunInterrupted, Error: "interrupted by a restart"}
		switch {
		case n > 0:
			end = store.ScheduleRunEnd{Outcome: store.RunOK, Error: "interrupted by a restart after it delivered"}
		case sc.State == store.ScheduleCancelled || sc.State == store.ScheduleDisabled:
		case now.Sub(run.ScheduledFor) <= max(s.cfg.MissedGrace, lateTolerance):
			log.Info("running again a job run interrupted by a restart", "job", sc.Name)
			s.launch(sc, run.ID)
			continue
		}
		job, _, err := s.cfg.Store.FinishScheduleRun(ctx, run.ID, end, s.cfg.MaxFailures)
		if err != nil {
			return fmt.Errorf("schedule: recover run %d: %w", run.ID, err)
		}
		log.Info("finished a job run interrupted by a restart", "job", sc.Name, "outcome", end.Outcome)
		s.report(Report{Job: job, RunID: run.ID, Outcome: end.Outcome, Error: end.Error})
	}
	return nil
}

// syncConfig makes the stored config jobs match the configuration.
func (s *Scheduler) syncConfig(ctx context.Context) error {
	now := s.clock.Now()
	var names []string
	for _, j := range s.cfg.Jobs {
		names = append(names, j.Name)
		loc := s.cfg.Location
		if j.Timezone != "" {
			l, err := time.LoadLocation(j.Timezone)
			if err != nil {
				return fmt.Errorf("schedule: job %q: time zone %q: %w", j.Name, j.Timezone, err)
			}
			loc = l
		}
		sch, err := spec.Parse(j.Spec, loc)
		if err != nil {
			return fmt.Errorf("schedule: job %q: %w", j.Name, err)
		}
		body := j.Text
		if j.Kind == "task" {
			body = j.Prompt
		}
		sc := store.Schedule{Name: j.Name, Origin: store.OriginConfig, Spec: sch.String(), Timezone: loc.String(),
			Kind: j.Kind, Body: body, MaxSteps: j.MaxSteps, Channel: j.Channel, ChatKey: j.Chat}
		sc.ConfigHash = fingerprint(sc)
		if next := sch.First(now); !next.IsZero() {
			sc.NextRunAt = &next
		}
		got, changed, err := s.cfg.Store.SyncConfigSchedule(ctx, sc)
		if err != nil {
			return fmt.Errorf("schedule: %w", err)
		}
		if changed {
			s.log.Info("scheduled job from the configuration", "job", got.Name, "job_id", got.ID, "next_run", got.NextRunAt)
		}
	}
	retired, err := s.cfg.Store.RetireConfigSchedules(ctx, names)
	if err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	for _, sc := range retired {
		s.log.Info("cancelled a job removed from the configuration", "job", sc.Name, "job_id", sc.ID)
	}
	return nil
}

// fingerprint identifies a config job's definition.
func fingerprint(sc store.Schedule) string {
	h := sha256.New()
	for _, f := range []string{sc.Spec, sc.Timezone, sc.Kind, sc.Body, strconv.Itoa(sc.MaxSteps), sc.Channel, sc.ChatKey} {
		fmt.Fprintf(h, "%d:%s;", len(f), f)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
