package skills

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/switchboard-gateway/switchboard/channels/registry"
	"github.com/switchboard-gateway/switchboard/config"

	"go.yaml.in/yaml/v3"
)

//go:embed builtin/*.yaml
var builtinFS embed.FS

// Builtin returns the skills that ship with Switchboard.
func Builtin() fs.FS {
	sub, err := fs.Sub(builtinFS, "builtin")
	if err != nil {
		panic(err) // the embedded folder exists at build time
	}
	return sub
}

// Problem is one thing wrong in a skill file, positioned where known.
type Problem struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		b.WriteString(":" + strconv.Itoa(p.Line))
	}
	b.WriteString(": ")
	if p.Field != "" {
		b.WriteString(p.Field + ": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// file is one skill file read from a folder.
type file struct {
	name string // path within the folder, or "builtin:<name>"
	data []byte
	md   bool // an Agent Skills SKILL.md
}

// readFiles lists the skill files of fsys: *.yaml / *.yml at the top level
// and <dir>/SKILL.md one level down, in name order.
func readFiles(fsys fs.FS, prefix string) ([]file, error) {
	if fsys == nil {
		return nil, nil
	}
	entries, err := fs.ReadDir(fsys, ".")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []file
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, "."):
			continue
		case e.IsDir():
			p := path.Join(name, "SKILL.md")
			data, err := fs.ReadFile(fsys, p)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, file{name: prefix + p, data: data, md: true})
		case strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml"):
			data, err := fs.ReadFile(fsys, name)
			if err != nil {
				return nil, err
			}
			out = append(out, file{name: prefix + name, data: data})
		}
	}
	return out, nil
}

// fingerprint identifies the content of a set of files.
func fingerprint(files []file) string {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%d\x00", f.name, len(f.data))
		h.Write(f.data)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

var yamlLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^line (\d+): (.*)$`) })
var unknownField = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^field (\S+) not found in type (\S+)$`) })

// decodeYAML decodes one of our YAML skill files strictly.
func decodeYAML(f file) (*Skill, *yaml.Node, []error) {
	var root yaml.Node
	if err := yaml.Unmarshal(f.data, &root); err != nil {
		return nil, nil, []error{yamlProblem(f.name, err)}
	}
	if len(root.Content) == 0 {
		return nil, nil, []error{&Problem{File: f.name, Msg: "the file is empty; write a skill with at least name and description"}}
	}
	dec := yaml.NewDecoder(bytes.NewReader(f.data))
	dec.KnownFields(true)
	var s Skill
	if err := dec.Decode(&s); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			var errs []error
			for _, e := range te.Errors {
				errs = append(errs, yamlProblem(f.name, errors.New(e)))
			}
			return nil, nil, errs
		}
		return nil, nil, []error{yamlProblem(f.name, err)}
	}
	return &s, root.Content[0], nil
}

// yamlProblem positions a yaml.v3 error message ("line 3: ...").
func yamlProblem(name string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	p := &Problem{File: name, Msg: msg}
	if m := yamlLine().FindStringSubmatch(msg); m != nil {
		p.Line, _ = strconv.Atoi(m[1])
		p.Msg = m[2]
	}
	if m := unknownField().FindStringSubmatch(p.Msg); m != nil {
		field, typ := m[1], m[2]
		var where string
		var known []string
		switch typ {
		case "skills.Skill":
			where, known = "a skill takes", skillFields()
		case "skills.ToolDef":
			where, known = "a define_tools entry takes", yamlFields(reflect.TypeFor[ToolDef]())
		case "skills.Rules":
			where, known = "tool_rules takes", yamlFields(reflect.TypeFor[Rules]())
		default:
			return p
		}
		if s := config.Closest(field, known); s != "" {
			p.Msg = fmt.Sprintf("unknown field %q (did you mean %q?)", field, s)
		} else {
			p.Msg = fmt.Sprintf("unknown field %q; %s %s", field, where, strings.Join(known, ", "))
		}
	}
	return p
}

// yamlFields lists the YAML field names of a struct type, in order.
func yamlFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

