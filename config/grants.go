package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/switchboard-gateway/switchboard/tools/allowhost"
)

// secretEnv are the environment variables that hold the gateway's own
// secrets (the env tags of its secret fields): the model key, the bot
// tokens, the HTTP token. A skill never expands them, whatever
// skills.grants says.
var secretEnv = sync.OnceValue(func() []string {
	var out []string
	Default().eachString(func(f stringField) {
		if env := f.field.Tag.Get("env"); env != "" && f.field.Tag.Get("secret") == "true" {
			out = append(out, env)
		}
	})
	return out
})

// IsGatewaySecretEnv reports whether the environment variable name holds
// one of the gateway's own secrets, or is one of its own SWITCHBOARD_*
// settings: a skill may never expand it.
func IsGatewaySecretEnv(name string) bool {
	return slices.Contains(secretEnv(), name) || strings.HasPrefix(name, "SWITCHBOARD_")
}

var skillNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`) })

// GrantHostSyntax says what a skills.grants.NAME.hosts entry may be.
const GrantHostSyntax = "write a host name (api.weather.example) or an address (10.0.0.5), optionally with a port (127.0.0.1:8081, [fd00::5]:8443)"

// ParseGrantHost reads one skills.grants.NAME.hosts entry: a host name or an
// address with an optional port; a network is not a host.
func ParseGrantHost(s string) (allowhost.Entry, error) {
	e, err := allowhost.Parse(s)
	if err != nil {
		return e, err
	}
	if e.Host == "" && e.Prefix.Bits() != e.Prefix.Addr().BitLen() {
		return e, fmt.Errorf("is a network; grant each host")
	}
	return e, nil
}

// validateGrants checks skills.grants: skill names, hosts and variable
// names, and that no grant names a gateway secret.
func (c *Config) validateGrants(v *checker) {
	for _, name := range sortedNames(c.Skills.Grants) {
		g := c.Skills.Grants[name]
		key := "skills.grants." + name
		if !skillNameRE().MatchString(name) {
			v.add(key, fmt.Sprintf("%q is not a skill name: lowercase letters, digits, - or _ (up to 64), as in the skill's name: field", name))
		}
		for i, h := range g.Hosts {
			if _, err := ParseGrantHost(h); err != nil {
				v.add(fmt.Sprintf("%s.hosts[%d]", key, i), fmt.Sprintf("%q %v; %s", h, err, GrantHostSyntax))
			}
		}
		for i, e := range g.Env {
			k := fmt.Sprintf("%s.env[%d]", key, i)
			switch {
			case !envName().MatchString(e):
				// Not quoted: a ${VAR} written here was already expanded by
				// the loader, and its value may be a secret.
				v.add(k, "is not a variable name: write the name alone, letters, digits and _, such as WEATHER_API_KEY (not ${WEATHER_API_KEY}, which the configuration expands to the value)")
			case IsGatewaySecretEnv(e):
				v.add(k, fmt.Sprintf("%s holds the gateway's own secret or setting; a skill never gets it. Give the skill its own key in another variable", e))
			}
		}
	}
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
