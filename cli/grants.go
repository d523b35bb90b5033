package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/skills"
)

// skillGrantFindings says, per skill that asks for anything (hosts,
// variables, commands, always-on instructions), what it asks for and what
// skills.grants gives it. A skill asking for more than it is granted is
// not offered: a warning (serve runs without it), with what it lacks. A
// grant naming no skill is a warning too.
func skillGrantFindings(cfg *config.Config, reg *skills.Registry) []Finding {
	var found []Finding
	withheld := map[string][]error{}
	all := slices.Clone(reg.Skills())
	for _, w := range reg.Withheld() {
		withheld[w.Skill.Name] = w.Lacks
		all = append(all, w.Skill)
	}
	slices.SortFunc(all, func(a, b *skills.Skill) int { return strings.Compare(a.Name, b.Name) })
	for _, s := range all {
		n := s.Needs()
		g := cfg.Skills.Grants[s.Name]
		var asks []string
		if len(n.Hosts) > 0 {
			asks = append(asks, "hosts "+strings.Join(n.Hosts, ", "))
		}
		if len(n.Env) > 0 {
			asks = append(asks, "variables "+strings.Join(n.Env, ", "))
		}
		if len(n.Commands) > 0 {
			asks = append(asks, "runs "+strings.Join(n.Commands, "; "))
		}
		if n.AlwaysOn {
			asks = append(asks, "always-on instructions (in every turn's prompt)")
		}
		if len(asks) == 0 && len(s.Tools) == 0 {
			continue
		}
		msg := fmt.Sprintf("skill %s (%s) asks for: %s", s.Name, s.File, strings.Join(asks, "; "))
		if len(asks) == 0 {
			msg = fmt.Sprintf("skill %s (%s) asks for nothing beyond its instructions", s.Name, s.File)
		}
		msg += "; granted: " + grantText(g)
		if len(s.Tools) > 0 {
			if s.Activation == skills.Always {
				msg += fmt.Sprintf("; its tools: [%s] does not narrow turns (an always-on skill is in every turn)", strings.Join(s.Tools, ", "))
			} else {
				msg += fmt.Sprintf("; while active, its turns offer only [%s], the active skills' own tools, send_message and use_skill", strings.Join(s.Tools, ", "))
			}
		}
		lacks, ok := withheld[s.Name]
		if !ok {
			found = append(found, Finding{Where: "skills", Message: msg})
			continue
		}
		var b strings.Builder
		for _, p := range lacks {
			b.WriteString("\n                  " + p.Error())
		}
		found = append(found, Finding{SevWarn, "skills", msg + "; NOT OFFERED: it asks for more than it is granted:" + b.String(),
			fmt.Sprintf("if you trust the skill, grant what it needs under skills.grants.%s (hosts, env); the gateway's own secrets are never granted", s.Name)})
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Skills.Grants)) {
		if _, ok := reg.Get(name); !ok && withheld[name] == nil {
			found = append(found, Finding{SevWarn, "skills", fmt.Sprintf("skills.grants.%s names no loaded skill", name),
				"check the skill's name: field, or remove the grant"})
		}
	}
	return found
}

func grantText(g config.SkillGrant) string {
	var parts []string
	if len(g.Hosts) > 0 {
		parts = append(parts, "hosts "+strings.Join(g.Hosts, ", "))
	}
	if len(g.Env) > 0 {
		parts = append(parts, "variables "+strings.Join(g.Env, ", "))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}
