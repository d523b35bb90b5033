package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"switchboard/config"
	"switchboard/gateway"
	"switchboard/skills"
)

// check prints what would run, with secrets redacted.
func check(cfg *config.Config, out io.Writer) int {
	r := cfg.Redacted()
	fmt.Fprintf(out, "configuration OK\n")
	fmt.Fprintf(out, "model:    %s at %s (context %d tokens", r.LLM.Model, r.LLM.BaseURL, r.LLM.ContextWindow)
	if len(r.LLM.FallbackModels) > 0 {
		fmt.Fprintf(out, ", fallbacks %v", r.LLM.FallbackModels)
	}
	fmt.Fprintf(out, ")\nstore:    %s %s\n", r.Store.Driver, r.Store.Source())
	if id := gateway.ReplicaID(cfg); id != "" {
		fmt.Fprintf(out, "cluster:  replica %s, leases for %s, polling every %s (replicas on this database share its chats)\n",
			id, cfg.Cluster.LeaseTTL, cfg.Cluster.PollInterval)
	}
	fmt.Fprintf(out, "agent:    %s, max %d steps, %d concurrent turns, zone %s\n", r.Agent.Name, r.Agent.MaxSteps, r.Agent.MaxConcurrentTurns, r.Agent.Timezone)
	fmt.Fprintf(out, "channels: console (switchboard chat)")
	if r.Channels.Telegram.Enabled {
		fmt.Fprintf(out, ", telegram (%d allowed users)", len(r.Channels.Telegram.AllowUsers))
	}
	if r.Channels.Discord.Enabled {
		fmt.Fprintf(out, ", discord (%d allowed users)", len(r.Channels.Discord.AllowUsers))
	}
	fmt.Fprintln(out)
	cmd := cfg.Tools.Command
	reg := skills.Load(os.DirFS(cfg.Skills.Dir), skills.Builtin(), skills.Env{Command: skills.CommandPolicy{
		Enabled: cmd.Enabled, Workspace: cmd.Workspace, Timeout: cmd.Timeout, MaxOutputChars: cmd.MaxOutputChars}})
	var names []string
	for _, s := range reg.Skills() {
		names = append(names, s.Name)
	}
	fmt.Fprintf(out, "skills:   %d from %s and built in: %s\n", len(names), cfg.Skills.Dir, strings.Join(names, ", "))
	if cmd.Enabled {
		fmt.Fprintf(out, "commands: enabled, confined to %s\n", cmd.Workspace)
	}
	for _, m := range r.MCP.Servers {
		where := m.URL
		if where == "" {
			where = strings.Join(m.Command, " ")
		}
		fmt.Fprintf(out, "mcp:      %s (%s)\n", m.Name, where)
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(out, "warning:  %s\n", w)
	}
	if probs := reg.Problems(); len(probs) > 0 {
		for _, p := range probs {
			fmt.Fprintf(out, "error:    %s\n", p)
		}
		fmt.Fprintf(out, "%d skill problem(s): those skills are skipped until fixed\n", len(probs))
		return ExitConfig
	}
	return ExitOK
}
