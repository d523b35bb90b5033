package gateway

import (
	"context"
	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/skills"
	"github.com/switchboard-gateway/switchboard/tools"
)

// webTools is the web_fetch / web_search source configured by tools.web.
func webTools(cfg *config.Config) agent.Source {
	w := cfg.Tools.Web
	redirects := w.MaxRedirects
	if redirects == 0 {
		redirects = -1 // tools.web.max_redirects: 0 follows none; the package reads 0 as its default
	}
	return tools.Web(tools.WebConfig{Enabled: w.Enabled, AllowHosts: w.AllowHosts, Timeout: w.Timeout,
		MaxBytes: w.MaxBytes, MaxChars: w.MaxChars, MaxRedirects: redirects,
		Search: tools.SearchConfig{Provider: w.Search.Provider, URL: w.Search.URL, APIKey: w.Search.APIKey}})
}

// fileTools is the workspace file tool source configured by tools.files.
// The files that the skills' command tools (with command tools on) and the
// MCP servers' commands run or name are read-only to it: the default
// folders are the same, and a model that could rewrite a script would
// choose what the next command, or the server's next start, runs.
func fileTools(cfg *config.Config, current func() *skills.Registry) agent.Source {
	f := cfg.Tools.Files
	// paths is what of finds in the command lines: the command tools'
	// (while they are on) and the MCP servers'.
	paths := func(ofSkills func(*skills.Registry, string) []string, of func(string, []string) []string) func() []string {
		return func() []string {
			var out []string
			if cfg.Tools.Command.Enabled {
				out = ofSkills(current(), cfg.Tools.Command.Workspace)
			}
			for _, s := range cfg.MCP.Servers {
				out = append(out, of("", s.Command)...)
			}
			return out
		}
	}
	// The folders and extensions of the scripts they run are read-only to
	// it too: python3 scripts/report.py would import scripts/json.py.
	protected := paths((*skills.Registry).CommandFiles, skills.ArgvFiles)
	scripts := paths((*skills.Registry).CommandScripts, skills.ArgvScripts)
	return tools.Files(tools.FilesConfig{Enabled: f.Enabled, Root: f.Root, PerChat: f.PerChat, MaxBytes: f.MaxBytes,
		Protected: protected, Scripts: scripts})
}

// transcriber returns the voice transcription hook, or nil when no
// transcription model is configured.
func transcriber(model *llm.Client, name string) func(context.Context, string, []byte) (string, error) {
	if name == "" {
		return nil
	}
	return func(ctx context.Context, file string, audio []byte) (string, error) {
		return model.Transcribe(ctx, name, file, audio)
	}
}
