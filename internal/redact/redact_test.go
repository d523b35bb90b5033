package redact

import (
	"net/url"
	"strings"
	"sync"
	"testing"
)

func TestString(t *testing.T) {
	r := New([]Secret{
		{Name: "OPENAI_API_KEY", Value: "sk-live-abc+def/ghi"},
		{Value: "sk-live-abc+def/ghi-longer"}, // holds the shorter one
		{Value: "short"},                      // under MinLen: never replaced
		{Name: "X_TOKEN", Value: `tok"<en>&123`},
	})
	tests := []struct{ in, want string }{
		{"key=sk-live-abc+def/ghi.", "key=[redacted:OPENAI_API_KEY]."},
		{"sk-live-abc+def/ghi-longer", "[redacted]"},
		{"q=" + url.QueryEscape("sk-live-abc+def/ghi"), "q=[redacted:OPENAI_API_KEY]"},
		{"<td>sk-live-abc&#43;def/ghi</td>", "<td>[redacted:OPENAI_API_KEY]</td>"},
		{`{"v":"tok\"\u003cen\u003e\u0026123"}`, `{"v":"[redacted:X_TOKEN]"}`},
		{"tok&#34;&lt;en&gt;&amp;123", "[redacted:X_TOKEN]"},
		{"a short word", "a short word"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := r.String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestNilAndEmpty(t *testing.T) {
	var r *Redactor
	if got := r.String("sk-live-abc"); got != "sk-live-abc" {
		t.Errorf("nil redactor changed the text: %q", got)
	}
	if got := New(nil).String("sk-live-abc"); got != "sk-live-abc" {
		t.Errorf("empty redactor changed the text: %q", got)
	}
}

func TestUpdateWhileInUse(t *testing.T) {
	r := New(Values([]string{"first-secret-1"}))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				if got := r.String("x first-secret-1"); strings.Contains(got, "first-secret-1") {
					t.Errorf("leaked: %q", got)
					return
				}
			}
		})
	}
	r.Update(Values([]string{"first-secret-1", "second-secret-2"}))
	wg.Wait()
	if got := r.String("second-secret-2"); got != "[redacted]" {
		t.Errorf("after Update: %q", got)
	}
}

func TestFromEnv(t *testing.T) {
	env := []string{"OPENAI_API_KEY=sk-0123456789", "HOME=/root/very/long/home", "PWD=/work/somewhere/else",
		"SSH_AUTH_SOCK=/tmp/ssh-agent.sock", "DB_PASSWORD=correct-horse", "SHORT_TOKEN=abc", "WEATHER=granted-value-1",
		"GITHUB_TOKEN=ghp_abcdefghijkl"}
	got := map[string]string{}
	for _, s := range FromEnv(env, "WEATHER") {
		got[s.Name] = s.Value
	}
	want := map[string]string{"OPENAI_API_KEY": "sk-0123456789", "DB_PASSWORD": "correct-horse",
		"WEATHER": "granted-value-1", "GITHUB_TOKEN": "ghp_abcdefghijkl"}
	if len(got) != len(want) {
		t.Fatalf("FromEnv = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("FromEnv[%s] = %q, want %q", k, got[k], v)
		}
	}
}
