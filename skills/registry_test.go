package skills

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/config"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// summary renders a registry for golden comparison.
func summary(r *Registry) string {
	var b strings.Builder
	for _, s := range r.Skills() {
		fmt.Fprintf(&b, "skill %s (%s) from %s", s.Name, s.Activation, s.File)
		if s.Command != "" {
			fmt.Fprintf(&b, " command=/%s", s.Command)
		}
		if len(s.Channels) > 0 || len(s.ChatTypes) > 0 {
			fmt.Fprintf(&b, " where=%v/%v", s.Channels, s.ChatTypes)
		}
		b.WriteString("\n")
		for _, t := range r.tools[s.Name] {
			fmt.Fprintf(&b, "  tool %s safe=%v source=%s\n", t.Name, t.ConcurrencySafe, t.Source)
		}
	}
	for _, p := range r.Problems() {
		fmt.Fprintf(&b, "problem %s\n", p)
	}
	b.WriteString("--- catalogue\n" + r.Catalogue(0) + "\n")
	return b.String()
}

// goldenGrants grant the golden skills what they ask for, as an operator
// would (skills.grants).
var goldenGrants = map[string]config.SkillGrant{"weather": {Hosts: []string{"api.example.com"}, Env: []string{"WEATHER_KEY"}}}

func TestGolden(t *testing.T) {
	cases, err := os.ReadDir("testdata/golden")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name(), func(t *testing.T) {
			dir := filepath.Join("testdata/golden", c.Name())
			r := Load(os.DirFS(filepath.Join(dir, "skills")), Builtin(), Env{Grants: goldenGrants})
			got := summary(r)
			want := filepath.Join(dir, "want.golden")
			if *update {
				if err := os.WriteFile(want, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			data, err := os.ReadFile(want)
			if err != nil {
				t.Fatalf("%v (run go test ./skills -update to create it)", err)
			}
			if got != string(data) {
				t.Fatalf("registry differs from %s:\n--- got\n%s\n--- want\n%s", want, got, data)
			}
		})
	}
}

func TestActivation(t *testing.T) {
	fsys := fstest.MapFS{
		"weather.yaml": {Data: []byte("name: weather\ndescription: w\nactivation: triggers\ntriggers: [weather, \"/rain(ing)?/\"]\ninstructions: Use the forecast.\n")},
		"dmonly.yaml":  {Data: []byte("name: dmonly\ndescription: private helper\nchat_types: [dm]\ninstructions: Be private.\n")},
		"always.yaml":  {Data: []byte("name: always\ndescription: a\nactivation: always\ninstructions: Be kind.\n")},
		"scoped.yaml":  {Data: []byte("name: scoped\ndescription: a\nactivation: always\nchannels: [telegram]\ninstructions: Telegram only.\n")},
		"cmd.yaml":     {Data: []byte("name: cmd\ndescription: c\nactivation: command\ncommand: joke\ninstructions: Tell a joke.\n")},
	}
	r := Load(fsys, nil, Env{})
	if len(r.Problems()) > 0 {
		t.Fatal(r.Problems())
	}
	tests := []struct {
		name, channel, chatType, text string
		active                        []string
		sections                      []string
		loadable                      bool
	}{
		{"no trigger", "console", "dm", "hello", []string{"always"}, nil, true},
		{"keyword trigger, whole word", "console", "dm", "What's the Weather like?", []string{"always", "weather"}, []string{"Skill: weather"}, true},
		{"keyword inside a word does not trigger", "console", "dm", "weatherproof", []string{"always"}, nil, true},
		{"regex trigger", "console", "dm", "is it raining", []string{"always", "weather"}, []string{"Skill: weather"}, true},
		{"command", "console", "dm", "/joke@bot about cats", []string{"always", "cmd"}, []string{"Skill: cmd"}, true},
		{"channel-scoped always skill in the tail", "telegram", "group", "hi", []string{"always", "scoped"}, []string{"Skill: scoped"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			turn := r.ForTurn(tt.channel, tt.chatType, tt.text)
			if got := turn.Active(); !slices.Equal(got, tt.active) {
				t.Fatalf("active = %q; want %q", got, tt.active)
			}
			var titles []string
			for _, s := range turn.Sections() {
				titles = append(titles, s.Title)
			}
			if !slices.Equal(titles, tt.sections) {
				t.Fatalf("sections = %q; want %q", titles, tt.sections)
			}
			hasUse := slices.ContainsFunc(turn.Tools(agent.TurnInfo{}), func(t *agent.Tool) bool { return t.Name == UseSkillTool })
			if hasUse != tt.loadable {
				t.Fatalf("use_skill offered = %v; want %v (dm-only auto skill)", hasUse, tt.loadable)
			}
		})
	}
	if s, args, ok := r.ForTurn("console", "dm", "/joke about cats").Command(); !ok || s.Name != "cmd" || args != "about cats" {
		t.Fatalf("command = %v %q %v", s, args, ok)
	}
	cat := r.Catalogue(0)
	if !strings.Contains(cat, "Be kind.") || strings.Contains(cat, "Telegram only.") || !strings.Contains(cat, "- dmonly (dm only): private helper") || !strings.Contains(cat, "/joke") {
		t.Fatalf("catalogue:\n%s", cat)
	}
}

