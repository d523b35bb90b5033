// Package redact replaces the gateway's secrets (model keys, bot tokens,
// the HTTP token, webhook secrets, database passwords, MCP credentials and
// the values of secret-bearing environment variables) with a marker in
// text that leaves the process: tool results before they are stored or sent
// to the model, replies to chats, dashboard pages.
package redact

import (
	"bytes"
	"cmp"
	"encoding/json"
	"html"
	"html/template"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
)

// MinLen is the shortest value treated as a secret: a shorter one would
// garble ordinary words (and a real key or token is far longer).
const MinLen = 8

// Secret is a value to hide; Name (an environment variable's, say) goes in
// the marker, "[redacted:NAME]", or "[redacted]" when empty.
type Secret struct {
	Name, Value string
}

// Redactor replaces secrets in text. Build it with New; Update swaps its
// secrets while in use (a reload). A nil *Redactor changes nothing.
type Redactor struct {
	r atomic.Pointer[strings.Replacer]
}

// New returns a Redactor for secrets.
func New(secrets []Secret) *Redactor {
	r := &Redactor{}
	r.Update(secrets)
	return r
}

// Update replaces the secrets r hides. It is safe while r is in use.
func (r *Redactor) Update(secrets []Secret) {
	r.r.Store(replacer(secrets))
}

// String returns s with every secret, as written or in a common encoding
// (URL-escaped, JSON- or HTML-escaped), replaced by its marker.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	rep := r.r.Load()
	if rep == nil {
		return s
	}
	return rep.Replace(s)
}

// replacer builds the replacements, longest first so that a secret holding
// a shorter one is replaced whole; nil when there is nothing to hide.
func replacer(secrets []Secret) *strings.Replacer {
	marks := map[string]string{} // form → marker; a named secret wins
	for _, s := range secrets {
		if len(s.Value) < MinLen {
			continue
		}
		mark := "[redacted]"
		if s.Name != "" {
			mark = "[redacted:" + s.Name + "]"
		}
		for _, f := range forms(s.Value) {
			if old, ok := marks[f]; !ok || (old == "[redacted]" && s.Name != "") {
				marks[f] = mark
			}
		}
	}
	if len(marks) == 0 {
		return nil
	}
	keys := slices.Collect(maps.Keys(marks))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), cmp.Compare(a, b)) })
	pairs := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		pairs = append(pairs, k, marks[k])
	}
	return strings.NewReplacer(pairs...)
}

// forms are the ways a value shows up in text: as is, escaped for a URL,
// inside a JSON string, and escaped for HTML (by html and html/template,
// which escapes "+" too).
func forms(v string) []string {
	out := []string{v, url.QueryEscape(v), url.PathEscape(v), html.EscapeString(v), template.HTMLEscapeString(v)}
	if b, err := json.Marshal(v); err == nil {
		out = append(out, string(b[1:len(b)-1]))
	}
	var buf bytes.Buffer
	if err := htmlText.Execute(&buf, v); err == nil {
		out = append(out, buf.String())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// htmlText escapes a value as the dashboard's templates do.
var htmlText = template.Must(template.New("").Parse("{{.}}"))

// secretWords are the parts of an environment variable's name (split at
// "_") that say its value is a secret: OPENAI_API_KEY, DISCORD_BOT_TOKEN,
// SWITCHBOARD_HTTP_TOKEN, a skill's WEATHER_API_KEY, PGPASSWORD.
var secretWords = []string{"KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "PWD", "CREDENTIAL", "CREDENTIALS", "DSN", "PGPASSWORD"}

// SecretEnvName reports whether an environment variable's name says it
// holds a secret.
func SecretEnvName(name string) bool {
	if name == "PWD" || name == "OLDPWD" { // the shell's directories
		return false
	}
	for w := range strings.SplitSeq(strings.ToUpper(name), "_") {
		if slices.Contains(secretWords, w) {
			return true
		}
	}
	return false
}

// FromEnv returns the secret-bearing variables of environ ("NAME=value"
// lines, as os.Environ gives them), plus those named in extra (variables
// granted to skills, say) whatever their names.
func FromEnv(environ []string, extra ...string) []Secret {
	var out []Secret
	for _, kv := range environ {
		name, v, ok := strings.Cut(kv, "=")
		if !ok || len(v) < MinLen || !(SecretEnvName(name) || slices.Contains(extra, name)) {
			continue
		}
		out = append(out, Secret{Name: name, Value: v})
	}
	return out
}

// Values wraps unnamed secret values (config.Config.Secrets).
func Values(vs []string) []Secret {
	out := make([]Secret, 0, len(vs))
	for _, v := range vs {
		out = append(out, Secret{Value: v})
	}
	return out
}
