package config

import (
	"cmp"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// redactedMark replaces secrets in Redacted output.
const redactedMark = "***"

// secretFields returns pointers to the settings that hold secrets: the
// string fields tagged `secret:"true"`, the registered sections' included.
func (c *Config) secretFields() []*string {
	var out []*string
	c.eachString(func(f stringField) {
		if f.field.Tag.Get("secret") == "true" {
			out = append(out, f.p)
		}
	})
	return out
}

// urlFields returns pointers to the settings that hold URLs, which may carry
// a password (https://user:password@host): the fields tagged `secret:"url"`.
func (c *Config) urlFields() []*string {
	var out []*string
	c.eachString(func(f stringField) {
		if f.field.Tag.Get("secret") == "url" {
			out = append(out, f.p)
		}
	})
	return out
}

// Redacted returns a deep copy of c with every non-empty secret replaced by
// "***" and passwords in URLs masked, safe to print (`switchboard check`).
// Empty secrets stay empty, so the output still shows which are unset.
func (c *Config) Redacted() *Config {
	if c == nil {
		return nil
	}
	r := *c
	r.LLM.FallbackModels = slices.Clone(c.LLM.FallbackModels)
	r.LLM.Models = maps.Clone(c.LLM.Models)
	r.Channels = c.Channels.Clone()
	r.Schedule.Jobs = slices.Clone(c.Schedule.Jobs)
	r.Tools.Web.AllowHosts = slices.Clone(c.Tools.Web.AllowHosts)
	for _, p := range r.secretFields() {
		if *p != "" {
			*p = redactedMark
		}
	}
	for _, p := range r.urlFields() {
		*p = redactURL(*p)
	}
	r.Store.DSN = redactDSN(c.Store.DSN)
	return &r
}

// Secrets returns every non-empty secret value, including passwords in URLs,
// without duplicates and longest first, so a log redactor that replaces them
// in order never leaves the tail of a longer secret that contains a shorter
// one.
func (c *Config) Secrets() []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, p := range c.secretFields() {
		out = append(out, *p)
	}
	for _, p := range c.urlFields() {
		out = append(out, urlPassword(*p))
	}
	out = append(out, dsnPasswords(c.Store.DSN)...)
	// MCP servers get credentials through env and headers: treat every value
	// as a secret (a short one would redact ordinary words, so skip those).
	for _, srv := range c.MCP.Servers {
		for _, e := range srv.Env {
			if _, v, ok := strings.Cut(e, "="); ok && len(v) >= 8 {
				out = append(out, v)
			}
		}
		for _, h := range srv.Headers {
			if _, v, ok := strings.Cut(h, ":"); ok && len(strings.TrimSpace(v)) >= 8 {
				out = append(out, strings.TrimSpace(v))
			}
		}
	}
	out = slices.DeleteFunc(out, func(s string) bool { return s == "" })
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), cmp.Compare(a, b))
	})
	return slices.Compact(out)
}

func urlPassword(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return ""
	}
	p, _ := u.User.Password()
	return p
}

// redactURL masks the password in a URL; other strings are returned as is.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); !ok {
		return s
	}
	user := url.User(u.User.Username()).String()
	u.User = nil
	// url.URL.String would escape the mask to %2A%2A%2A.
	prefix := "//"
	if u.Scheme != "" {
		prefix = u.Scheme + ":" + prefix
	}
	rest, ok := strings.CutPrefix(u.String(), prefix)
	if !ok {
		return redactedMark // an odd shape; hide all of it rather than leak
	}
	return prefix + user + ":" + redactedMark + "@" + rest
}
