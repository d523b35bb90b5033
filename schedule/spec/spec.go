// Package spec parses the schedule specs of jobs and computes their runs. It
// is a leaf package so that the configuration can validate specs with the
// very parser the scheduler uses.
//
// A spec is one of:
//
//	0 9 * * MON-FRI          standard 5-field cron (minute hour day-of-month month day-of-week)
//	@daily, @hourly, …       descriptors: @yearly @annually @monthly @weekly @daily @midnight @hourly
//	@every 2h30m             a fixed interval (at least one minute), counted from creation
//	at 2026-12-24 09:00      one time only
//
// Times are wall-clock times in the job's zone. robfig/cron/v3 parses the
// cron forms and computes their next times; it never runs anything here.
package spec

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// MinEvery is the shortest @every interval: anything shorter is a loop, not
// a schedule, and would burn model calls or flood a chat.
const MinEvery = time.Minute

// parser accepts exactly the standard five fields plus descriptors.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// atLayouts are the accepted forms of a one-shot time after "at ".
var atLayouts = []string{"2006-01-02 15:04", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02T15:04:05"}

// Schedule is a parsed spec bound to a time zone. The zero value has no runs.
type Schedule struct {
	text  string
	loc   *time.Location
	at    time.Time     // one-shot
	every time.Duration // @every
	cron  cron.Schedule // cron fields and other descriptors
}

// Parse parses text in the zone loc (nil means UTC). Errors say what is
// accepted.
func Parse(text string, loc *time.Location) (Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	text = strings.Join(strings.Fields(text), " ")
	s := Schedule{text: text, loc: loc}
	lower := strings.ToLower(text)
	switch {
	case text == "":
		return Schedule{}, errors.New(`empty schedule; write 5 cron fields such as "0 9 * * MON", a descriptor such as "@daily" or "@every 2h", or a time such as "at 2026-12-24 09:00"`)
	case strings.HasPrefix(lower, "at "):
		v := strings.TrimSpace(text[3:])
		for _, layout := range atLayouts {
			if t, err := time.ParseInLocation(layout, v, loc); err == nil {
				s.at = t
				return s, nil
			}
		}
		return Schedule{}, fmt.Errorf(`%q is not a time; write it like "at 2026-12-24 09:00" (24-hour clock, in the job's time zone)`, text)
	case strings.HasPrefix(text, "TZ=") || strings.HasPrefix(text, "CRON_TZ="):
		return Schedule{}, fmt.Errorf("%q sets a time zone inside the spec; set the job's timezone instead", text)
	case strings.HasPrefix(lower, "@every"):
		d, err := time.ParseDuration(strings.TrimSpace(text[len("@every"):]))
		if err != nil {
			return Schedule{}, fmt.Errorf(`%q: the interval is not a duration; write it like "@every 30m" or "@every 2h"`, text)
		}
		if d < MinEvery {
			return Schedule{}, fmt.Errorf("%q: the interval must be at least %s", text, MinEvery)
		}
		s.every = d.Truncate(time.Second)
		return s, nil
	}
	c, err := parser.Parse(text)
	if err != nil {
		return Schedule{}, fmt.Errorf(`%q is not a schedule (%v); write 5 cron fields such as "0 9 * * MON", a descriptor such as "@daily", "@every 2h", or "at 2026-12-24 09:00"`, text, err)
	}
	s.cron = c
	return s, nil
}

// String returns the spec as parsed (whitespace normalised).
func (s Schedule) String() string { return s.text }

// Location is the zone the spec's wall-clock times are in.
func (s Schedule) Location() *time.Location { return s.loc }

// OneShot reports whether the schedule runs once ("at …").
func (s Schedule) OneShot() bool { return !s.at.IsZero() }

// First returns the first run strictly after now, or the zero time if there
// is none (a one-shot time in the past). An @every series starts at now.
func (s Schedule) First(now time.Time) time.Time { return s.After(now, now) }

// After returns the first run strictly after t, or the zero time if there is
// none. anchor is a run of the same series at or before t (the creation time
// or a previous run); only @every schedules use it, so a series stays on its
// own beat instead of drifting with the time of the call.
//
// Daylight-saving changes follow the wall clock of the job's zone: a time
// skipped when clocks go forward does not run that day (0 2 * * * skips
// 2026-03-29 in Europe/Berlin), and a time that occurs twice when clocks go
// back runs only the first time (robfig/cron alone would run it twice).
func (s Schedule) After(anchor, t time.Time) time.Time {
	switch {
	case !s.at.IsZero():
		if s.at.After(t) {
			return s.at
		}
		return time.Time{}
	case s.every > 0:
		if t.Before(anchor) {
			return anchor
		}
		n := t.Sub(anchor)/s.every + 1
		return anchor.Add(n * s.every)
	case s.cron != nil:
		n := s.cron.Next(t.In(s.loc))
		for i := 0; i < 4 && !n.IsZero() && repeated(n, s.loc); i++ {
			n = s.cron.Next(n)
		}
		return n
	}
	return time.Time{}
}

// repeated reports whether the wall-clock time of t already occurred earlier
// the same day, because clocks went back (by an hour, or half an hour in a
// few zones) in between.
func repeated(t time.Time, loc *time.Location) bool {
	t = t.In(loc)
	for _, back := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		e := t.Add(-back).In(loc)
		if e.Hour() == t.Hour() && e.Minute() == t.Minute() && e.Second() == t.Second() && e.YearDay() == t.YearDay() {
			return true
		}
	}
	return false
}