func skillFields() []string {
	return []string{"name", "description", "instructions", "activation", "command", "triggers", "channels",
		"chat_types", "tools", "define_tools", "tool_rules", "max_steps", "mode"}
}

// frontMatter is the YAML header of an Agent Skills SKILL.md. Keys used
// across the ecosystem are accepted; only name and description matter here.
type frontMatter struct {
	Name          string         `yaml:"name"`
	Description   string         `yaml:"description"`
	License       string         `yaml:"license"`
	AllowedTools  any            `yaml:"allowed-tools"`
	Metadata      map[string]any `yaml:"metadata"`
	Version       any            `yaml:"version"`
	Compatibility any            `yaml:"compatibility"`
}

// decodeMarkdown reads a SKILL.md: front matter between --- lines, then
// the instructions.
func decodeMarkdown(f file) (*Skill, *yaml.Node, []error) {
	text := strings.ReplaceAll(string(f.data), "\r\n", "\n")
	if !strings.HasPrefix(text, "---\n") {
		return nil, nil, []error{&Problem{File: f.name, Line: 1, Msg: "a SKILL.md starts with YAML front matter between --- lines (name, description)"}}
	}
	head, body, ok := strings.Cut(text[4:], "\n---")
	if !ok {
		return nil, nil, []error{&Problem{File: f.name, Line: 1, Msg: "the front matter is not closed with a --- line"}}
	}
	body = strings.TrimPrefix(body, "-") // tolerate ----
	if i := strings.IndexByte(body, '\n'); i >= 0 {
		body = body[i+1:]
	} else {
		body = ""
	}
	var root yaml.Node
	var fm frontMatter
	if err := yaml.Unmarshal([]byte(head), &root); err != nil {
		return nil, nil, []error{shiftLine(yamlProblem(f.name, err), 1)}
	}
	if err := yaml.Unmarshal([]byte(head), &fm); err != nil {
		return nil, nil, []error{shiftLine(yamlProblem(f.name, err), 1)}
	}
	s := &Skill{Name: fm.Name, Description: fm.Description, Instructions: strings.TrimSpace(body), Activation: Auto}
	var node *yaml.Node
	if len(root.Content) > 0 {
		node = root.Content[0]
		shiftNode(node, 1)
	}
	return s, node, nil
}

func shiftLine(err error, by int) error {
	var p *Problem
	if errors.As(err, &p) && p.Line > 0 {
		p.Line += by
	}
	return err
}

func shiftNode(n *yaml.Node, by int) {
	n.Line += by
	for _, c := range n.Content {
		shiftNode(c, by)
	}
}

// lineOf finds the line of a key path in a mapping node ("define_tools", 1,
// "url"); it returns the nearest line found.
func lineOf(n *yaml.Node, path ...any) int {
	line := 0
	if n != nil {
		line = n.Line
	}
	for _, p := range path {
		if n == nil {
			break
		}
		switch k := p.(type) {
		case string:
			var next *yaml.Node
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == k {
						line = n.Content[i].Line
						next = n.Content[i+1]
						break
					}
				}
			}
			n = next
		case int:
			if n.Kind == yaml.SequenceNode && k < len(n.Content) {
				n = n.Content[k]
				line = n.Line
			} else {
				n = nil
			}
		}
	}
	return line
}

