// Package assembly decides what one turn gets: its tool sources, its
// skills, and the profile and memory sections of its prompt. It is the one
// place to read to answer "what does this turn get, and why".
//
// Every turn (a chat message's, a scheduled task's, a plan step's, a
// background task's) starts with the agent's Static sources. On top of
// them the router asks, once at the start of a turn:
//
//	                     message  job
//	skills (active)        ✓       ✓   tools, prompt sections, step cap,
//	                                   catalogue, plan mode, engaged skills
//	profile (DM only)      ✓       ✓   when learning is on and there is a user
//	recalled memories      ✓       ✓   when learning is on and there is a user
//	memory tools           ✓       ✓   when learning is on and there is a user
//	delegate               ✓       –   a background task is a chat's, not a job's
//
// A tool name offered by two sources goes to the first (agent.BuildTools):
// the order below is the priority.
package assembly

import (
	"context"
	"log/slog"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/memory"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/skills"
	"github.com/switchboard-gateway/switchboard/store"
)

// StaticSources are the tool sources every turn starts with; nil entries
// are left out.
type StaticSources struct {
	Location *time.Location // the builtin clock tools' zone
	Web      agent.Source   // web_fetch, web_search (tools.web)
	Files    agent.Source   // the file tools (tools.files)
	MCP      agent.Source   // the MCP servers' tools
	Schedule agent.Source   // reminders and scheduled tasks
}

// Static returns the agent's tool sources in priority order: builtin
// (time, send_message…), the channel's own (send_file, react…), web,
// files, MCP, schedule.
func Static(s StaticSources) []agent.Source {
	out := []agent.Source{agent.Builtin(nil, s.Location), agent.ChannelContext()}
	for _, src := range []agent.Source{s.Web, s.Files, s.MCP, s.Schedule} {
		if src != nil {
			out = append(out, src)
		}
	}
	return out
}

// Memory is what the learned memories give a turn (memory.Service).
type Memory interface {
	Section(ctx context.Context, sc memory.Scope, text string) (agent.Section, bool)
	Tools(sc memory.Scope) agent.Source
}

// Profiles is what a user's learned profile gives a turn (profile.Service).
type Profiles interface {
	Section(ctx context.Context, user string, now time.Time) (agent.Section, bool)
}

// Delegate makes the delegate tool bound to a chat (delegate.Tasks).
type Delegate interface {
	Source(in channels.Inbound) agent.Source
}

// Config is what an Assembler draws from.
type Config struct {
	// Skills returns the skill registry in force (files with the learned
	// overlay), read once per turn.
	Skills func(ctx context.Context) *skills.Registry
	// Learning adds the profile, recalled memories and the memory tools
	// (learning.enabled); Memory and Profiles are needed with it.
	Learning bool
	Memory   Memory
	Profiles Profiles
	// Delegate adds the delegate tool to message turns; nil: none.
	Delegate Delegate
	Now      func() time.Time // the profile's clock; nil: time.Now
	Logger   *slog.Logger
}

// Assembler decides what each turn gets. Its Message and Job methods are
// the router's Prepare and PrepareJob hooks.
type Assembler struct {
	cfg Config
	log *slog.Logger
}

// New returns an Assembler.
func New(cfg Config) *Assembler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Assembler{cfg: cfg, log: log.With("component", "assembly")}
}

// Message is what the turn answering a chat message gets; chatID is its
// stored chat, as the router read it for the turn (the scope of its
// memories).
func (a *Assembler) Message(ctx context.Context, in channels.Inbound, chatID int64) router.Prepared {
	p := a.common(ctx, in, chatID)
	if a.cfg.Delegate != nil {
		p.Sources = append(p.Sources, a.cfg.Delegate.Source(in))
	}
	return p
}

// Job is what a scheduled task's turn gets: as a message, without the
// delegate tool. in is the job's made-up message (router.RunJob).
func (a *Assembler) Job(ctx context.Context, in channels.Inbound, chatID int64) router.Prepared {
	return a.common(ctx, in, chatID)
}

// common is what every routed turn gets: the active skills, then what was
// learned.
func (a *Assembler) common(ctx context.Context, in channels.Inbound, chatID int64) router.Prepared {
	var p router.Prepared
	if a.cfg.Skills != nil {
		p = withSkills(a.cfg.Skills(ctx), in)
	}
	a.learned(ctx, in, chatID, &p)
	return p
}

// withSkills is what the skills active for the message give the turn:
// their tools (use_skill included), prompt sections, step cap and the
// catalogue; a plan-mode command skill makes the turn a plan. The engaged
// skills (command, trigger; not the always-on ones) go to the after-turn
// skill review with the turn's EventDone.
func withSkills(reg *skills.Registry, in channels.Inbound) router.Prepared {
	turn := reg.ForTurn(in.Channel, string(in.ChatType), in.Text)
	cmdSkill, _, isCmd := turn.Command()
	p := router.Prepared{Sources: []agent.Source{turn}, Sections: turn.Sections(),
		MaxSteps: turn.MaxSteps(), Catalogue: reg.Catalogue(0), Plan: isCmd && cmdSkill.Mode == "plan"}
	for _, name := range turn.Active() {
		if s, ok := reg.Get(name); ok && s.Activation != skills.Always {
			p.Skills = append(p.Skills, name)
		}
	}
	return p
}

// learned adds what was learned, when learning is on and the turn has a
// user: in private chats the user's profile, then the memories relevant to
// the message (the user's in private chats, the group's in groups), and
// the memory tools bound to that scope. chatID is the turn's stored chat,
// which the router read once for the turn.
func (a *Assembler) learned(ctx context.Context, in channels.Inbound, chatID int64, p *router.Prepared) {
	if !a.cfg.Learning || in.UserID == "" {
		return
	}
	sc := memory.Scope{Channel: in.Channel, UserID: in.UserID, ChatID: chatID, Group: in.ChatType == channels.Group}
	if !sc.Group {
		if sec, ok := a.cfg.Profiles.Section(ctx, store.UserKey(in.Channel, in.UserID), a.cfg.Now()); ok {
			p.Sections = append(p.Sections, sec)
		}
	}
	if sec, ok := a.cfg.Memory.Section(ctx, sc, in.Text); ok {
		p.Sections = append(p.Sections, sec)
	}
	p.Sources = append(p.Sources, a.cfg.Memory.Tools(sc))
}
