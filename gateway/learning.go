package gateway

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/learning"
	"github.com/switchboard-gateway/switchboard/memory"
	"github.com/switchboard-gateway/switchboard/profile"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/skills"
	"github.com/switchboard-gateway/switchboard/store"
)

// learningGrace is how long running learning jobs may finish at shutdown
// before they are cancelled (they resume from their cursors).
const learningGrace = 10 * time.Second

// learner wires what the bot learns after turns into the router: the
// background jobs after each turn (onEvent), the learned skill overlay, and
// /memory and /profile. What a turn gets of what was learned (profile,
// memories, memory tools) is the assembly package's to decide.
type learner struct {
	on      bool // learning.enabled
	st      *store.Store
	log     *slog.Logger
	memory  *memory.Service
	profile *profile.Service
	overlay *skills.Overlay
	runner  *learning.Runner
}

// newLearner builds the learning side and starts its runner.
func newLearner(ctx context.Context, cfg *config.Config, st *store.Store, model learning.Model, watcher *skills.Watcher,
	newRunner func(learning.Config) *learning.Runner, log *slog.Logger) *learner {
	l := &learner{on: cfg.Learning.Enabled, st: st, log: log.With("component", "learning")}
	l.overlay = skills.NewOverlay(st, log.With("component", "skills"))
	tokens := cfg.Learning.MemoryPromptTokens
	if tokens == 0 {
		tokens = -1 // 0 in the config keeps memories out of prompts
	}
	l.memory = memory.New(memory.Config{Store: st, Model: model, PromptTokens: tokens, Logger: log})
	l.profile = profile.New(profile.Config{Store: st, Model: model, Logger: log})
	var jobs []learning.Job
	if l.on {
		// One call per pass learns memories and the profile together.
		jobs = append(jobs, l.clearsOff(learning.Pass(learning.PassConfig{Store: st, Model: model,
			Parts: []learning.Part{l.memory.Part(), l.profile.Part()}, Logger: log})))
		if mode := cfg.Skills.SelfImprove; mode != "off" {
			jobs = append(jobs, learning.SkillJob(learning.SkillJobConfig{Store: st, Model: model, Files: watcher.Current,
				Overlay: l.overlay, Apply: mode == "apply", Logger: log}))
		}
	}
	if newRunner == nil {
		newRunner = learning.NewRunner
	}
	l.runner = newRunner(learning.Config{Jobs: jobs, EveryNTurns: cfg.Learning.EveryNTurns, IdleAfter: idleAfter(cfg.Learning.IdleAfter),
		Timeout: cfg.Learning.JobTimeout, QueueSize: cfg.Learning.QueueSize, Logger: log,
		OnDisabled: func(reason error) { l.disabled(ctx, cfg.LLM.Model, reason) }})
	if l.on {
		l.runner.Start(ctx)
	}
	return l
}

// statusNotes adds to the operator's lines of /status that learning turned
// itself off, and why.
func (l *learner) statusNotes(next func() []string) func() []string {
	return func() []string {
		notes := next()
		if err := l.runner.Stats().Disabled; err != nil {
			notes = append(notes, "Learning is off: the model cannot make forced function calls ("+err.Error()+
				"); it is tried again at the next start (see switchboard doctor)")
		}
		return notes
	}
}

