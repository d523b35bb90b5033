package router

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/store"
)

// fakeLearning keeps memories and a profile per (chat type, user).
type fakeLearning struct {
	mu       sync.Mutex
	mem      []store.Memory
	profile  []store.ProfileEntry
	calls    []string
	forgotID []int64
}

func (f *fakeLearning) call(s string) {
	f.mu.Lock()
	f.calls = append(f.calls, s)
	f.mu.Unlock()
}

func (f *fakeLearning) Memories(_ context.Context, in channels.Inbound) ([]store.Memory, error) {
	f.call("memories " + string(in.ChatType) + " " + in.UserID)
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.mem), nil
}

func (f *fakeLearning) ForgetMemory(_ context.Context, in channels.Inbound, id int64) (bool, error) {
	f.call("forget " + in.UserID)
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.IndexFunc(f.mem, func(m store.Memory) bool { return m.ID == id })
	if i < 0 {
		return false, nil
	}
	f.forgotID = append(f.forgotID, id)
	f.mem = slices.Delete(f.mem, i, i+1)
	return true, nil
}

func (f *fakeLearning) Profile(_ context.Context, in channels.Inbound) ([]store.ProfileEntry, error) {
	f.call("profile " + in.UserID)
	return f.profile, nil
}

func (f *fakeLearning) ForgetProfile(_ context.Context, in channels.Inbound, dim string) (int64, error) {
	f.call("forget profile " + dim)
	return 1, nil
}

func TestMemoryAndProfileCommands(t *testing.T) {
	e := newEnv(t, 4, everyone)
	day := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	fl := &fakeLearning{
		mem: []store.Memory{{ID: 3, Text: "Is allergic to peanuts"}, {ID: 7, Text: "Lives in Lisbon"}},
		profile: []store.ProfileEntry{{Dimension: store.ProfileName, Value: "Ada", CreatedAt: day},
			{Dimension: store.ProfileTimezone, Value: "Europe/Lisbon", CreatedAt: day}},
	}
	e.r.cfg.Learning = fl

	steps := []struct {
		in   channels.Inbound
		want []string // substrings of the reply
	}{
		{msg("d1", "u1", "/memory"), []string{"What I remember about you:\n3. Is allergic to peanuts\n7. Lives in Lisbon\n", "/memory forget N"}},
		{msg("d1", "u1", "/memory forget 3"), []string{"Forgotten: 3."}},
		{msg("d1", "u1", "/memory forget 3"), []string{"There is no memory 3 about you"}},
		{msg("d1", "u1", "/memory forget three"), []string{"with a number from /memory"}},
		{msg("d1", "u1", "/profile"), []string{"- Name: Ada (since 1 Mar 2026)\n- Time zone: Europe/Lisbon (since 1 Mar 2026)"}},
		{msg("d1", "u1", "/profile forget timezone"), []string{"Forgot your time zone."}},
		{msg("d1", "u1", "/profile forget shoe_size"), []string{"one of name, language, timezone"}},
		{msg("d1", "u1", "/help"), []string{"/status", "/memory — what I remember"}},
	}
	for i, s := range steps {
		e.deliver(t, s.in)
		e.waitSent(t, 1)
		got := e.ch.Texts()[i]
		for _, w := range s.want {
			if !strings.Contains(got, w) {
				t.Errorf("%q: reply %q lacks %q", s.in.Text, got, w)
			}
		}
	}

	// In a group: only the group's memories, and never a profile.
	g := msg("g1", "u1", "/profile")
	g.ChatType = channels.Group
	e.deliver(t, g)
	e.waitSent(t, 1)
	if got := e.ch.Texts()[len(steps)]; !strings.Contains(got, "send /profile in a private chat") {
		t.Errorf("group /profile = %q", got)
	}
	g = msg("g1", "u1", "/memory forget all")
	g.ChatType = channels.Group
	e.deliver(t, g)
	e.waitSent(t, 1)
	if got := e.ch.Texts()[len(steps)+1]; got != "Forgot 1 memories about this group." {
		t.Errorf("group /memory forget all = %q", got)
	}
	fl.mu.Lock()
	calls := slices.Clone(fl.calls)
	fl.mu.Unlock()
	if n := countOf(calls, "profile u1"); n != 1 {
		t.Errorf("profile read %d times, want once (the private /profile, not the group's): %q", n, calls)
	}
	if !slices.Contains(calls, "memories group u1") {
		t.Errorf("calls %q: the group listing must ask with the group chat type", calls)
	}
	if len(e.runner.Turns) != 0 {
		t.Errorf("commands started %d agent turns", len(e.runner.Turns))
	}
	pending, _ := e.st.PendingInbox(e.ctx)
	if len(pending) != 0 {
		t.Errorf("%d command messages left pending", len(pending))
	}
}

// Without learning, /memory is ordinary text for the agent (a skill may own it).
func TestMemoryCommandWithoutLearning(t *testing.T) {
	e := newEnv(t, 4, everyone)
	e.deliver(t, msg("d1", "u1", "/memory"))
	e.waitSent(t, 1)
	if got := e.ch.Texts(); !slices.Equal(got, []string{"echo: /memory"}) {
		t.Errorf("sent %q, want the agent's answer", got)
	}
	e.deliver(t, msg("d1", "u1", "/help"))
	e.waitSent(t, 1)
	if got := e.ch.Texts()[1]; strings.Contains(got, "/memory") {
		t.Errorf("/help mentions /memory without learning: %q", got)
	}
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}
