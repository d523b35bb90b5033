package config

import (
	"net/url"
	"strings"
)

// A PostgreSQL DSN (store.dsn) may carry a password in three places: the
// URL's user info, a password= query value, or a password= key in the
// key=value form (quoted or not). Secrets reports them and Redacted masks
// them; the rest of the DSN (host, database, options) stays readable.

// dsnPasswords returns the passwords in dsn.
func dsnPasswords(dsn string) []string {
	if isDSNURL(dsn) {
		u := splitDSNURL(dsn)
		out := []string{u.password}
		if pw, err := url.PathUnescape(u.password); err == nil && pw != u.password {
			out = append(out, pw)
		}
		for _, p := range u.params {
			if k, v, _ := strings.Cut(p, "="); k == "password" {
				out = append(out, v)
				if pw, err := url.QueryUnescape(v); err == nil && pw != v {
					out = append(out, pw)
				}
			}
		}
		return out
	}
	var out []string
	for _, kv := range dsnPairs(dsn) {
		if kv.key == "password" {
			out = append(out, kv.value)
		}
	}
	return out
}

// redactDSN masks the passwords in dsn.
func redactDSN(dsn string) string {
	if isDSNURL(dsn) {
		u := splitDSNURL(dsn)
		var b strings.Builder
		b.WriteString(u.scheme)
		if u.hasUser {
			b.WriteString(u.user)
			if u.hasPassword {
				b.WriteString(":" + redactedMark)
			}
			b.WriteString("@")
		}
		b.WriteString(u.hostPath)
		for i, p := range u.params {
			if k, _, _ := strings.Cut(p, "="); k == "password" {
				p = "password=" + redactedMark
			}
			if i == 0 {
				b.WriteString("?")
			} else {
				b.WriteString("&")
			}
			b.WriteString(p)
		}
		return b.String()
	}
	var b strings.Builder
	last := 0
	for _, kv := range dsnPairs(dsn) {
		if kv.key == "password" {
			b.WriteString(dsn[last:kv.start])
			b.WriteString(redactedMark)
			last = kv.end
		}
	}
	b.WriteString(dsn[last:])
	return b.String()
}

// dsnURL is a postgres:// DSN cut into its parts the way pgx reads it,
// without url.Parse, so that a DSN that does not parse is still redacted:
// the user info ends at the first @ unless a / comes first.
type dsnURL struct {
	scheme, user, password string
	hasUser, hasPassword   bool
	hostPath               string   // host, port and database
	params                 []string // key=value, as written
}

func splitDSNURL(dsn string) dsnURL {
	var u dsnURL
	rest := dsn
	for _, p := range []string{"postgresql://", "postgres://"} {
		if r, ok := strings.CutPrefix(dsn, p); ok {
			u.scheme, rest = p, r
			break
		}
	}
	if i := strings.IndexAny(rest, "@/"); i >= 0 && rest[i] == '@' {
		u.hasUser = true
		u.user, u.password, u.hasPassword = strings.Cut(rest[:i], ":")
		rest = rest[i+1:]
	}
	var query string
	u.hostPath, query, _ = strings.Cut(rest, "?")
	if query != "" {
		u.params = strings.Split(query, "&")
	}
	return u
}

func isDSNURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// dsnPair is one key=value of a DSN; start and end delimit the value as
// written (with its quotes).
type dsnPair struct {
	key, value string
	start, end int
}

// dsnPairs reads key=value pairs as libpq does: spaces around = are
// allowed, a value may be 'quoted', with \' and \\ escaped inside.
func dsnPairs(s string) []dsnPair {
	var out []dsnPair
	i := 0
	skip := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
			i++
		}
	}
	for {
		skip()
		k := i
		for i < len(s) && s[i] != '=' && s[i] != ' ' && s[i] != '\t' {
			i++
		}
		key := s[k:i]
		skip()
		if i >= len(s) || s[i] != '=' {
			return out
		}
		i++
		skip()
		start := i
		var val strings.Builder
		if i < len(s) && s[i] == '\'' {
			for i++; i < len(s) && s[i] != '\''; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				val.WriteByte(s[i])
			}
			if i < len(s) {
				i++ // the closing quote
			}
		} else {
			for i < len(s) && s[i] != ' ' && s[i] != '\t' && s[i] != '\n' {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				val.WriteByte(s[i])
				i++
			}
		}
		out = append(out, dsnPair{key: key, value: val.String(), start: start, end: i})
	}
}
