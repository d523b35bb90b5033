package gateway

import (
	"fmt"

	"switchboard/mcpclient"
	"switchboard/skills"
)

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