func TestCatalogueBudget(t *testing.T) {
	fsys := fstest.MapFS{}
	for i := range 50 {
		fsys[fmt.Sprintf("s%02d.yaml", i)] = &fstest.MapFile{Data: fmt.Appendf(nil, "name: s%02d\ndescription: %s\ninstructions: x\n", i, strings.Repeat("word ", 20))}
	}
	r := Load(fsys, nil, Env{})
	cat := r.Catalogue(1000)
	if len(cat) > 1400 || !strings.Contains(cat, "more skills not listed") {
		t.Fatalf("catalogue of %d chars:\n%s", len(cat), cat)
	}
	if cat != Load(fsys, nil, Env{}).Catalogue(1000) {
		t.Fatal("catalogue is not deterministic")
	}
}

func TestWatcherReloadsOnChange(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "name: alpha\ndescription: first version\ninstructions: x\n")
	w := NewWatcher(os.DirFS(dir), nil, Env{}, nil)
	first := w.Current()
	if w.Current() != first {
		t.Fatal("an unchanged folder produced a new registry")
	}
	write("a.yaml", "name: alpha\ndescription: second version\ninstructions: x\n")
	second := w.Current()
	if second == first || !strings.Contains(second.Catalogue(0), "second version") {
		t.Fatalf("edit not picked up:\n%s", second.Catalogue(0))
	}
	if !strings.Contains(first.Catalogue(0), "first version") {
		t.Fatal("the old registry changed under a turn holding it")
	}
	write("b.yaml", "name: beta\ndescription: [broken\n")
	third := w.Current()
	if len(third.Problems()) != 1 || len(third.Skills()) != 1 {
		t.Fatalf("a broken new file: skills %d problems %v", len(third.Skills()), third.Problems())
	}
}

func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		"name: a\ndescription: b\ninstructions: c\n",
		"name: a\ndefine_tools:\n  - name: t\n    kind: http\n    url: https://x/{q}\n",
		"---\nname: a\ndescription: b\n---\nbody",
		"triggers: [\"/(/\"]\ntool_rules: {max_count: {a: 0}}\n",
		"- a\n- b\n",
		"name: &a x\nb: *a\n",
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, md bool) {
		name := "f.yaml"
		if md {
			name = "f/SKILL.md"
		}
		r := build([]file{{name: name, data: data, md: md}}, Env{})
		if len(r.Skills())+len(r.Problems()) == 0 {
			t.Fatal("a file produced neither a skill nor a problem")
		}
		for _, p := range r.Problems() {
			if !strings.HasPrefix(p.Error(), name) {
				t.Fatalf("problem does not name the file: %v", p)
			}
		}
		_ = r.Catalogue(0)
		_ = r.ForTurn("console", "dm", string(data)).Tools(agent.TurnInfo{})
	})
}

// CommandFiles: the scripts and literal paths command tools name, under
// the workspace; not placeholders, options or programs on PATH.
func TestCommandFiles(t *testing.T) {
	fsys := fstest.MapFS{
		"ops.yaml": {Data: []byte(`name: ops
description: o
instructions: i
define_tools:
  - name: report
    description: r
    kind: command
    parameters: {type: object, properties: {day: {type: string}}}
    argv: [./scripts/report.sh, "{day}", -v, notes.txt]
  - name: find
    description: f
    kind: command
    parameters: {type: object, properties: {p: {type: string}}}
    argv: [grep, -n, "{p}", data/list.txt]
  - name: ask
    description: a
    kind: prompt
    prompt: "say notes.txt"
`)},
	}
	r := Load(fsys, nil, Env{})
	if len(r.Problems()) > 0 {
		t.Fatal(r.Problems())
	}
	ws := t.TempDir()
	real, err := filepath.EvalSymlinks(ws)
	if err != nil {
		t.Fatal(err)
	}
	got := r.CommandFiles(ws)
	want := []string{filepath.Join(real, "scripts/report.sh"), filepath.Join(real, "notes.txt"), filepath.Join(real, "data/list.txt")}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("CommandFiles = %q, want %q", got, want)
	}
}
