package docs

import (
	"bytes"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
	"go.yaml.in/yaml/v3"

	"github.com/switchboard-gateway/switchboard/channels/registry"
	"github.com/switchboard-gateway/switchboard/config"
)

// root is the repository root, relative to this package's directory (go test
// runs a package's tests in its own directory).
const root = ".."

// module is the module path of go.mod.
const module = "github.com/switchboard-gateway/switchboard"

// page is one parsed Markdown file.
type page struct {
	path string // relative to the repository root, with slashes
	src  []byte
	doc  ast.Node
}

var md = goldmark.New(goldmark.WithExtensions(extension.GFM))

func parse(t *testing.T, rel string) page {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	return page{path: rel, src: src, doc: md.Parser().Parse(text.NewReader(src))}
}

// pages returns README.md and every docs/*.md.
func pages(t *testing.T) []page {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no docs/*.md found")
	}
	ps := []page{parse(t, "README.md")}
	for _, n := range names {
		ps = append(ps, parse(t, "docs/"+filepath.Base(n)))
	}
	return ps
}

// plain is the text of a node as a reader sees it: text, code spans and
// emphasis flattened, markup dropped.
func plain(n ast.Node, src []byte) string {
	var b strings.Builder
	var walk func(ast.Node)
	walk = func(n ast.Node) {
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			switch c := c.(type) {
			case *ast.Text:
				b.Write(c.Segment.Value(src))
				if c.SoftLineBreak() || c.HardLineBreak() {
					b.WriteByte(' ')
				}
			case *ast.String:
				b.Write(c.Value)
			case *ast.RawHTML:
				// an <a id> or a comment is not part of the slug
			default:
				walk(c)
			}
		}
	}
	walk(n)
	return b.String()
}

// slug is GitHub's anchor for a heading: lower case, punctuation other than
// '-' and '_' dropped, spaces turned into '-'.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of a page's headings, with GitHub's -1, -2…
// suffixes for repeated ones.
func anchors(p page) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	_ = ast.Walk(p.doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if h, ok := n.(*ast.Heading); ok && entering {
			s := slug(plain(h, p.src))
			if k := seen[s]; k > 0 {
				out[s+"-"+strconv.Itoa(k)] = true
			} else {
				out[s] = true
			}
			seen[s]++
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return out
}

// TestRelativeLinks checks that every relative link of README.md and
// docs/*.md names an existing file or folder and, with a #fragment, a
// heading of that file.
func TestRelativeLinks(t *testing.T) {
	ps := pages(t)
	byPath := map[string]page{}
	for _, p := range ps {
		byPath[p.path] = p
	}
	checked := 0
	for _, p := range ps {
		_ = ast.Walk(p.doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
			if !entering {
				return ast.WalkContinue, nil
			}
			var dest string
			switch n := n.(type) {
			case *ast.Link:
				dest = string(n.Destination)
			case *ast.Image:
				dest = string(n.Destination)
			default:
				return ast.WalkContinue, nil
			}
			u, err := url.Parse(dest)
			if err != nil {
				t.Errorf("%s: link %q does not parse: %v", p.path, dest, err)
				return ast.WalkContinue, nil
			}
			if u.Scheme != "" || u.Host != "" {
				return ast.WalkContinue, nil // external
			}
			checked++
			target := p.path
			if u.Path != "" {
				if strings.HasPrefix(u.Path, "/") {
					t.Errorf("%s: link %q is absolute; make it relative to the file", p.path, dest)
					return ast.WalkContinue, nil
				}
				target = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(p.path), u.Path)))
				if strings.HasPrefix(target, "../") {
					t.Errorf("%s: link %q leaves the repository", p.path, dest)
					return ast.WalkContinue, nil
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err != nil {
					t.Errorf("%s: link %q: %s does not exist", p.path, dest, target)
					return ast.WalkContinue, nil
				}
			}
			if u.Fragment == "" {
				return ast.WalkContinue, nil
			}
			tp, ok := byPath[target]
			if !ok {
				if !strings.HasSuffix(target, ".md") {
					t.Errorf("%s: link %q has an anchor into %s, which is not Markdown", p.path, dest, target)
					return ast.WalkContinue, nil
				}
				tp = parse(t, target)
				byPath[target] = tp
			}
			if !anchors(tp)[u.Fragment] {
				t.Errorf("%s: link %q: %s has no heading with the anchor #%s", p.path, dest, target, u.Fragment)
			}
			return ast.WalkContinue, nil
		})
	}
	if checked == 0 {
		t.Error("found no relative link at all; is the parser walking the pages?")
	}
}

// codeSpans returns the text of every code span of a page.
func codeSpans(p page) map[string]bool {
	out := map[string]bool{}
	_ = ast.Walk(p.doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if c, ok := n.(*ast.CodeSpan); ok && entering {
			out[plain(c, p.src)] = true
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return out
}

// exampleKeys returns the dotted path of every key of config.example.yaml;
// the keys of list items appear as `list[].key`.
func exampleKeys(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatalf("config.example.yaml: %v", err)
	}
	var keys []string
	var walk func(prefix string, n *yaml.Node)
	walk = func(prefix string, n *yaml.Node) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(prefix, c)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				if prefix != "" {
					k = prefix + "." + k
				}
				keys = append(keys, k)
				walk(k, n.Content[i+1])
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walk(prefix+"[]", c)
			}
		}
	}
	walk("", &doc)
	if len(keys) < 50 {
		t.Fatalf("found only %d keys in config.example.yaml; is the walk broken?", len(keys))
	}
	return keys
}

// structKeys returns the dotted path of every key config.Config decodes,
// read from its yaml tags; the keys of list items appear as `list[].key`,
// those of named mappings as `map.NAME.key`.
// config.example.yaml leaves its lists empty (their items are comments), so
// this is where schedule.jobs[].name and mcp.servers[].command come from.
func structKeys() []string {
	var keys []string
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Slice:
			walk(prefix+"[]", t.Elem())
		case reflect.Map: // keyed by a name the operator picks: skills.grants.NAME.hosts
			walk(prefix+".NAME", t.Elem())
		case reflect.Struct:
			if t.PkgPath() == "time" {
				return
			}
			for i := range t.NumField() {
				f := t.Field(i)
				name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				if f.IsExported() && name == "" && opts == "inline" { // a section's channels.Common
					walk(prefix, f.Type)
					continue
				}
				if t == reflect.TypeFor[config.Channels]() && f.Name == "Sections" {
					// the chat platforms' sections, each its package's type
					for _, d := range registry.All {
						k := prefix + "." + d.Name
						keys = append(keys, k)
						walk(k, d.SectionType())
					}
					continue
				}
				if !f.IsExported() || name == "" || name == "-" {
					continue
				}
				k := name
				if prefix != "" {
					k = prefix + "." + name
				}
				keys = append(keys, k)
				walk(k, f.Type)
			}
		}
	}
	walk("", reflect.TypeFor[config.Config]())
	return keys
}

// TestConfigurationReference checks that docs/configuration.md names every
// key of config.example.yaml and of package config, by its full dotted path
// in a code span (`channels.telegram.allow_users`, `schedule.jobs[].spec`).
func TestConfigurationReference(t *testing.T) {
	spans := codeSpans(parse(t, "docs/configuration.md"))
	ex := exampleKeys(t)
	for _, k := range ex {
		if !spans[k] {
			t.Errorf("docs/configuration.md does not name `%s` (a key of config.example.yaml)", k)
		}
	}
	st := structKeys()
	for _, k := range st {
		if !spans[k] {
			t.Errorf("docs/configuration.md does not name `%s` (a key of package config)", k)
		}
	}
	if len(st) < len(ex) {
		t.Errorf("package config has %d keys, config.example.yaml %d; is the reflection walk broken?", len(st), len(ex))
	}
}

// listedPackages returns the first column of architecture.md's package
// table (the first table whose header starts with "package"): one code span
// per row, the package's folder relative to the repository root, "." for the
// root package.
func listedPackages(t *testing.T) []string {
	t.Helper()
	p := parse(t, "docs/architecture.md")
	var rows []string
	found := false
	_ = ast.Walk(p.doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		tbl, ok := n.(*east.Table)
		if !entering || !ok || found {
			return ast.WalkContinue, nil
		}
		head := tbl.FirstChild()
		if head == nil || head.FirstChild() == nil || !strings.EqualFold(strings.TrimSpace(plain(head.FirstChild(), p.src)), "package") {
			return ast.WalkSkipChildren, nil
		}
		found = true
		for row := head.NextSibling(); row != nil; row = row.NextSibling() {
			cell := row.FirstChild()
			var names []string
			for c := cell.FirstChild(); c != nil; c = c.NextSibling() {
				if cs, ok := c.(*ast.CodeSpan); ok {
					names = append(names, plain(cs, p.src))
				}
			}
			if len(names) != 1 {
				t.Errorf("docs/architecture.md: package table row %q: want exactly one package in `code` in the first column, got %d", plain(cell, p.src), len(names))
				continue
			}
			name := strings.TrimSuffix(strings.TrimPrefix(names[0], "./"), "/")
			rows = append(rows, name)
		}
		return ast.WalkSkipChildren, nil
	})
	if !found {
		t.Fatal(`docs/architecture.md has no table whose first column is headed "package"`)
	}
	return rows
}

// goPackages returns the module's packages as folders relative to the
// repository root ("." for the root package), from `go list ./...`.
func goPackages(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}}", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.String())
	}
	var pkgs []string
	for _, line := range strings.Fields(string(out)) {
		switch {
		case line == module:
			pkgs = append(pkgs, ".")
		case strings.HasPrefix(line, module+"/"):
			pkgs = append(pkgs, strings.TrimPrefix(line, module+"/"))
		default:
			t.Fatalf("go list ./...: %q is not in module %s", line, module)
		}
	}
	return pkgs
}

// TestArchitecturePackages checks that docs/architecture.md's package table
// lists every package of the module once, and no package that does not exist.
func TestArchitecturePackages(t *testing.T) {
	listed := listedPackages(t)
	actual := goPackages(t)
	inTable := map[string]bool{}
	for _, p := range listed {
		if inTable[p] {
			t.Errorf("docs/architecture.md: package `%s` has more than one row in the package table", p)
		}
		inTable[p] = true
	}
	exists := map[string]bool{}
	for _, p := range actual {
		exists[p] = true
		if !inTable[p] {
			t.Errorf("docs/architecture.md: package `%s` (from go list ./...) is missing from the package table; add a row with its one job", p)
		}
	}
	for _, p := range listed {
		if !exists[p] {
			t.Errorf("docs/architecture.md: package `%s` is in the package table but go list ./... does not know it; remove its row or fix its path", p)
		}
	}
}
