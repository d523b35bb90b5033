package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	mdast "github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
)

// contractPages list the adapter contract, each in a table headed
// "capability | what it does | who implements it".
var contractPages = []string{"docs/architecture.md", "docs/development.md"}

// goFiles parses the non-test Go files of dir (relative to the repository
// root).
func goFiles(t *testing.T, dir string) []*ast.File {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(dir), "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), n, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return files
}

// contractInterfaces returns the exported interfaces declared in package
// channels.
func contractInterfaces(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, f := range goFiles(t, "channels") {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				if _, ok := ts.Type.(*ast.InterfaceType); ok && ts.Name.IsExported() {
					names = append(names, ts.Name.Name)
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

// guards returns, per interface of package channels, the adapters (the
// folders under channels/) that declare it with an interface guard:
// var _ channels.X = (*Adapter)(nil).
func guards(t *testing.T) map[string][]string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(root, "channels", "*", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	adapters := map[string]bool{}
	for _, d := range dirs {
		adapters[filepath.Base(filepath.Dir(d))] = true
	}
	out := map[string][]string{}
	for a := range adapters {
		for _, f := range goFiles(t, "channels/"+a) {
			ast.Inspect(f, func(n ast.Node) bool {
				vs, ok := n.(*ast.ValueSpec)
				if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "_" {
					return true
				}
				if sel, ok := vs.Type.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "channels" {
						out[sel.Sel.Name] = append(out[sel.Sel.Name], a)
					}
				}
				return true
			})
		}
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}

// capability is one row of a page's capability table.
type capability struct {
	name         string
	implementers []string // the `code` spans of the third column, sorted
}

// capabilityTable returns the rows of the table of rel whose first column
// is headed "capability".
func capabilityTable(t *testing.T, rel string) []capability {
	t.Helper()
	p := parse(t, rel)
	spans := func(cell mdast.Node) []string {
		var out []string
		for c := cell.FirstChild(); c != nil; c = c.NextSibling() {
			if cs, ok := c.(*mdast.CodeSpan); ok {
				out = append(out, plain(cs, p.src))
			}
		}
		return out
	}
	var rows []capability
	var tables int
	_ = mdast.Walk(p.doc, func(n mdast.Node, entering bool) (mdast.WalkStatus, error) {
		tbl, ok := n.(*east.Table)
		if !entering || !ok {
			return mdast.WalkContinue, nil
		}
		head := tbl.FirstChild()
		if head == nil || strings.TrimSpace(plain(head.FirstChild(), p.src)) != "capability" {
			return mdast.WalkSkipChildren, nil
		}
		tables++
		for row := head.NextSibling(); row != nil; row = row.NextSibling() {
			var cells []mdast.Node
			for c := row.FirstChild(); c != nil; c = c.NextSibling() {
				cells = append(cells, c)
			}
			if len(cells) != 3 || len(spans(cells[0])) != 1 {
				t.Errorf("%s: capability row %q: want three columns and one `name` in the first", rel, plain(row, p.src))
				continue
			}
			impl := spans(cells[2])
			slices.Sort(impl)
			rows = append(rows, capability{name: spans(cells[0])[0], implementers: impl})
		}
		return mdast.WalkSkipChildren, nil
	})
	if tables != 1 {
		t.Fatalf(`%s: want one table whose first column is headed "capability", found %d`, rel, tables)
	}
	return rows
}

// TestAdapterContract checks the capability tables of the docs against the
// interfaces declared in package channels, and each row's implementers
// against the interface guards in the adapters.
func TestAdapterContract(t *testing.T) {
	declared := contractInterfaces(t)
	if len(declared) == 0 {
		t.Fatal("no interfaces found in channels/")
	}
	guarded := guards(t)
	for _, rel := range contractPages {
		listed := map[string]bool{}
		for _, c := range capabilityTable(t, rel) {
			if listed[c.name] {
				t.Errorf("%s: capability `%s` is listed twice", rel, c.name)
			}
			listed[c.name] = true
			if !slices.Contains(declared, c.name) {
				t.Errorf("%s: capability `%s` is not an interface of package channels; remove its row or fix its name", rel, c.name)
				continue
			}
			if g := guarded[c.name]; !slices.Equal(c.implementers, g) {
				t.Errorf("%s: `%s` is implemented by %q, but the adapters with a guard var _ channels.%s = … are %q",
					rel, c.name, c.implementers, c.name, g)
			}
		}
		for _, name := range declared {
			if !listed[name] {
				t.Errorf("%s: interface channels.%s is missing from the capability table; add a row (name, what it does, who implements it)", rel, name)
			}
		}
	}
}
