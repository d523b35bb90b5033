package config

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the loader (parse is Load after reading
// the file, with a fixed environment so runs are reproducible). It must never
// panic, must report every failure as a *Error, and must never reach the
// strict-decoding backstop: the walker has to catch everything first.
func FuzzLoad(f *testing.F) {
	if example, err := os.ReadFile(examplePath); err == nil {
		f.Add(example)
	}
	for _, s := range []string{
		"",
		"llm:\n  model: ${M:-gpt}\n  context_window: ${CW}\n",
		"llm: {model: a, fallback_models: [x, y]}\nagent: {turn_timeout: 1m}\n",
		"a: &a [*a]\n",
		"llm: &x {model: *x}\n",
		"channels:\n  telegram:\n    allow_users: [1, '@b', ~]\n",
		"agent:\n  system_prompt: $$${X}${\n",
		"---\n---\n",
		"llm:\n  <<: {model: a}\n",
		"? [a]\n: b\n",
		"llm: !!binary aGVsbG8=\n",
	} {
		f.Add([]byte(s))
	}
	env := map[string]string{"M": "m", "CW": "1024", "X": "x: y\n- z", "OPENAI_MODEL": "gpt"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := parse("fuzz.yaml", data, lookup)
		if err != nil {
			for _, p := range problems(t, err) {
				if strings.Contains(p.Msg, "a bug") {
					t.Fatalf("walker missed a problem: %v", p)
				}
			}
			return
		}
		if cfg == nil {
			t.Fatal("parse returned neither a config nor an error")
		}
		_ = cfg.Validate()
		_ = cfg.Warnings()
		_ = cfg.Secrets()
		if r := cfg.Redacted(); r == nil {
			t.Fatal("Redacted returned nil")
		}
		var ce *Error
		if errors.As(cfg.Validate(), &ce) && ce.Msg == "" {
			t.Fatalf("validation problem without a message: %+v", ce)
		}
	})
}
