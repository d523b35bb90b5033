package skills

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/llm"
)

// UseSkillTool is the name of the tool that loads an auto skill.
const UseSkillTool = "use_skill"

// alwaysAllowed stay available under any skill's allowlist: the model must
// be able to reply and to load another skill.
var alwaysAllowed = []string{"send_message", UseSkillTool}

// Turn is the skills side of one turn: which skills are active, the tools
// they bring, and their rules. It implements agent.RuleSource. It is built
// from one registry, so a reload during the turn does not affect it.
type Turn struct {
	reg      *Registry
	channel  string
	chatType string

	initial []string // active from the start (always, trigger, command)
	command *Skill   // the skill whose command started the turn, if any
	args    string
	useTool *agent.Tool
}

// ForTurn decides which skills start active for a message: the always-on
// skills, those whose trigger matches, and the one whose /command it is.
func (r *Registry) ForTurn(channel, chatType, text string) *Turn {
	t := &Turn{reg: r, channel: channel, chatType: chatType}
	cmd, args := "", ""
	if strings.HasPrefix(strings.TrimSpace(text), "/") {
		first, rest, _ := strings.Cut(strings.TrimSpace(text)[1:], " ")
		cmd, _, _ = strings.Cut(first, "@")
		cmd, args = strings.ToLower(cmd), strings.TrimSpace(rest)
	}
	for _, s := range r.skills {
		if !s.Applies(channel, chatType) {
			continue
		}
		on := s.Activation == Always
		if cmd != "" && s.Command == cmd {
			on, t.command, t.args = true, s, args
		}
		for _, re := range r.triggers[s.Name] {
			if re.MatchString(text) {
				on = true
			}
		}
		if on {
			t.initial = append(t.initial, s.Name)
		}
	}
	return t
}

// Command returns the skill whose command started the turn and the
// command's arguments.
func (t *Turn) Command() (*Skill, string, bool) {
	return t.command, t.args, t.command != nil
}

// Active lists the skills active from the start of the turn.
func (t *Turn) Active() []string { return slices.Clone(t.initial) }

// ActiveIn lists the active skills given the turn so far: those active from
// the start, then those loaded by successful use_skill calls in history, in
// order. Deriving it from the transcript keeps the tool set a pure function
// of the turn, and a turn resumed after a restart gets the same skills.
func (t *Turn) ActiveIn(history []llm.Message) []string {
	active := slices.Clone(t.initial)
	calls := map[string]string{} // call id → skill name
	for _, m := range history {
		for _, c := range m.ToolCalls {
			if c.Name != UseSkillTool {
				continue
			}
			var a struct {
				Name string `json:"name"`
			}
			if json.Unmarshal([]byte(c.Arguments), &a) == nil {
				calls[c.ID] = a.Name
			}
		}
		if m.Role != llm.RoleTool {
			continue
		}
		name, ok := calls[m.ToolCallID]
		if !ok || strings.HasPrefix(m.Content, "error") || slices.Contains(active, name) {
			continue
		}
		if _, known := t.reg.byName[name]; known {
			active = append(active, name)
		}
	}
	return active
}

// Sections returns the instructions of the skills active from the start
// that are not already in the static prompt prefix.
func (t *Turn) Sections() []agent.Section {
	var out []agent.Section
	for _, name := range t.initial {
		s := t.reg.byName[name]
		if s.Activation == Always && s.unrestricted() {
			continue // in the static prefix
		}
		if strings.TrimSpace(s.Instructions) == "" {
			continue
		}
		out = append(out, agent.Section{Title: "Skill: " + s.Name, Body: s.Instructions})
	}
	return out
}

// MaxSteps is the largest step cap the skills active from the start ask
// for (0: none).
func (t *Turn) MaxSteps() int {
	n := 0
	for _, name := range t.initial {
		n = max(n, t.reg.byName[name].MaxSteps)
	}
	return n
}

// Name implements agent.Source.
func (t *Turn) Name() string { return "skills" }

// Tools implements agent.Source: use_skill while auto skills can still be
// loaded, and the tools the active skills define.
func (t *Turn) Tools(info agent.TurnInfo) []*agent.Tool {
	active := t.ActiveIn(info.History)
	var out []*agent.Tool
	if names := t.loadable(); len(names) > 0 {
		if t.useTool == nil {
			t.useTool = t.useSkill(names) // the same names all turn long
		}
		out = append(out, t.useTool)
	}
	for _, name := range active {
		out = append(out, t.reg.tools[name]...)
	}
	return out
}

// loadable lists the auto skills that apply here, by name.
func (t *Turn) loadable() []string {
	var out []string
	for _, s := range t.reg.skills {
		if s.Activation == Auto && s.Applies(t.channel, t.chatType) {
			out = append(out, s.Name)
		}
	}
	return out
}

// Rules implements agent.RuleSource: the active skills' rules, and their
// allowlists united when any skill the turn activated has one (an
// always-on skill's allowlist does not narrow).
func (t *Turn) Rules(info agent.TurnInfo) agent.ToolRules {
	var rules agent.ToolRules
	var allow []string
	restricted := false
	for _, name := range t.ActiveIn(info.History) {
		s := t.reg.byName[name]
		r := s.ToolRules
		rules = rules.Merge(agent.ToolRules{Terminal: r.Terminal, RequiredBeforeExit: r.RequiredBeforeExit,
			MaxCount: r.MaxCount, Children: r.Children})
		// An always-on skill is in every turn: its tools: list would narrow
		// every turn's tools, not its own, so it does not narrow (check
		// says so). The skills a turn activates (command, trigger,
		// use_skill) narrow that turn.
		if len(s.Tools) > 0 && s.Activation != Always {
			restricted = true
			allow = append(allow, s.Tools...)
		}
		for _, tool := range t.reg.tools[name] {
			allow = append(allow, tool.Name)
		}
	}
	if restricted {
		rules.Allow = union(allow, alwaysAllowed)
	}
	return rules
}

func union(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

func (t *Turn) useSkill(names []string) *agent.Tool {
	enum, _ := json.Marshal(names)
	params := json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"name":{"type":"string","enum":%s,"description":"the skill to load"}},"required":["name"],"additionalProperties":false}`, enum))
	tool := &agent.Tool{
		Name:        UseSkillTool,
		Description: "Load a skill from the catalogue: returns its instructions, and its tools become available from the next step.",
		Parameters:  params,
		Source:      "skills",
		Fn: func(_ context.Context, args json.RawMessage) (string, error) {
			var a struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal(args, &a); err != nil {
				return "", fmt.Errorf("bad arguments: %w", err)
			}
			s, ok := t.reg.byName[a.Name]
			if !ok || !slices.Contains(names, a.Name) {
				return "", fmt.Errorf("no skill %q here; available: %s", a.Name, strings.Join(names, ", "))
			}
			var b strings.Builder
			fmt.Fprintf(&b, "# Skill: %s\n%s\n", s.Name, strings.TrimSpace(s.Instructions))
			var tools []string
			for _, tool := range t.reg.tools[s.Name] {
				tools = append(tools, tool.Name)
			}
			tools = append(tools, s.Tools...)
			if len(tools) > 0 {
				fmt.Fprintf(&b, "\nTools of this skill: %s\n", strings.Join(tools, ", "))
			}
			return strings.TrimSpace(b.String()), nil
		},
	}
	if err := tool.Compile(); err != nil {
		panic(err) // the schema above is fixed and valid
	}
	return tool
}

var _ agent.RuleSource = (*Turn)(nil)
