package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A SQLite database not named in the file defaults to the file's
// directory; a file in the working directory, a store.path written in the
// file, PostgreSQL and no file at all behave as before; a database an
// earlier version left in the working directory stays in use, with a
// warning.
func TestStoreBesideConfig(t *testing.T) {
	tests := []struct {
		name     string
		file     string // relative to the test's root; "" for no file
		body     string
		oldDB    bool   // switchboard.db exists in the working directory
		besideDB bool   // switchboard.db exists beside the file
		want     string // store.path, relative to the root (or as is, if no "/" needed)
		warn     string
	}{
		{"elsewhere, unset", "etc/config.yaml", "llm: {model: m}\n", false, false, "etc/switchboard.db", ""},
		{"in the working directory", "work/config.yaml", "llm: {model: m}\n", false, false, "switchboard.db", ""},
		{"written relative", "etc/config.yaml", "store: {path: data/x.db}\n", false, false, "data/x.db", ""},
		{"written as the default name", "etc/config.yaml", "store: {path: switchboard.db}\n", false, false, "switchboard.db", ""},
		{"postgres", "etc/config.yaml", "store: {driver: postgres, dsn: 'postgres://u@h/d'}\n", false, false, "switchboard.db", ""},
		{"no file", "", "", false, false, "switchboard.db", ""},
		{"an earlier version's database in the working directory", "etc/config.yaml", "llm: {model: m}\n", true, false, "switchboard.db",
			"store.path is not set, so the database belongs beside the configuration, in ROOT/etc/switchboard.db; ROOT/work/switchboard.db (where earlier versions put it) is used instead"},
		{"both exist: the one beside wins", "etc/config.yaml", "llm: {model: m}\n", true, true, "etc/switchboard.db", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, nil)
			root, _ := filepath.EvalSymlinks(t.TempDir())
			work := filepath.Join(root, "work")
			if err := os.MkdirAll(filepath.Join(root, "etc"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(work, 0o700); err != nil {
				t.Fatal(err)
			}
			t.Chdir(work)
			touch := func(p string) {
				if err := os.WriteFile(p, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tt.oldDB {
				touch(filepath.Join(work, "switchboard.db"))
			}
			path := ""
			if tt.file != "" {
				path = filepath.Join(root, tt.file)
				if err := os.WriteFile(path, []byte(tt.body), 0o600); err != nil {
					t.Fatal(err)
				}
				if tt.besideDB {
					touch(filepath.Join(filepath.Dir(path), "switchboard.db"))
				}
			}
			cfg, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if strings.HasPrefix(want, "etc/") {
				want = filepath.Join(root, want)
			}
			if cfg.Store.Path != want {
				t.Errorf("store.path = %q, want %q", cfg.Store.Path, want)
			}
			warnings := strings.Join(cfg.Warnings(), "\n")
			if tt.warn == "" && strings.Contains(warnings, "store.path") {
				t.Errorf("unexpected warning: %s", warnings)
			}
			if w := strings.ReplaceAll(tt.warn, "ROOT", root); !strings.Contains(warnings, w) {
				t.Errorf("warnings lack %q:\n%s", w, warnings)
			}
		})
	}
}

// A fresh configuration's skills folder is beside it and never the Go
// package "skills" of a clone; a written skills.dir stays as written; an
// operator's skills folder from an earlier version stays in use, with a
// warning.
func TestSkillsBesideConfig(t *testing.T) {
	tests := []struct {
		name   string
		file   string // relative to the root (the clone, the working directory)
		body   string
		legacy string // what ./skills holds: "go" (the clone's package), "skill", ""
		want   string // skills.dir, relative to the root
		warn   string
	}{
		{"a fresh config.yaml in a clone", "config.yaml", "llm: {model: m}\n", "go", "switchboard-skills", ""},
		{"a config elsewhere", "etc/config.yaml", "llm: {model: m}\n", "go", "etc/switchboard-skills", ""},
		{"no file in a clone", "", "", "go", "switchboard-skills", ""},
		{"written", "config.yaml", "skills: {dir: skills}\n", "go", "skills", ""},
		{"an earlier version's skills folder", "etc/config.yaml", "llm: {model: m}\n", "skill", "skills",
			"skills.dir is not set, so the skills belong beside the configuration, in ROOT/etc/switchboard-skills; ROOT/skills (where earlier versions looked) is used instead"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, nil)
			root, _ := filepath.EvalSymlinks(t.TempDir())
			for _, d := range []string{"etc", "skills"} {
				if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			t.Chdir(root)
			switch tt.legacy {
			case "go":
				if err := os.WriteFile(filepath.Join(root, "skills", "skills.go"), []byte("package skills\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			case "skill":
				if err := os.WriteFile(filepath.Join(root, "skills", "greet.yaml"), []byte("name: greet\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			path := ""
			if tt.file != "" {
				path = filepath.Join(root, tt.file)
				if err := os.WriteFile(path, []byte(tt.body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := filepath.Abs(cfg.Skills.Dir)
			if want := filepath.Join(root, tt.want); got != want {
				t.Errorf("skills.dir = %q (%s), want %s", cfg.Skills.Dir, got, want)
			}
			if tt.legacy == "go" && tt.body != "skills: {dir: skills}\n" && got == filepath.Join(root, "skills") {
				t.Errorf("skills.dir is the clone's Go package %s", got)
			}
			warnings := strings.Join(cfg.Warnings(), "\n")
			if tt.warn == "" && strings.Contains(warnings, "skills.dir") {
				t.Errorf("unexpected warning: %s", warnings)
			}
			if w := strings.ReplaceAll(tt.warn, "ROOT", root); !strings.Contains(warnings, w) {
				t.Errorf("warnings lack %q:\n%s", w, warnings)
			}
		})
	}
}
