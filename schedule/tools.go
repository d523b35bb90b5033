package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/schedule/spec"
	"github.com/switchboard-gateway/switchboard/store"
)

// Limits on jobs made in conversation.
const (
	// MaxJobsPerUser active jobs per user: plenty for a busy life, too few
	// to flood a chat or a model budget.
	MaxJobsPerUser = 25
	// maxBodyChars bounds a reminder's text or a task's prompt.
	maxBodyChars = 4000
	// maxNameChars bounds a job's name; longer names are cut.
	maxNameChars = 60
)

// Request is a job to create on behalf of a user in a chat.
type Request struct {
	Name     string // a short label; "": the start of Text
	Spec     string
	Timezone string // IANA zone; "": the user's zone, else the default
	Kind     string // "reminder" or "task"
	Text     string // the reminder's text or the task's prompt
	// Untrusted: asked for in a turn with untrusted content in it; a task
	// then runs with its text labelled as data (store.Schedule.Untrusted).
	Untrusted bool

	Channel, ChatKey, ChatType, UserID string
}

// Scope is whose jobs a list or cancel may see: one user in one chat.
type Scope struct {
	Channel, ChatKey, UserID string
}

func (sc Scope) filter() store.ScheduleFilter {
	return store.ScheduleFilter{Channel: sc.Channel, ChatKey: sc.ChatKey, OwnerID: sc.UserID}
}

// Create stores a job made in conversation and wakes the loop for it.
func (s *Scheduler) Create(ctx context.Context, req Request) (store.Schedule, error) {
	if req.Channel == "" || req.ChatKey == "" || req.UserID == "" {
		return store.Schedule{}, errors.New("schedule: a job needs the chat and the user it belongs to")
	}
	text := strings.TrimSpace(req.Text)
	switch {
	case req.Kind != "reminder" && req.Kind != "task":
		return store.Schedule{}, fmt.Errorf("kind must be reminder or task, not %q", req.Kind)
	case text == "":
		return store.Schedule{}, errors.New("text must not be empty: the reminder's message, or the task's instruction")
	case utf8.RuneCountInString(text) > maxBodyChars:
		return store.Schedule{}, fmt.Errorf("text is too long (at most %d characters)", maxBodyChars)
	}
	loc, err := s.zoneFor(req.UserID, req.Timezone)
	if err != nil {
		return store.Schedule{}, err
	}
	sch, err := spec.Parse(req.Spec, loc)
	if err != nil {
		return store.Schedule{}, err
	}
	now := s.clock.Now()
	next := sch.First(now)
	if next.IsZero() {
		return store.Schedule{}, fmt.Errorf("%s has already passed (it is now %s)", sch, now.In(loc).Format("2006-01-02 15:04 MST"))
	}
	active, err := s.cfg.Store.Schedules(ctx, store.ScheduleFilter{OwnerID: req.UserID, Origin: store.OriginChat,
		States: []string{store.ScheduleActive}})
	if err != nil {
		return store.Schedule{}, err
	}
	if len(active) >= MaxJobsPerUser {
		return store.Schedule{}, fmt.Errorf("you already have %d active scheduled jobs, the most allowed; cancel one first", len(active))
	}
	name := strings.Join(strings.Fields(req.Name), " ")
	if name == "" {
		name = strings.Join(strings.Fields(text), " ")
	}
	if r := []rune(name); len(r) > maxNameChars {
		name = string(r[:maxNameChars-1]) + "…"
	}
	sc, err := s.cfg.Store.CreateSchedule(ctx, store.Schedule{Name: name, Origin: store.OriginChat, Spec: sch.String(),
		Timezone: loc.String(), Kind: req.Kind, Body: text, Channel: req.Channel, ChatKey: req.ChatKey,
		ChatType: req.ChatType, OwnerID: req.UserID, NextRunAt: &next, Untrusted: req.Untrusted})
	if err != nil {
		return store.Schedule{}, err
	}
	s.log.Info("job created in conversation", "job_id", sc.ID, "job", sc.Name, "user_id", req.UserID, "next_run", next)
	s.kick()
	return sc, nil
}

// zoneFor picks a job's zone: the one asked for, else the user's, else the
// default.
func (s *Scheduler) zoneFor(userID, name string) (*time.Location, error) {
	if name != "" {
		loc, err := time.LoadLocation(name)
		if err != nil {
			return nil, fmt.Errorf("unknown time zone %q; use an IANA name such as Europe/Berlin", name)
		}
		return loc, nil
	}
	if s.cfg.ZoneFor != nil {
		if loc := s.cfg.ZoneFor(userID); loc != nil {
			return loc, nil
		}
	}
	return s.cfg.Location, nil
}

// List returns the scope's active and disabled jobs.
func (s *Scheduler) List(ctx context.Context, scope Scope) ([]store.Schedule, error) {
	f := scope.filter()
	f.States = []string{store.ScheduleActive, store.ScheduleDisabled}
	return s.cfg.Store.Schedules(ctx, f)
}

// Cancel cancels one of the scope's jobs.
func (s *Scheduler) Cancel(ctx context.Context, scope Scope, id int64) (store.Schedule, error) {
	return s.cfg.Store.CancelSchedule(ctx, id, scope.filter())
}

// Describe renders a job in one line for people and the model.
func Describe(sc store.Schedule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s %q: %q", sc.ID, sc.Kind, sc.Name, sc.Spec)
	if sc.Timezone != "" {
		fmt.Fprintf(&b, " (%s)", sc.Timezone)
	}
	loc, err := time.LoadLocation(sc.Timezone)
	if err != nil {
		loc = time.UTC
	}
	switch {
	case sc.NextRunAt != nil:
		fmt.Fprintf(&b, ", next %s", sc.NextRunAt.In(loc).Format("Mon 2 Jan 2006 15:04 MST"))
	case sc.LastError != "":
		fmt.Fprintf(&b, ", %s: %s", sc.State, sc.LastError)
	default:
		fmt.Fprintf(&b, ", %s", sc.State)
	}
	return b.String()
}

