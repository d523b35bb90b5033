package gateway

import (
	"context"
	"fmt"

	"switchboard/agent"
	"switchboard/channels"
	"switchboard/mcpclient"
	"switchboard/router"
	"switchboard/skills"
)

// prepareTurn is the router's Prepare hook: what a turn gets besides the
// static tool sources. The skills active for the message (with the
// learned overlay) add their tools, prompt sections, step limit and
// catalogue, a plan-mode command skill makes the turn a plan, and the
// learner adds the profile, the memories and the memory tools.
func prepareTurn(lrn *learner, watcher *skills.Watcher) func(ctx context.Context, in channels.Inbound) router.Prepared {
	return func(ctx context.Context, in channels.Inbound) router.Prepared {
		reg := lrn.skills(ctx, watcher.Current())
		turn := reg.ForTurn(in.Channel, string(in.ChatType), in.Text)
		cmdSkill, _, isCmd := turn.Command()
		p := router.Prepared{Sources: []agent.Source{turn}, Sections: turn.Sections(),
			MaxSteps: turn.MaxSteps(), Catalogue: reg.Catalogue(0), Plan: isCmd && cmdSkill.Mode == "plan"}
		lrn.prepare(ctx, in, reg, turn, &p)
		return p
	}
}

// statusNotes is the router's StatusNotes hook: the skill problems and the
// MCP servers that are not connected, for /status.
func statusNotes(watcher *skills.Watcher, mcp *mcpclient.Manager) func() []string {
	return func() []string {
		var notes []string
		for _, p := range watcher.Current().Problems() {
			notes = append(notes, "Skill problem: "+p.Error())
		}
		for _, m := range mcp.Status() {
			if !m.Connected {
				notes = append(notes, fmt.Sprintf("MCP server %s is not connected: %s", m.Name, m.LastError))
			}
		}
		return notes
	}
}