var (
	nameRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`) })
	commandRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9_]{1,32}$`) })
	toolRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`) })
)

// knownChannels are the channels a skill may name: the terminal, every chat
// platform of channels/registry, and the chat API ("http").
func knownChannels() []string {
	return slices.Concat([]string{"console"}, registry.Names(), []string{"http"})
}

// reserved commands are the router's; a skill cannot take them.
var reservedCommands = []string{"new", "stop", "status", "help", "start", "plan", "memory", "profile", "tasks"}

// validate checks a decoded skill and returns every problem found.
func validate(s *Skill, node *yaml.Node, name string) []error {
	var errs []error
	add := func(field string, line int, format string, args ...any) {
		errs = append(errs, &Problem{File: name, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	at := func(p ...any) int { return lineOf(node, p...) }
	if !nameRE().MatchString(s.Name) {
		add("name", at("name"), "%q must be lowercase letters, digits, - or _ (up to 64), such as \"weather\"", s.Name)
	}
	if strings.TrimSpace(s.Description) == "" {
		add("description", at("description"), "required: one line saying what the skill does and when to use it")
	}
	if s.Activation == "" {
		s.Activation = Auto
	}
	switch s.Activation {
	case Always, Auto, Command, Triggers:
	default:
		add("activation", at("activation"), "%q is not one of always, auto, command, triggers", s.Activation)
	}
	if s.Activation == Command {
		if s.Command == "" {
			s.Command = strings.ReplaceAll(s.Name, "-", "_")
		}
	}
	if s.Command != "" {
		switch {
		case !commandRE().MatchString(s.Command):
			add("command", at("command"), "%q must be lowercase letters, digits or _ (without the /)", s.Command)
		case slices.Contains(reservedCommands, s.Command):
			add("command", at("command"), "/%s is a built-in command; choose another name", s.Command)
		}
	}
	if s.Activation == Triggers && len(s.Triggers) == 0 {
		add("triggers", at("activation"), "activation triggers needs at least one trigger (a keyword, or /a regular expression/)")
	}
	for i, tr := range s.Triggers {
		if _, err := compileTrigger(tr); err != nil {
			add(fmt.Sprintf("triggers[%d]", i), at("triggers", i), "%v", err)
		}
	}
	for i, c := range s.Channels {
		if known := knownChannels(); !slices.Contains(known, c) {
			add(fmt.Sprintf("channels[%d]", i), at("channels", i), "%q is not a channel; use %s", c, strings.Join(known, ", "))
		}
	}
	for i, c := range s.ChatTypes {
		if c != "dm" && c != "group" {
			add(fmt.Sprintf("chat_types[%d]", i), at("chat_types", i), "%q is not dm or group", c)
		}
	}
	seen := map[string]bool{}
	for i, d := range s.DefineTools {
		field := fmt.Sprintf("define_tools[%d]", i)
		switch {
		case !toolRE().MatchString(d.Name):
			add(field+".name", at("define_tools", i, "name"), "%q must be letters, digits, _ or - (up to 64)", d.Name)
		case seen[d.Name]:
			add(field+".name", at("define_tools", i, "name"), "%q is defined twice", d.Name)
		}
		seen[d.Name] = true
	}
	for i, t := range s.Tools {
		if !toolRE().MatchString(t) {
			add(fmt.Sprintf("tools[%d]", i), at("tools", i), "%q is not a tool name", t)
		}
	}
	for k, v := range s.ToolRules.MaxCount {
		if v < 1 {
			add("tool_rules.max_count."+k, at("tool_rules", "max_count", k), "must be at least 1")
		}
	}
	if s.MaxSteps < 0 {
		add("max_steps", at("max_steps"), "must not be negative")
	}
	if s.Mode != "" && s.Mode != "plan" {
		add("mode", at("mode"), "%q is not a mode; the only one is plan", s.Mode)
	}
	if strings.TrimSpace(s.Instructions) == "" && len(s.DefineTools) == 0 && len(s.Tools) == 0 {
		add("instructions", at("name"), "a skill needs instructions, tools or define_tools to do anything")
	}
	slices.SortStableFunc(errs, func(a, b error) int { return a.(*Problem).Line - b.(*Problem).Line })
	return errs
}

// compileTrigger turns a trigger into a matcher: /re/ is a regular
// expression (case-insensitive), anything else a whole-word keyword.
func compileTrigger(tr string) (*regexp.Regexp, error) {
	tr = strings.TrimSpace(tr)
	if tr == "" {
		return nil, errors.New("an empty trigger matches nothing")
	}
	if len(tr) >= 2 && strings.HasPrefix(tr, "/") && strings.HasSuffix(tr, "/") {
		re, err := regexp.Compile("(?i)" + tr[1:len(tr)-1])
		if err != nil {
			return nil, fmt.Errorf("invalid regular expression %s: %v", tr, err)
		}
		return re, nil
	}
	return regexp.MustCompile(`(?i)(^|\W)` + regexp.QuoteMeta(tr) + `($|\W)`), nil
}
