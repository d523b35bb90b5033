package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestScheduleJobsLoad(t *testing.T) {
	cfg := mustLoad(t, doc(
		"llm:",
		"  model: m",
		"agent:",
		"  timezone: Europe/Berlin",
		"schedule:",
		"  missed_grace: 30m",
		"  jobs:",
		"    - name: standup",
		`      spec: "0 9 * * MON-FRI"`,
		"      channel: console",
		"      chat: terminal",
		"      kind: reminder",
		"      text: Stand-up!",
		"    - name: digest",
		"      spec: at 2026-12-24 09:00",
		"      timezone: America/New_York",
		"      channel: console",
		"      chat: terminal",
		"      kind: task",
		"      prompt: Summarise.",
		"      max_steps: 5",
	), nil)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	want := Schedule{MissedGrace: 30 * time.Minute, MaxFailures: 3, Jobs: []ScheduleJob{
		{Name: "standup", Spec: "0 9 * * MON-FRI", Channel: "console", Chat: "terminal", Kind: "reminder", Text: "Stand-up!"},
		{Name: "digest", Spec: "at 2026-12-24 09:00", Timezone: "America/New_York", Channel: "console", Chat: "terminal",
			Kind: "task", Prompt: "Summarise.", MaxSteps: 5},
	}}
	if got := cfg.Schedule; !slices.Equal(got.Jobs, want.Jobs) || got.MissedGrace != want.MissedGrace || got.MaxFailures != want.MaxFailures {
		t.Errorf("schedule = %+v\nwant       %+v", got, want)
	}
	// Redacted is a deep copy: changing it leaves the original alone.
	r := cfg.Redacted()
	r.Schedule.Jobs[0].Text = "changed"
	if cfg.Schedule.Jobs[0].Text != "Stand-up!" {
		t.Error("Redacted shares schedule.jobs with the original")
	}
	w := cfg.Warnings()
	if len(w) < 2 || w[0] != "config.yaml:10: schedule.jobs[0].channel is console, so job \"standup\" runs only while `switchboard chat` does" ||
		!strings.HasPrefix(w[1], "config.yaml:17: schedule.jobs[1].channel is console") {
		t.Errorf("warnings = %q", w)
	}
}

// Every problem of a job names its file, line and key; a missing key is
// placed at its list item. Specs are checked by the scheduler's parser.
func TestScheduleJobsValidate(t *testing.T) {
	cfg := mustLoad(t, doc(
		"llm:",
		"  model: m",
		"schedule:",
		"  max_failures: 0",
		"  jobs:",
		"    - name: a",
		`      spec: "0 9 * *"`,
		"      channel: telegram",
		"      chat: '1'",
		"      kind: reminder",
		"      text: hi",
		"    - name: a",
		"      spec: '@every 10s'",
		"      timezone: Mars/Base",
		"      channel: sms",
		"      kind: task",
		"      text: hi",
		"      max_steps: -1",
		"    - spec: '@daily'",
		"      channel: console",
		"      chat: terminal",
		"      kind: chore",
	), nil)
	want := []string{
		"config.yaml:4: schedule.max_failures: must be a positive number, got 0; set it to the failed runs in a row that disable a job, such as 3",
		`config.yaml:7: schedule.jobs[0].spec: "0 9 * *" is not a schedule (expected exactly 5 fields, found 4: [0 9 * *]); write 5 cron fields such as "0 9 * * MON", a descriptor such as "@daily", "@every 2h", or "at 2026-12-24 09:00"`,
		`config.yaml:12: schedule.jobs[1].name: "a" is used by schedule.jobs[0] too; names must be unique`,
		`config.yaml:12: schedule.jobs[1].chat: must not be empty; set the chat's id on that channel (the console's is "terminal")`,
		`config.yaml:13: schedule.jobs[1].spec: "@every 10s": the interval must be at least 1m0s`,
		`config.yaml:14: schedule.jobs[1].timezone: unknown time zone "Mars/Base"; use an IANA name such as "Europe/Berlin", or leave it empty for agent.timezone`,
		`config.yaml:15: schedule.jobs[1].channel: "sms" is not one of console, telegram, discord, slack, whatsapp, email, matrix`,
		"config.yaml:16: schedule.jobs[1].prompt: a task needs a prompt (run as an agent turn) and no text",
		"config.yaml:18: schedule.jobs[1].max_steps: must not be negative, got -1 (0 uses agent.max_steps)",
		`config.yaml:19: schedule.jobs[2].name: must not be empty; name the job, such as "morning-digest"`,
		`config.yaml:22: schedule.jobs[2].kind: "chore" is neither reminder (with text) nor task (with prompt)`,
	}
	if got := messages(t, cfg.Validate()); !slices.Equal(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestScheduleWarnsAboutDisabledChannels(t *testing.T) {
	c := validConfig()
	c.LLM.APIKey = "sk"
	c.Schedule.Jobs = []ScheduleJob{{Name: "n", Spec: "@daily", Channel: "discord", Chat: "1", Kind: "reminder", Text: "t"}}
	want := []string{`schedule.jobs[0].channel is discord, which is not enabled, so job "n" fails until it is (and is disabled after schedule.max_failures runs)`}
	if got := c.Warnings(); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	discordOf(c).Enabled, discordOf(c).AllowUsers = true, []string{"1"}
	if got := c.Warnings(); len(got) != 0 {
		t.Errorf("with discord enabled: %q", got)
	}
}
