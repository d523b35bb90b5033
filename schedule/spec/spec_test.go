package spec

import (
	"strings"
	"testing"
	"time"
)

func berlin(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// runs walks n runs after from.
func runs(s Schedule, from time.Time, n int) []string {
	var out []string
	anchor, t := from, from
	for range n {
		t = s.After(anchor, t)
		if t.IsZero() {
			out = append(out, "none")
			break
		}
		out = append(out, t.Format("2006-01-02 15:04 MST"))
	}
	return out
}

func TestNextAcrossDST(t *testing.T) {
	loc := berlin(t)
	tests := []struct {
		spec string
		from time.Time
		want []string
	}{
		// Spring forward, 2026-03-29 02:00 CET → 03:00 CEST.
		{"30 9 * * *", time.Date(2026, 3, 28, 12, 0, 0, 0, loc),
			[]string{"2026-03-29 09:30 CEST", "2026-03-30 09:30 CEST"}},
		{"30 2 * * *", time.Date(2026, 3, 28, 12, 0, 0, 0, loc), // 02:30 does not exist on the 29th
			[]string{"2026-03-30 02:30 CEST", "2026-03-31 02:30 CEST"}},
		{"0 * * * *", time.Date(2026, 3, 29, 0, 30, 0, 0, loc),
			[]string{"2026-03-29 01:00 CET", "2026-03-29 03:00 CEST", "2026-03-29 04:00 CEST"}},
		{"*/15 9-17 * * MON-FRI", time.Date(2026, 3, 28, 23, 59, 30, 0, loc),
			[]string{"2026-03-30 09:00 CEST", "2026-03-30 09:15 CEST"}},
		// Fall back, 2026-10-25 03:00 CEST → 02:00 CET: 02:30 happens twice,
		// the job runs once.
		{"30 2 * * *", time.Date(2026, 10, 24, 12, 0, 0, 0, loc),
			[]string{"2026-10-25 02:30 CEST", "2026-10-26 02:30 CET"}},
		{"@daily", time.Date(2026, 3, 28, 12, 0, 0, 0, loc),
			[]string{"2026-03-29 00:00 CET", "2026-03-30 00:00 CEST"}},
		{"at 2026-12-24 09:00", time.Date(2026, 12, 1, 0, 0, 0, 0, loc),
			[]string{"2026-12-24 09:00 CET", "none"}},
	}
	for _, tt := range tests {
		s, err := Parse(tt.spec, loc)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.spec, err)
		}
		got := runs(s, tt.from, len(tt.want))
		if strings.Join(got, ", ") != strings.Join(tt.want, ", ") {
			t.Errorf("%q from %s:\ngot  %q\nwant %q", tt.spec, tt.from, got, tt.want)
		}
	}
}

// An @every series keeps its own beat: asking late does not shift it.
func TestEveryKeepsItsBeat(t *testing.T) {
	s, err := Parse("@every 90m", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	anchor := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	if got, want := s.First(anchor), anchor.Add(90*time.Minute); !got.Equal(want) {
		t.Errorf("First = %s, want %s", got, want)
	}
	// Five hours late: the next run is on the series, not five hours + 90m.
	if got, want := s.After(anchor, anchor.Add(5*time.Hour)), anchor.Add(6*time.Hour); !got.Equal(want) {
		t.Errorf("After(late) = %s, want %s", got, want)
	}
	// Exactly on a run: strictly after.
	if got, want := s.After(anchor, anchor.Add(3*time.Hour)), anchor.Add(270*time.Minute); !got.Equal(want) {
		t.Errorf("After(on a run) = %s, want %s", got, want)
	}
}

func TestOneShotInZone(t *testing.T) {
	loc := berlin(t)
	s, err := Parse("at 2026-12-24 09:00", loc)
	if err != nil {
		t.Fatal(err)
	}
	if !s.OneShot() {
		t.Error("OneShot = false")
	}
	want := time.Date(2026, 12, 24, 8, 0, 0, 0, time.UTC)
	if got := s.First(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); !got.Equal(want) {
		t.Errorf("First = %s, want %s", got, want)
	}
	if got := s.First(want); !got.IsZero() {
		t.Errorf("First at the time itself = %s, want none", got)
	}
	for _, text := range []string{"AT 2026-12-24T09:00", "at 2026-12-24 09:00:00", "at  2026-12-24   09:00"} {
		if s, err := Parse(text, loc); err != nil || !s.First(time.Time{}).Equal(want) {
			t.Errorf("Parse(%q) = %v, %v; want a run at %s", text, s.First(time.Time{}), err, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ spec, want string }{
		{"", "empty schedule"},
		{"0 9 * *", "is not a schedule"},
		{"0 0 9 * * *", "is not a schedule"}, // six fields: seconds are not accepted
		{"61 * * * *", "is not a schedule"},
		{"@every 30s", "at least 1m0s"},
		{"@every soon", "not a duration"},
		{"@fortnightly", "is not a schedule"},
		{"at tomorrow", `write it like "at 2026-12-24 09:00"`},
		{"CRON_TZ=UTC 0 9 * * *", "set the job's timezone instead"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.spec, time.UTC)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tt.spec, err, tt.want)
		}
	}
	for _, ok := range []string{"0 9 * * MON", "@hourly", "@every 1m", "@yearly", "0 9 1 1 *"} {
		if _, err := Parse(ok, time.UTC); err != nil {
			t.Errorf("Parse(%q): %v", ok, err)
		}
	}
}
