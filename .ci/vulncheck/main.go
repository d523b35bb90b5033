// Command vulncheck runs govulncheck on the module against a vulnerability
// database built from the golang.org/x/vulndb module (the Go module proxy is
// the only registry CI reaches, so vuln.go.dev is not used), and fails when
// the code calls a vulnerable symbol of a module that go.mod can upgrade.
// Findings in the standard library are printed too; they are fixed by the
// machine's Go toolchain, not by go.mod, and do not fail the run.
//
// Usage (from the module root): go run ./.ci/vulncheck
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

const (
	govulncheck = "golang.org/x/vuln/cmd/govulncheck@v1.9.0"
	vulndb      = "golang.org/x/vulndb@v0.0.0-20261105234957-e22db6528018"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "vulncheck:", err)
		os.Exit(1)
	}
}

func run() error {
	src, err := downloadDB()
	if err != nil {
		return err
	}
	db, err := os.MkdirTemp("", "vulndb")
	if err != nil {
		return err
	}
	defer os.RemoveAll(db)
	n, err := buildDB(filepath.Join(src, "data", "osv"), db)
	if err != nil {
		return fmt.Errorf("build the database from %s: %w", vulndb, err)
	}
	fmt.Printf("vulncheck: %d advisories from %s\n", n, vulndb)

	cmd := exec.Command("go", "run", govulncheck, "-db", "file://"+db, "-format", "json", "./...")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		// govulncheck -format json exits 0 with findings; anything else failed.
		return fmt.Errorf("govulncheck: %w", err)
	}
	called, err := calledFindings(bytes.NewReader(out))
	if err != nil {
		return err
	}
	return report(os.Stdout, called)
}

// downloadDB fetches the vulndb module through the module proxy and returns
// its directory.
func downloadDB() (string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", vulndb).Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", vulndb, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", vulndb, err)
	}
	if m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", vulndb, m.Error)
	}
	return m.Dir, nil
}

// osvEntry is the part of an OSV record the database index needs.
type osvEntry struct {
	ID       string   `json:"id"`
	Modified string   `json:"modified"`
	Aliases  []string `json:"aliases"`
	Affected []struct {
		Package struct {
			Name string `json:"name"`
		} `json:"package"`
		Ranges []struct {
			Events []struct {
				Fixed string `json:"fixed"`
			} `json:"events"`
		} `json:"ranges"`
	} `json:"affected"`
}

type indexVuln struct {
	ID       string `json:"id"`
	Modified string `json:"modified"`
	Fixed    string `json:"fixed,omitempty"`
}

// buildDB writes a v1 database (index/db.json, index/modules.json,
// index/vulns.json, ID/<id>.json) from a folder of OSV files, as
// golang.org/x/vulndb's cmd/indexdb does, with the standard library only.
func buildDB(osvDir, out string) (int, error) {
	files, err := filepath.Glob(filepath.Join(osvDir, "*.json"))
	if err != nil {
		return 0, err
	}
	if len(files) == 0 {
		return 0, fmt.Errorf("no OSV files in %s", osvDir)
	}
	if err := os.MkdirAll(filepath.Join(out, "ID"), 0o755); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Join(out, "index"), 0o755); err != nil {
		return 0, err
	}
	type vulnIdx struct {
		ID       string   `json:"id"`
		Modified string   `json:"modified"`
		Aliases  []string `json:"aliases,omitempty"`
	}
	var vulns []vulnIdx
	modules := map[string][]indexVuln{}
	latest := "0001-01-01T00:00:00Z"
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		var e osvEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			return 0, fmt.Errorf("%s: %w", f, err)
		}
		if e.ID == "" {
			return 0, fmt.Errorf("%s: no id", f)
		}
		if e.Modified == "" {
			e.Modified = "0001-01-01T00:00:00Z"
		}
		if e.Modified > latest {
			latest = e.Modified
		}
		if err := os.WriteFile(filepath.Join(out, "ID", e.ID+".json"), raw, 0o644); err != nil {
			return 0, err
		}
		vulns = append(vulns, vulnIdx{ID: e.ID, Modified: e.Modified, Aliases: e.Aliases})
		for _, a := range e.Affected {
			fixed := ""
			for _, r := range a.Ranges {
				for _, ev := range r.Events {
					if ev.Fixed != "" {
						fixed = ev.Fixed
					}
				}
			}
			modules[a.Package.Name] = append(modules[a.Package.Name], indexVuln{ID: e.ID, Modified: e.Modified, Fixed: fixed})
		}
	}
	type modIdx struct {
		Path  string      `json:"path"`
		Vulns []indexVuln `json:"vulns"`
	}
	var mods []modIdx
	for p, v := range modules {
		mods = append(mods, modIdx{Path: p, Vulns: v})
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Path < mods[j].Path })
	for name, v := range map[string]any{
		"db.json":      map[string]string{"modified": latest},
		"modules.json": mods,
		"vulns.json":   vulns,
	} {
		b, err := json.Marshal(v)
		if err != nil {
			return 0, err
		}
		if err := os.WriteFile(filepath.Join(out, "index", name), b, 0o644); err != nil {
			return 0, err
		}
	}
	return len(vulns), nil
}

// finding is one vulnerable symbol the code calls.
type finding struct {
	ID, Module, Version, Fixed, Where string
}

// calledFindings reads govulncheck's JSON stream and keeps the findings at
// symbol level (the code calls the vulnerable function), one per advisory.
func calledFindings(r io.Reader) ([]finding, error) {
	dec := json.NewDecoder(bufio.NewReader(r))
	seen := map[string]bool{}
	var out []finding
	for {
		var msg struct {
			Finding *struct {
				OSV          string `json:"osv"`
				FixedVersion string `json:"fixed_version"`
				Trace        []struct {
					Module   string `json:"module"`
					Version  string `json:"version"`
					Function string `json:"function"`
					Position *struct {
						Filename string `json:"filename"`
						Line     int    `json:"line"`
					} `json:"position"`
				} `json:"trace"`
			} `json:"finding"`
		}
		err := dec.Decode(&msg)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read govulncheck output: %w", err)
		}
		f := msg.Finding
		if f == nil || len(f.Trace) == 0 || f.Trace[0].Function == "" || seen[f.OSV] {
			continue
		}
		seen[f.OSV] = true
		where := ""
		if last := f.Trace[len(f.Trace)-1]; last.Position != nil {
			where = fmt.Sprintf("%s:%d", last.Position.Filename, last.Position.Line)
		}
		out = append(out, finding{ID: f.OSV, Module: f.Trace[0].Module, Version: f.Trace[0].Version, Fixed: f.FixedVersion, Where: where})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func report(w io.Writer, fs []finding) error {
	var modules []string
	for _, f := range fs {
		kind := "module"
		if f.Module == "stdlib" || f.Module == "toolchain" {
			kind = "go toolchain"
		} else {
			modules = append(modules, f.ID)
		}
		fmt.Fprintf(w, "vulncheck: %s in %s %s (fixed in %s; %s), called from %s\n", f.ID, f.Module, f.Version, orNone(f.Fixed), kind, orNone(f.Where))
	}
	fmt.Fprintf(w, "vulncheck: %d called vulnerabilities, %d in modules go.mod can upgrade\n", len(fs), len(modules))
	if len(modules) > 0 {
		return fmt.Errorf("upgrade the modules for %s", strings.Join(modules, ", "))
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
