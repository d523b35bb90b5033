package skills

// Grants: a skill is untrusted until the operator grants it what its tools
// reach. A skill's http tools may only reach the hosts granted to it
// (skills.grants.NAME.hosts), and its ${VAR} only expand the variables
// granted to it (skills.grants.NAME.env) that are not the gateway's own
// secrets. A skill that asks for more than it is granted is not offered.

import (
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/switchboard-gateway/switchboard/config"
)

// GrantError is a tool asking for a host or a variable its skill is not
// granted: the skill is withheld, which is not a mistake in the file.
type GrantError struct {
	Field string
	Msg   string
}

func (e *GrantError) Error() string { return e.Field + ": " + e.Msg }

// grantOf is the grant of the skill a tool source ("skill:NAME") names.
func grantOf(source string, env Env) (string, config.SkillGrant) {
	name, _ := strings.CutPrefix(source, "skill:")
	return name, env.Grants[name]
}

// hostGranted reports whether a URL's scheme and host (host or host:port)
// are among the granted hosts.
func hostGranted(g config.SkillGrant, scheme, hostport string) bool {
	host, p := hostport, ""
	if h, port, err := net.SplitHostPort(hostport); err == nil {
		host, p = h, port
	}
	if p == "" {
		p = map[string]string{"http": "80", "https": "443"}[strings.ToLower(scheme)]
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return false
	}
	ip, _ := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	for _, h := range g.Hosts {
		e, err := config.ParseGrantHost(h)
		if err == nil && e.Matches(host, ip, uint16(port)) {
			return true
		}
	}
	return false
}

// Needs is what a skill asks for: the hosts its http tools reach, the
// variables they expand, the programs its command tools run, and whether
// its instructions are in every turn.
type Needs struct {
	Hosts    []string
	Env      []string
	Commands []string
	AlwaysOn bool
}

// Needs reads what the skill's definitions ask for.
func (s *Skill) Needs() Needs {
	n := Needs{AlwaysOn: s.Activation == Always && strings.TrimSpace(s.Instructions) != ""}
	for _, d := range s.DefineTools {
		switch d.Kind {
		case "http":
			if t, err := parseTemplate(d.URL, false); err == nil {
				if u, err := url.Parse(t.literal()); err == nil && u.Host != "" {
					n.Hosts = append(n.Hosts, u.Host)
				}
			}
			for _, v := range d.Headers {
				t, _ := parseTemplate(v, true)
				for _, seg := range t.segs {
					if seg.env != "" {
						n.Env = append(n.Env, seg.env)
					}
				}
			}
		case "command":
			if len(d.Argv) > 0 {
				n.Commands = append(n.Commands, strings.Join(d.Argv, " "))
			}
		}
	}
	for _, l := range []*[]string{&n.Hosts, &n.Env, &n.Commands} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
	}
	return n
}

// secretValue reports whether v is, or holds, one of the gateway's secret
// values (a "Bearer <key>" too); secrets shorter than minSecretLen only
// when they are the whole value, or every value would match.
func secretValue(v string, secrets []string) bool {
	return v != "" && slices.ContainsFunc(secrets, func(s string) bool {
		return s != "" && (v == s || len(s) >= minSecretLen && strings.Contains(v, s))
	})
}
