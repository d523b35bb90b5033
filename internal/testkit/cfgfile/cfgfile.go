// Package cfgfile writes a config.Config as the YAML file that config.Load
// reads back to the same value, so that tests and benchmarks build their
// configuration as a typed value instead of formatting YAML by hand.
//
// Start from config.Default(), set what the test needs, and write it:
//
//	cfg := config.Default()
//	cfg.LLM.BaseURL, cfg.LLM.Model = fake.URL, "fake-model"
//	cfg.Store.Path = filepath.Join(dir, "switchboard.db")
//	path := cfgfile.Write(t, cfg)
//
// The file holds only the keys whose values differ from the built-in
// defaults, as a hand-written file would. Two things do not round-trip as
// values and are handled here:
//   - a $ in a string would start an environment reference for Load; it is
//     written as $$ (a literal $);
//   - the settings Load fills from the environment when they are empty
//     (llm.base_url, llm.api_key, llm.model, channels.telegram.token,
//     channels.discord.token) cannot be written as "empty even if the
//     environment has a value": like a file without them, the written file
//     takes them from the environment. llm.base_url equal to the default is
//     omitted too, so OPENAI_BASE_URL overrides it as it would the default.
//
// An optional setting (a pointer, such as channels.discord.shard_id) is
// written when it is set, 0 included, and left out when it is nil.
package cfgfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/switchboard-gateway/switchboard/config"
)

// Marshal returns cfg as a YAML configuration file.
func Marshal(cfg *config.Config) ([]byte, error) {
	var got, def yaml.Node
	if err := got.Encode(cfg); err != nil {
		return nil, fmt.Errorf("cfgfile: %w", err)
	}
	if err := def.Encode(config.Default()); err != nil {
		return nil, fmt.Errorf("cfgfile: %w", err)
	}
	diff := changed(&got, &def)
	if diff == nil {
		return nil, nil // every value is the default: an empty file
	}
	escape(diff)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(diff); err != nil {
		return nil, fmt.Errorf("cfgfile: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("cfgfile: %w", err)
	}
	return b.Bytes(), nil
}

// WriteFile writes cfg to path, readable by its owner only (it may hold
// secrets).
func WriteFile(path string, cfg *config.Config) error {
	data, err := Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// Write writes cfg to config.yaml in a new temporary directory of t and
// returns its path.
func Write(t testing.TB, cfg *config.Config) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := WriteFile(path, cfg); err != nil {
		t.Fatal(err)
	}
	return path
}

// changed returns the parts of mapping n that differ from mapping def, or
// nil if none does.
func changed(n, def *yaml.Node) *yaml.Node {
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: n.Tag}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		d := lookup(def, k.Value)
		switch {
		case d == nil:
		case v.Kind == yaml.MappingNode && d.Kind == yaml.MappingNode:
			if v = changed(v, d); v == nil {
				continue
			}
		case same(v, d):
			continue
		}
		out.Content = append(out.Content, k, v)
	}
	if len(out.Content) == 0 {
		return nil
	}
	return out
}

func lookup(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// same reports whether two encoded values are equal.
func same(a, b *yaml.Node) bool {
	if a.Kind != b.Kind || a.Tag != b.Tag || a.Value != b.Value || len(a.Content) != len(b.Content) {
		return false
	}
	for i := range a.Content {
		if !same(a.Content[i], b.Content[i]) {
			return false
		}
	}
	return true
}

// escape doubles every $ in string values (Load reads $$ as a literal $),
// and writes lists of scalars on one line, as people write them.
func escape(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		n.Value = strings.ReplaceAll(n.Value, "$", "$$")
	}
	if n.Kind == yaml.SequenceNode && !slices.ContainsFunc(n.Content, func(c *yaml.Node) bool { return c.Kind != yaml.ScalarNode }) {
		n.Style = yaml.FlowStyle
	}
	for i, c := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 0 {
			continue // keys are never expanded
		}
		escape(c)
	}
}