// Source returns the tool source of schedule_create, schedule_list and
// schedule_cancel, bound to the user and chat of each turn. A task's own
// turn gets only schedule_list: a job must not breed jobs.
func (s *Scheduler) Source() agent.Source {
	return agent.SourceFunc{SourceName: "schedule", Fn: s.tools}
}

var (
	createTool = staticTool(&agent.Tool{
		Name: "schedule_create",
		Description: "Schedule a reminder or a task in this chat, for the user you are talking to. " +
			"A reminder sends its text as is at each time. A task gives you its text as an instruction at each time; " +
			"you carry it out (look things up, summarise) and reply here. Times are wall-clock times in the job's " +
			"time zone (default: the user's). Confirm to the user what you scheduled and when it runs next.",
		Parameters: json.RawMessage(`{"type":"object","properties":{
"spec":{"type":"string","description":"When: 5 cron fields (minute hour day-of-month month day-of-week), e.g. \"0 9 * * MON\" for Mondays at 09:00 or \"30 7 * * *\" daily at 07:30; a descriptor \"@daily\", \"@hourly\", \"@weekly\", \"@every 2h\" (at least 1m); or one time \"at 2026-12-24 09:00\"."},
"kind":{"type":"string","enum":["reminder","task"],"description":"reminder: send text verbatim. task: run text as your instruction."},
"text":{"type":"string","description":"The reminder's message to the user, or the task's instruction to you."},
"name":{"type":"string","description":"A short label, e.g. \"stand-up\"; default: the start of text."},
"timezone":{"type":"string","description":"IANA zone such as Europe/Berlin; default: the user's zone."}},
"required":["spec","kind","text"],"additionalProperties":false}`),
		Source: "schedule",
		Acts:   true,
	})
	listTool = staticTool(&agent.Tool{
		Name:            "schedule_list",
		Description:     "List the scheduled reminders and tasks the user has in this chat, with their ids and next runs.",
		Parameters:      json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
		ConcurrencySafe: true,
		Source:          "schedule",
	})
	cancelTool = staticTool(&agent.Tool{
		Name:        "schedule_cancel",
		Description: "Cancel one of the user's scheduled reminders or tasks in this chat, by the id schedule_list shows.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer","description":"The job's id."}},"required":["id"],"additionalProperties":false}`),
		Source:      "schedule",
		Acts:        true,
	})
)

func staticTool(t *agent.Tool) *agent.Tool {
	t.CompileLater() // a static schema: resolved once the gateway serves (agent.ResolveDeferred)
	return t
}

// bind returns a copy of a template tool with fn.
func bind(tmpl *agent.Tool, fn func(ctx context.Context, args json.RawMessage) (string, error)) *agent.Tool {
	t := *tmpl
	t.Fn = fn
	return &t
}

// tools builds the schedule tools for a turn: only in a known chat with a
// known user, and only schedule_list in a task's own turn (kind "job").
func (s *Scheduler) tools(info agent.TurnInfo) []*agent.Tool {
	if info.Channel == "" || info.ChatKey == "" || info.UserID == "" {
		return nil
	}
	scope := Scope{Channel: info.Channel, ChatKey: info.ChatKey, UserID: info.UserID}
	list := bind(listTool, func(ctx context.Context, _ json.RawMessage) (string, error) {
		jobs, err := s.List(ctx, scope)
		if err != nil {
			return "", err
		}
		if len(jobs) == 0 {
			return "No scheduled reminders or tasks in this chat.", nil
		}
		lines := make([]string, len(jobs))
		for i, sc := range jobs {
			lines[i] = Describe(sc)
		}
		return strings.Join(lines, "\n"), nil
	})
	if info.Kind == "job" {
		return []*agent.Tool{list}
	}
	create := bind(createTool, func(ctx context.Context, raw json.RawMessage) (string, error) {
		var a struct{ Spec, Kind, Text, Name, Timezone string }
		if err := json.Unmarshal(raw, &a); err != nil {
			return "", fmt.Errorf("bad arguments: %w", err)
		}
		sc, err := s.Create(ctx, Request{Name: a.Name, Spec: a.Spec, Timezone: a.Timezone, Kind: a.Kind, Text: a.Text,
			Channel: info.Channel, ChatKey: info.ChatKey, ChatType: info.ChatType, UserID: info.UserID, Untrusted: info.Tainted})
		if err != nil {
			return "", err
		}
		if sc.Untrusted {
			return "Scheduled " + Describe(sc) + ". Untrusted content is in this conversation, so each run gives you its text as data, not as the user's instruction.", nil
		}
		return "Scheduled " + Describe(sc) + ".", nil
	})
	cancel := bind(cancelTool, func(ctx context.Context, raw json.RawMessage) (string, error) {
		var a struct {
			ID int64 `json:"id"`
		}
		if err := json.Unmarshal(raw, &a); err != nil {
			return "", fmt.Errorf("bad arguments: %w", err)
		}
		sc, err := s.Cancel(ctx, scope, a.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return "", fmt.Errorf("the user has no job #%d in this chat; call schedule_list for the ids", a.ID)
		case errors.Is(err, store.ErrScheduleInactive):
			return "", fmt.Errorf("job #%d is already finished or cancelled", a.ID)
		case err != nil:
			return "", err
		}
		return fmt.Sprintf("Cancelled #%d %q.", sc.ID, sc.Name), nil
	})
	return []*agent.Tool{create, list, cancel}
}
