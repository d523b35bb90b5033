package logging

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// The tree logs an error under one key, "err": a search for err= finds
// every failure, whichever package logged it. This guard reads every
// non-test Go file of the module and fails on a log call (a slog logger's
// Debug/Info/Warn/Error/Log/With, or an slog.Attr constructor) that uses
// the key "error". It reads syntax, not types, so it cannot tell an error
// value from another: the key "error" is refused whatever it holds (a
// flag saying whether something failed is "is_error").
func TestErrorsAreLoggedUnderErr(t *testing.T) {
	root := testkit.ModuleRoot(t)
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, pos := range errorKeys(f) {
			p := fset.Position(pos)
			rel, _ := filepath.Rel(root, p.Filename)
			t.Errorf(`%s:%d: a log attribute under the key "error"; the tree logs errors under "err"`, rel, p.Line)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files under %s; is that the module?", files, root)
	}
}

// The guard finds the key in each form a log call takes, and only there.
func TestErrorKeysFound(t *testing.T) {
	const src = `package p

import (
	"log/slog"
	"net/http"
)

func f(log *slog.Logger, err error, w http.ResponseWriter) {
	log.Warn("a", "error", err) // 1
	log.Info("b", "wait", 1, "error", err) // 2
	log.ErrorContext(nil, "c", "error", err) // 3
	log.Log(nil, slog.LevelInfo, "d", "error", err) // 4
	log.With("error", err).Info("e") // 5
	slog.Error("f", slog.Any("error", err)) // 6
	log.LogAttrs(nil, slog.LevelInfo, "g", slog.String("error", "x")) // 7
	log.Info("h", "error", true) // 8
	log.Info("error", "err", err) // the message, not a key
	log.Info("i", "status", "error", "err", err) // a value
	log.Info("j", slog.Int("n", 1), "status", "error") // a value after an Attr
	http.Error(w, "error", 500) // not a logger
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, pos := range errorKeys(f) {
		lines = append(lines, fset.Position(pos).Line)
	}
	want := []int{9, 10, 11, 12, 13, 14, 15, 16}
	if len(lines) != len(want) {
		t.Fatalf("found the key on lines %v, want %v", lines, want)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Fatalf("found the key on lines %v, want %v", lines, want)
		}
	}
}

// errorKeys returns where f uses "error" as a log attribute key.
func errorKeys(f *ast.File) []token.Pos {
	imports := map[string]bool{} // the names of f's imports other than log/slog
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		name := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		if path != "log/slog" {
			imports[name] = true
		}
	}
	var found []token.Pos
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && imports[x.Name] {
			return true // another package's function (http.Error)
		}
		if isAttr(sel) {
			if len(call.Args) > 0 && isErrorLit(call.Args[0]) {
				found = append(found, call.Args[0].Pos())
			}
			return true
		}
		skip, ok := logArgs[sel.Sel.Name]
		if !ok || len(call.Args) < skip {
			return true
		}
		// key, value pairs, or an Attr standing alone (as slog reads them)
		for args := call.Args[skip:]; len(args) > 0; {
			if lit, ok := args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if isErrorLit(lit) {
					found = append(found, lit.Pos())
				}
				args = args[min(2, len(args)):]
				continue
			}
			args = args[1:]
		}
		return true
	})
	return found
}

// logArgs is, for each slog.Logger method (and slog function) of that
// name, how many arguments come before the attributes.
var logArgs = map[string]int{
	"Debug": 1, "Info": 1, "Warn": 1, "Error": 1,
	"DebugContext": 2, "InfoContext": 2, "WarnContext": 2, "ErrorContext": 2,
	"Log": 3, "LogAttrs": 3, "With": 0,
}

// isAttr reports whether sel is one of slog's Attr constructors.
func isAttr(sel *ast.SelectorExpr) bool {
	x, ok := sel.X.(*ast.Ident)
	if !ok || x.Name != "slog" {
		return false
	}
	switch sel.Sel.Name {
	case "Any", "Bool", "Duration", "Float64", "Group", "Int", "Int64", "String", "Time", "Uint64":
		return true
	}
	return false
}

func isErrorLit(e ast.Expr) bool {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return false
	}
	s, err := strconv.Unquote(lit.Value)
	return err == nil && s == "error"
}
