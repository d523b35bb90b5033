package skills

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/config"

	"go.yaml.in/yaml/v3"
)

// DefaultCatalogueChars bounds the skill catalogue in the static prompt:
// enough for a few dozen one-line entries, small next to any context.
const DefaultCatalogueChars = 3000

// Registry is an immutable set of loaded skills. Turns hold the registry
// they started with, so a reload never changes a turn in flight.
type Registry struct {
	skills   []*Skill // by name
	byName   map[string]*Skill
	tools    map[string][]*agent.Tool // skill name → its defined tools
	triggers map[string][]*regexp.Regexp
	problems []error
	// withheld are the skills not offered because they ask for more than
	// they are granted, with what they lack.
	withheld []Withheld
	version  string
}

// Skills lists the loaded skills by name.
func (r *Registry) Skills() []*Skill { return r.skills }

// Get returns a skill by name.
func (r *Registry) Get(name string) (*Skill, bool) {
	s, ok := r.byName[name]
	return s, ok
}

// Problems lists what was wrong in the files; the skills concerned were
// skipped (or, for a bad tool definition, loaded without that tool).
func (r *Registry) Problems() []error { return r.problems }

// Withheld is a valid skill that is not offered because its tools ask for
// a host or a variable the operator has not granted it (skills.grants).
type Withheld struct {
	Skill *Skill
	Lacks []error // *Problem: each host or variable, with file and line
}

// Withheld lists the skills not offered for lack of a grant, by name.
func (r *Registry) Withheld() []Withheld { return r.withheld }

// Version identifies the files the registry was loaded from.
func (r *Registry) Version() string { return r.version }

// Load reads the skills of dir (may be nil) over the built-in ones; a skill
// in dir with a built-in's name replaces it. It never fails as a whole:
// invalid skills are skipped and reported in Problems.
func Load(dir, builtin fs.FS, env Env) *Registry {
	var files []file
	var problems []error
	bf, err := readFiles(builtin, "builtin:")
	if err != nil {
		problems = append(problems, fmt.Errorf("skills: read built-in skills: %w", err))
	}
	uf, err := readFiles(dir, "")
	if err != nil {
		problems = append(problems, fmt.Errorf("skills: read skills folder: %w", err))
	}
	files = append(bf, uf...)
	r := build(files, env)
	r.problems = append(problems, r.problems...)
	return r
}

func build(files []file, env Env) *Registry {
	r := &Registry{byName: map[string]*Skill{}, tools: map[string][]*agent.Tool{},
		triggers: map[string][]*regexp.Regexp{}, version: fingerprint(files)}
	origin := map[string]string{}
	nodes := map[string]*yaml.Node{} // by skill name: where its fields are
	for _, f := range files {
		decode := decodeYAML
		if f.md {
			decode = decodeMarkdown
		}
		s, node, errs := decode(f)
		if s != nil {
			errs = append(errs, validate(s, node, f.name)...)
		}
		if len(errs) > 0 {
			r.problems = append(r.problems, errs...)
			continue
		}
		s.File = f.name
		s.Builtin = strings.HasPrefix(f.name, "builtin:")
		if prev, dup := origin[s.Name]; dup {
			if !strings.HasPrefix(prev, "builtin:") || s.Builtin {
				r.problems = append(r.problems, &Problem{File: f.name, Field: "name",
					Msg: fmt.Sprintf("skill %q is also defined in %s; this one is skipped", s.Name, prev)})
				continue
			}
			// A user file overrides the built-in skill of the same name.
		}
		origin[s.Name] = f.name
		r.byName[s.Name] = s
		nodes[s.Name] = node
	}
	// Commands must be unique across the skills that remain.
	commands := map[string]string{}
	for _, name := range sortedKeys(r.byName) {
		s := r.byName[name]
		if s.Command == "" {
			continue
		}
		if other, dup := commands[s.Command]; dup {
			r.problems = append(r.problems, &Problem{File: s.File, Field: "command",
				Msg: fmt.Sprintf("/%s is also the command of skill %q; this skill is skipped", s.Command, other)})
			delete(r.byName, name)
			continue
		}
		commands[s.Command] = name
	}
	for _, name := range sortedKeys(r.byName) {
		s := r.byName[name]
		var built []*agent.Tool
		var lacks []error
		for i, d := range s.DefineTools {
			t, err := d.Build("skill:"+s.Name, env)
			at := &Problem{File: s.File, Line: lineOf(nodes[name], "define_tools", i), Field: fmt.Sprintf("define_tools[%d]", i)}
			ges, ungranted := grantErrors(err)
			switch {
			case err == nil:
				built = append(built, t)
			case ungranted:
				for _, ge := range ges {
					p := *at
					p.Line = lineOf(nodes[name], append([]any{"define_tools", i}, grantPath(ge.Field)...)...)
					p.Msg = fmt.Sprintf("tool %q: %s", d.Name, ge.Error())
					lacks = append(lacks, &p)
				}
			default:
				at.Msg = fmt.Sprintf("tool %q: %v; the tool is left out", d.Name, err)
				r.problems = append(r.problems, at)
			}
		}
		if len(lacks) > 0 {
			// Neither its instructions nor any of its tools: a skill that
			// asks for more than it has is not offered at all.
			r.withheld = append(r.withheld, Withheld{Skill: s, Lacks: lacks})
			delete(r.byName, name)
			continue
		}
		r.skills = append(r.skills, s)
		r.tools[name] = built
		for _, tr := range s.Triggers {
			re, _ := compileTrigger(tr) // validated
			r.triggers[name] = append(r.triggers[name], re)
		}
	}
	return r
}

