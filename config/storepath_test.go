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
