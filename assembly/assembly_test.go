package assembly

import (
	"context"
	"slices"
	"testing"
	"testing/fstest"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/memory"
	"github.com/switchboard-gateway/switchboard/skills"
	"github.com/switchboard-gateway/switchboard/store"
)

// fakeLearned stands in for the memories; it records the scopes it was
// asked about.
type fakeLearned struct {
	scopes []memory.Scope
	users  []string
}

func (f *fakeLearned) Section(_ context.Context, sc memory.Scope, _ string) (agent.Section, bool) {
	f.scopes = append(f.scopes, sc)
	return agent.Section{Title: "Memories", Body: "likes tea"}, true
}

func (f *fakeLearned) Tools(sc memory.Scope) agent.Source {
	return agent.StaticSource{SourceName: "memory"}
}

type fakeProfiles struct{ users []string }

func (p *fakeProfiles) Section(_ context.Context, user string, _ time.Time) (agent.Section, bool) {
	p.users = append(p.users, user)
	return agent.Section{Title: "Profile", Body: "Ada"}, true
}

type fakeDelegate struct{}

func (fakeDelegate) Source(in channels.Inbound) agent.Source {
	return agent.StaticSource{SourceName: "delegate:" + in.ChatID}
}

func registry(t *testing.T) *skills.Registry {
	t.Helper()
	reg := skills.Load(fstest.MapFS{
		"weather.yaml":  {Data: []byte("name: weather\ndescription: w\nactivation: triggers\ntriggers: [weather]\ninstructions: Use the forecast.\n")},
		"always.yaml":   {Data: []byte("name: always\ndescription: a\nactivation: always\ninstructions: Be kind.\n")},
		"research.yaml": {Data: []byte("name: research\ndescription: r\nactivation: command\ncommand: research\nmode: plan\ninstructions: Plan it.\n")},
	}, nil, skills.Env{})
	if p := reg.Problems(); len(p) > 0 {
		t.Fatal(p)
	}
	return reg
}

func names(srcs []agent.Source) []string {
	var out []string
	for _, s := range srcs {
		out = append(out, s.Name())
	}
	return out
}

func titles(secs []agent.Section) []string {
	var out []string
	for _, s := range secs {
		out = append(out, s.Title)
	}
	return out
}

func TestWhatATurnGets(t *testing.T) {
	dm := channels.Inbound{Channel: "telegram", ChatID: "c1", ChatType: channels.DM, UserID: "u1", Text: "weather tomorrow?"}
	group := dm
	group.ChatType, group.Text = channels.Group, "hello all"
	noUser := dm
	noUser.UserID = ""
	plan := dm
	plan.Text = "/research the tides"
	tests := []struct {
		name     string
		in       channels.Inbound
		job      bool
		learning bool

		sources  []string
		sections []string
		skills   []string
		plan     bool
		scope    *memory.Scope
	}{
		{name: "a private message: skills, learned, delegate", in: dm, learning: true,
			sources: []string{"skills", "memory", "delegate:c1"}, sections: []string{"Skill: weather", "Profile", "Memories"},
			skills: []string{"weather"}, scope: &memory.Scope{Channel: "telegram", UserID: "u1", ChatID: 7}},
		{name: "a group message: no profile, the group's memories", in: group, learning: true,
			sources: []string{"skills", "memory", "delegate:c1"}, sections: []string{"Memories"},
			scope: &memory.Scope{Channel: "telegram", UserID: "u1", ChatID: 7, Group: true}},
		{name: "a job: no delegate", in: dm, job: true, learning: true,
			sources: []string{"skills", "memory"}, sections: []string{"Skill: weather", "Profile", "Memories"},
			skills: []string{"weather"}, scope: &memory.Scope{Channel: "telegram", UserID: "u1", ChatID: 7}},
		{name: "learning off: nothing learned", in: dm,
			sources: []string{"skills", "delegate:c1"}, sections: []string{"Skill: weather"}, skills: []string{"weather"}},
		{name: "no user: nothing learned", in: noUser, learning: true,
			sources: []string{"skills", "delegate:c1"}, sections: []string{"Skill: weather"}, skills: []string{"weather"}},
		{name: "a plan-mode command", in: plan,
			sources: []string{"skills", "delegate:c1"}, sections: []string{"Skill: research"}, skills: []string{"research"}, plan: true},
	}
	reg := registry(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			learned, profiles := &fakeLearned{}, &fakeProfiles{}
			a := New(Config{Skills: func(context.Context) *skills.Registry { return reg },
				Learning: tt.learning, Memory: learned, Profiles: profiles, Delegate: fakeDelegate{}})
			prepare := a.Message
			if tt.job {
				prepare = a.Job
			}
			p := prepare(t.Context(), tt.in, 7) // the chat the router read for the turn
			if got := names(p.Sources); !slices.Equal(got, tt.sources) {
				t.Errorf("sources = %q; want %q", got, tt.sources)
			}
			if got := titles(p.Sections); !slices.Equal(got, tt.sections) {
				t.Errorf("sections = %q; want %q", got, tt.sections)
			}
			if !slices.Equal(p.Skills, tt.skills) {
				t.Errorf("engaged skills = %q; want %q (never the always-on ones)", p.Skills, tt.skills)
			}
			if p.Plan != tt.plan {
				t.Errorf("plan = %v; want %v", p.Plan, tt.plan)
			}
			if p.Catalogue != reg.Catalogue(0) {
				t.Errorf("catalogue = %q; want the registry's", p.Catalogue)
			}
			switch {
			case tt.scope == nil && len(learned.scopes) > 0:
				t.Errorf("memories asked for %+v; want none", learned.scopes)
			case tt.scope != nil && (len(learned.scopes) != 1 || learned.scopes[0] != *tt.scope):
				t.Errorf("memory scopes = %+v; want [%+v]", learned.scopes, *tt.scope)
			}
			wantProfile := slices.Contains(tt.sections, "Profile")
			if got := len(profiles.users) == 1 && profiles.users[0] == store.UserKey("telegram", "u1"); got != wantProfile {
				t.Errorf("profile asked for %q; want it: %v", profiles.users, wantProfile)
			}
		})
	}
}

func TestWithoutSkillsOrDelegate(t *testing.T) {
	p := New(Config{}).Message(t.Context(), channels.Inbound{Channel: "console", ChatID: "c", UserID: "u"}, 1)
	if len(p.Sources) != 0 || len(p.Sections) != 0 || p.Skills != nil || p.Plan {
		t.Fatalf("prepared = %+v; want nothing added", p)
	}
}

func TestStaticOrder(t *testing.T) {
	src := func(name string) agent.Source { return agent.StaticSource{SourceName: name} }
	tests := []struct {
		name string
		in   StaticSources
		want []string
	}{
		{"everything", StaticSources{Web: src("web"), Files: src("files"), MCP: src("mcp"), Schedule: src("schedule")},
			[]string{"builtin", "channel", "web", "files", "mcp", "schedule"}},
		{"the machine's tools off", StaticSources{MCP: src("mcp"), Schedule: src("schedule")},
			[]string{"builtin", "channel", "mcp", "schedule"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := names(Static(tt.in)); !slices.Equal(got, tt.want) {
				t.Fatalf("static sources = %q; want %q", got, tt.want)
			}
		})
	}
}