// idleAfter is learning.idle_after for the runner, where 0 takes its
// default and < 0 means no pause.
func idleAfter(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// disabled records that learning turned itself off because the model
// cannot make forced function calls, for `switchboard doctor`.
func (l *learner) disabled(ctx context.Context, model string, reason error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := l.st.SetLearningOff(ctx, store.LearningOff{Model: model, Reason: reason.Error()}); err != nil {
		l.log.Warn("cannot record that learning is off", "err", err)
	}
}

// clearsOff forgets, after the job's first successful run, that learning
// had turned itself off before this start (another model, or the same one
// fixed).
func (l *learner) clearsOff(j learning.Job) learning.Job {
	off, recorded, err := l.st.LearningOff(context.Background())
	if err != nil || !recorded {
		return j
	}
	l.log.Info("learning had turned itself off; trying again", "model", off.Model, "since", off.At, "reason", off.Reason)
	var once sync.Once
	run := j.Run
	j.Run = func(ctx context.Context, t learning.Trigger) error {
		err := run(ctx, t)
		if err == nil {
			once.Do(func() {
				if err := l.st.ClearLearningOff(ctx); err != nil {
					l.log.Warn("cannot record that learning works again", "err", err)
				}
			})
		}
		return err
	}
	return j
}

// skills returns the registry of the skill files with the learned overlay.
func (l *learner) skills(ctx context.Context, files *skills.Registry) *skills.Registry {
	return l.overlay.Apply(ctx, files)
}

// onEvent hands every finished turn to the runner; the jobs start once the
// reply is out (EventDone comes after the fallback reply) and never change
// the turn.
func (l *learner) onEvent(in channels.Inbound, ev agent.Event) {
	if ev.Kind != agent.EventDone {
		return
	}
	if !l.on || ev.TurnID == 0 || in.UserID == "" {
		return
	}
	if modelFailed(ev.StopReason) {
		// Nothing new to learn, and the jobs would only fail on the same
		// model (a held turn, StopModelUnavailable, is learnt from once it
		// ends).
		return
	}
	t := learning.Trigger{Channel: in.Channel, UserID: in.UserID, ChatID: ev.ChatID, Group: in.ChatType == channels.Group,
		TurnID: ev.TurnID}
	if len(ev.Skills) > 0 {
		// The skills the turn engaged (assembly), for the skill review.
		t.Skills = map[int64][]string{ev.TurnID: ev.Skills}
	}
	l.runner.Notify(t)
}

// modelFailed reports whether a turn stopped because of the model: it
// could not be reached, answered with an error or nonsense, or the
// conversation no longer fits.
func modelFailed(r agent.StopReason) bool {
	switch r {
	case agent.StopModelUnavailable, agent.StopLLMError, agent.StopInvalidResponse, agent.StopContextOverflow:
		return true
	}
	return false
}

// commands answers /memory and /profile; nil when learning is off.
func (l *learner) commands() router.Learning {
	if !l.on {
		return nil
	}
	return l
}

func (l *learner) scope(ctx context.Context, in channels.Inbound) (memory.Scope, error) {
	chat, err := l.st.EnsureChat(ctx, in.Channel, in.ChatID, string(in.ChatType), in.ChatTitle)
	if err != nil {
		return memory.Scope{}, err
	}
	return memory.Scope{Channel: in.Channel, UserID: in.UserID, ChatID: chat.ID, Group: in.ChatType == channels.Group}, nil
}

// Memories implements router.Learning.
func (l *learner) Memories(ctx context.Context, in channels.Inbound) ([]store.Memory, error) {
	sc, err := l.scope(ctx, in)
	if err != nil {
		return nil, err
	}
	return l.memory.List(ctx, sc)
}

// ForgetMemory implements router.Learning.
func (l *learner) ForgetMemory(ctx context.Context, in channels.Inbound, id int64) (bool, error) {
	sc, err := l.scope(ctx, in)
	if err != nil {
		return false, err
	}
	return l.memory.Forget(ctx, sc, id)
}

// Profile implements router.Learning.
func (l *learner) Profile(ctx context.Context, in channels.Inbound) ([]store.ProfileEntry, error) {
	return l.profile.Get(ctx, store.UserKey(in.Channel, in.UserID))
}

// ForgetProfile implements router.Learning.
func (l *learner) ForgetProfile(ctx context.Context, in channels.Inbound, dimension string) (int64, error) {
	return l.profile.Forget(ctx, store.UserKey(in.Channel, in.UserID), dimension)
}

// close waits up to learningGrace for running jobs, then cancels them.
func (l *learner) close() {
	ctx, cancel := context.WithTimeout(context.Background(), learningGrace)
	defer cancel()
	if err := l.runner.Shutdown(ctx); err != nil {
		l.log.Warn("learning jobs were cancelled at shutdown; they resume from their cursors", "err", err)
	}
}

var _ router.Learning = (*learner)(nil)
