package docs

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/yuin/goldmark/ast"
	"go.yaml.in/yaml/v3"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/skills"
)

// yamlBlocks returns the fenced yaml code blocks of a page.
func yamlBlocks(p page) []string {
	var out []string
	_ = ast.Walk(p.doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		cb, ok := n.(*ast.FencedCodeBlock)
		if !entering || !ok || string(cb.Language(p.src)) != "yaml" {
			return ast.WalkContinue, nil
		}
		var b strings.Builder
		for i := 0; i < cb.Lines().Len(); i++ {
			seg := cb.Lines().At(i)
			b.Write(seg.Value(p.src))
		}
		out = append(out, b.String())
		return ast.WalkSkipChildren, nil
	})
	return out
}

// The skill file of docs/skills.md loads with the grant the page shows: it
// is offered with its http tool, and without the grant it is withheld.
func TestSkillExampleLoadsWithItsGrant(t *testing.T) {
	var skill, grants string
	for _, b := range yamlBlocks(parse(t, "docs/skills.md")) {
		switch {
		case strings.HasPrefix(b, "name: weather"):
			skill = b
		case strings.HasPrefix(b, "skills:\n  grants:"):
			grants = b
		}
	}
	if skill == "" || grants == "" {
		t.Fatal("docs/skills.md lacks the weather skill or its grant")
	}
	var doc struct {
		Skills struct {
			Grants map[string]config.SkillGrant `yaml:"grants"`
		} `yaml:"skills"`
	}
	if err := yaml.Unmarshal([]byte(grants), &doc); err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{"weather.yaml": {Data: []byte(skill)}}
	reg := skills.Load(fsys, nil, skills.Env{Grants: doc.Skills.Grants})
	if p, w := reg.Problems(), reg.Withheld(); len(p) > 0 || len(w) > 0 {
		t.Fatalf("problems %v, withheld %v", p, w)
	}
	var names []string
	for _, tool := range reg.ForTurn("console", "dm", "weather").Tools(agent.TurnInfo{}) {
		names = append(names, tool.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "get_weather") {
		t.Errorf("tools = %v, want get_weather", names)
	}
	if _, ok := skills.Load(fsys, nil, skills.Env{}).Get("weather"); ok {
		t.Error("the example skill is offered without its grant")
	}
}
