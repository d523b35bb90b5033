package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

// ModuleRoot returns the module's root directory: the nearest one holding
// a go.mod above the test's working directory (its package's directory),
// for the tests that read the whole tree.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}
