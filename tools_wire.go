package main

import (
	"switchboard/agent"
	"switchboard/config"
	"switchboard/skills"
	"switchboard/tools"
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
// With command tools on, the files the skills' command tools run or name
// (skills.Registry.CommandFiles) are read-only to it: the default folders
// are the same, and a model that could rewrite a script would choose what
// the next command runs.
func fileTools(cfg *config.Config, current func() *skills.Registry) agent.Source {
	f := cfg.Tools.Files
	var protected func() []string
	if cfg.Tools.Command.Enabled {
		protected = func() []string { return current().CommandFiles(cfg.Tools.Command.Workspace) }
	}
	return tools.Files(tools.FilesConfig{Enabled: f.Enabled, Root: f.Root, PerChat: f.PerChat, MaxBytes: f.MaxBytes,
		Protected: protected})
}