// grantPath is the YAML path of a definition field ("url",
// "headers.X-Key") for lineOf.
func grantPath(field string) []any {
	first, rest, ok := strings.Cut(field, ".")
	if !ok {
		return []any{first}
	}
	return []any{first, rest}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Applies reports whether s applies to a chat on this channel and type.
func (s *Skill) Applies(channel, chatType string) bool {
	return (len(s.Channels) == 0 || slices.Contains(s.Channels, channel)) &&
		(len(s.ChatTypes) == 0 || slices.Contains(s.ChatTypes, chatType))
}

// where describes a restricted skill's scope for the catalogue.
func (s *Skill) where() string {
	var parts []string
	if len(s.Channels) > 0 {
		parts = append(parts, strings.Join(s.Channels, ", "))
	}
	if len(s.ChatTypes) > 0 {
		parts = append(parts, strings.Join(s.ChatTypes, ", ")+" only")
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// unrestricted skills apply everywhere.
func (s *Skill) unrestricted() bool { return len(s.Channels) == 0 && len(s.ChatTypes) == 0 }

// Catalogue is the skills part of the static prompt prefix: the
// instructions of unrestricted always-on skills, then the auto skills by
// name and description within maxChars. It depends only on the registry.
func (r *Registry) Catalogue(maxChars int) string {
	if maxChars <= 0 {
		maxChars = DefaultCatalogueChars
	}
	var b strings.Builder
	for _, s := range r.skills {
		if s.Activation == Always && s.unrestricted() && strings.TrimSpace(s.Instructions) != "" {
			fmt.Fprintf(&b, "## %s\n%s\n\n", s.Name, strings.TrimSpace(s.Instructions))
		}
	}
	var list strings.Builder
	omitted := 0
	for _, s := range r.skills {
		if s.Activation != Auto {
			continue
		}
		line := fmt.Sprintf("- %s%s: %s\n", s.Name, s.where(), oneLine(s.Description))
		if list.Len()+len(line) > maxChars {
			omitted++
			continue
		}
		list.WriteString(line)
	}
	if list.Len() > 0 {
		b.WriteString("Skills you can load with the use_skill tool when a request fits one (its instructions and tools then become available):\n")
		b.WriteString(list.String())
		if omitted > 0 {
			fmt.Fprintf(&b, "(%d more skills not listed)\n", omitted)
		}
	}
	var cmds []string
	for _, s := range r.skills {
		if s.Command != "" {
			cmds = append(cmds, "/"+s.Command)
		}
	}
	if len(cmds) > 0 {
		fmt.Fprintf(&b, "\nSkill commands users may type: %s\n", strings.Join(cmds, ", "))
	}
	return strings.TrimSpace(b.String())
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Watcher reloads the skills folder when its files change. Current is
// cheap enough to call at the start of every turn: it reads the folder's
// files and rebuilds only when their content changed.
type Watcher struct {
	dir     fs.FS
	builtin fs.FS
	env     Env
	log     *slog.Logger

	// builtinFiles are the built-in skills' files, read once: they are
	// embedded in the binary and never change.
	builtinFiles []file
	builtinErr   error

	mu      sync.Mutex
	current *Registry
}

// NewWatcher loads the skills now and returns a watcher.
func NewWatcher(dir, builtin fs.FS, env Env, log *slog.Logger) *Watcher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{dir: dir, builtin: builtin, env: env, log: log}
	w.builtinFiles, w.builtinErr = readFiles(builtin, "builtin:")
	w.current = Load(dir, builtin, env)
	w.report(w.current)
	return w
}

// Current returns the registry for the files as they are now.
//
// It reads the folder every time, outside the lock, so that turns starting
// at once do not wait for each other's reads; only a changed folder is
// loaded again, under it.
func (w *Watcher) Current() *Registry {
	uf, err := readFiles(w.dir, "")
	if err := errors.Join(w.builtinErr, err); err != nil {
		w.log.Warn("skills: cannot read the skills folder; keeping the loaded skills", "err", err)
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.current
	}
	version := fingerprint(append(slices.Clip(w.builtinFiles), uf...))
	w.mu.Lock()
	defer w.mu.Unlock()
	if version == w.current.version {
		return w.current
	}
	r := Load(w.dir, w.builtin, w.env)
	w.log.Info("skills reloaded", "skills", len(r.skills), "problems", len(r.problems))
	w.report(r)
	w.current = r
	return r
}

// SetGrants replaces the grants and the gateway's secret values (on a
// configuration reload) and loads the skills again with them: a skill
// granted what it lacked is offered from the next turn, one whose grant
// was taken away no longer is.
func (w *Watcher) SetGrants(grants map[string]config.SkillGrant, secrets []string) *Registry {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.env.Grants, w.env.Secrets = grants, secrets
	r := Load(w.dir, w.builtin, w.env)
	w.report(r)
	w.current = r
	return r
}

func (w *Watcher) report(r *Registry) {
	for _, p := range r.problems {
		w.log.Warn("skill skipped or incomplete", "problem", p.Error())
	}
	for _, wh := range r.withheld {
		for _, p := range wh.Lacks {
			w.log.Warn("skill not offered: it asks for more than skills.grants gives it", "skill", wh.Skill.Name, "lacks", p.Error())
		}
	}
}

// CommandFiles returns the files, under the command workspace ws, that the
// registry's command tools run or name literally: a relative program path
// (a script in the workspace) and every argument without a placeholder
// that is not an option, as absolute paths with symbolic links resolved
// where they exist. Whatever writes into the workspace on the model's
// behalf must leave them alone, or a model could rewrite what a command
// runs.
func (r *Registry) CommandFiles(ws string) []string { return r.commandPaths(ws, ArgvFiles) }

// CommandScripts returns the files of code that the registry's command
// tools run (ArgvScripts), under the command workspace ws.
func (r *Registry) CommandScripts(ws string) []string { return r.commandPaths(ws, ArgvScripts) }

// commandPaths is what of concerns in every command tool's argv, relative
// paths from ws.
func (r *Registry) commandPaths(ws string, of func(base string, argv []string) []string) []string {
	var out []string
	for _, s := range r.skills {
		for _, d := range s.DefineTools {
			if d.Kind == "command" {
				out = append(out, of(ws, d.Argv)...)
			}
		}
	}
	return out
}

// ArgvFiles returns the files a command line runs or names literally,
// relative paths taken from base (the process's working directory when
// empty): argv[0] when it is a path rather than a program on PATH, and
// every argument that is not an option, empty, or a template with
// placeholders. They are absolute, with symbolic links resolved where
// they exist.
func ArgvFiles(base string, argv []string) []string {
	base = resolved(base)
	var out []string
	for i, a := range argv {
		switch {
		case strings.ContainsAny(a, "{}"), strings.HasPrefix(a, "-"), strings.TrimSpace(a) == "",
			i == 0 && !strings.ContainsRune(a, filepath.Separator):
			continue // a template, an option, or a program on PATH
		}
		p := a
		if !filepath.IsAbs(p) {
			p = filepath.Join(base, a)
		}
		out = append(out, resolved(p))
	}
	return out
}

// resolved is p as an absolute path with symbolic links resolved as far as
// it exists.
func resolved(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	return p
}
