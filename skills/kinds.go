package skills

// This file turns a define_tools entry (ToolDef) into an agent.Tool of one
// of three kinds: an HTTP request (httptool.go), a command run in the
// workspace (command.go), or a templated sub-call to the model (prompt.go).
// The templates all three share are in template.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/tools"
)

const (
	// defaultMaxChars fits a page of output in the model's context; it caps
	// http bodies and, as tools.command.max_output_chars, command output.
	defaultMaxChars = 20000
	// resultSlack is room above a cap for "HTTP 200" and truncation notes, so
	// the loop's own cap (agent.Tool.MaxResultChars) never cuts them off.
	resultSlack = 200
)

// Env is what building a tool may use.
type Env struct {
	Model Model
	// HTTPClient sends http tools' requests; nil means a client with the
	// tool's timeout. It is copied, never modified: the copy refuses
	// redirects to another host.
	HTTPClient *http.Client
	Command    CommandPolicy
	// Getenv expands ${VAR} in http header values at call time; nil means
	// os.Getenv. Only the variables granted to the skill are read.
	Getenv func(string) string
	// Grants are skills.grants: by skill name, the hosts its http tools may
	// reach and the variables its ${VAR} may expand.
	Grants map[string]config.SkillGrant
	// Secrets are the gateway's secret values (config.Secrets): a ${VAR}
	// whose value is one of them is never sent.
	Secrets []string
	// Resolver and InterfaceAddrs are for the outbound guard of http tools
	// (tests set them); nil: the system's resolver, net.InterfaceAddrs.
	Resolver       tools.Resolver
	InterfaceAddrs func() ([]netip.Addr, error)
}

// DefError is one problem with a tool definition, naming the field as it is
// written in YAML ("url", "argv[2]", "headers.Authorization").
type DefError struct {
	Field string
	Msg   string
}

func (e *DefError) Error() string { return e.Field + ": " + e.Msg }

var toolKinds = []string{"http", "command", "prompt"}

var toolNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`) })

// Build turns a definition into a tool; source is "skill:<name>". It
// validates the definition and returns every problem found (errors.Join of
// *DefError), each naming its field. A valid definition that reaches a
// host or expands a ${VAR} env.Grants does not give the skill returns the
// *GrantError values instead.
func (d ToolDef) Build(source string, env Env) (*agent.Tool, error) {
	b := &defBuilder{def: d}
	b.skill, b.grant = grantOf(source, env)
	if !toolNameRE().MatchString(d.Name) {
		b.add("name", "%q must be letters, digits, _ or - (up to 64)", d.Name)
	}
	if d.Timeout < 0 {
		b.add("timeout", "must not be negative")
	}
	if d.MaxResponseChars < 0 {
		b.add("max_response_chars", "must not be negative")
	}
	t := &agent.Tool{Name: d.Name, Description: d.Description, ConcurrencySafe: d.ConcurrencySafe,
		RequiresApproval: d.RequiresApproval, Source: source}
	before := len(b.errs)
	t.Parameters, b.params = b.parameters()
	if t.Parameters != nil && len(b.errs) == before {
		if err := t.Compile(); err != nil {
			if se, ok := errors.AsType[*agent.SchemaError](err); ok {
				b.add(strings.TrimSuffix("parameters."+se.Path, "."), "not valid JSON Schema: %s", se.Msg)
			} else {
				if inner := errors.Unwrap(err); inner != nil {
					err = inner
				}
				b.add("parameters", "not a valid JSON Schema: %v", err)
			}
		}
	}

	b.onlyFor("http", defField{"method", d.Method != ""}, defField{"url", d.URL != ""}, defField{"headers", len(d.Headers) > 0}, defField{"body", d.Body != ""})
	b.onlyFor("command", defField{"argv", len(d.Argv) > 0})
	b.onlyFor("prompt", defField{"prompt", d.Prompt != ""}, defField{"system", d.System != ""})

	var call func(context.Context, json.RawMessage) (string, error)
	var maxChars int
	var err error
	switch d.Kind {
	case "http":
		call, maxChars = b.http(env)
	case "command":
		call, maxChars, err = b.command(env.Command)
	case "prompt":
		call, maxChars = b.prompt(env.Model)
	case "":
		b.add("kind", "required: http, command or prompt")
	default:
		b.add("kind", "%q is not a kind; use http, command or prompt", d.Kind)
	}
	if len(b.errs) > 0 {
		return nil, errors.Join(b.errs...)
	}
	if len(b.grants) > 0 { // a valid definition asking for more than its skill has
		return nil, errors.Join(b.grants...)
	}
	if err != nil {
		return nil, err
	}
	t.Fn = call
	// An HTTP response is whatever the remote service returned: the loop
	// labels it as data, not instructions, like web_fetch's pages.
	// A command's output is a program's, reading whatever it reads: data too.
	t.Untrusted = d.Kind == "http" || d.Kind == "command"
	// Tools that may change something (a command, an HTTP call that is not
	// a GET) ask first, or are withdrawn, once untrusted content is in the
	// turn (agent.Tool.Acts).
	t.Acts = d.Kind == "command" || (d.Kind == "http" && d.Method != "" && !strings.EqualFold(d.Method, http.MethodGet))
	if maxChars > 0 {
		t.MaxResultChars = maxChars + resultSlack
	}
	return t, nil
}

// defBuilder collects the problems of one definition.
type defBuilder struct {
	def    ToolDef
	params map[string]bool // declared parameter names
	errs   []error
	skill  string            // the skill defining the tool
	grant  config.SkillGrant // what the operator granted it
	grants []error           // *GrantError: what it asks for beyond the grant
}

// ungranted records that the tool asks for more than its skill is granted.
func (b *defBuilder) ungranted(field, format string, args ...any) {
	b.grants = append(b.grants, &GrantError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

// grantErrors returns the *GrantError values of err (from Build) when
// that is all it holds: the definition is valid, its skill is not granted
// what it asks for.
func grantErrors(err error) ([]*GrantError, bool) {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var out []*GrantError
	for _, e := range errs {
		ge, ok := e.(*GrantError)
		if !ok {
			return nil, false
		}
		out = append(out, ge)
	}
	return out, len(out) > 0
}

func (b *defBuilder) add(field, format string, args ...any) {
	b.errs = append(b.errs, &DefError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

// defField is a definition field and whether it is set.
type defField struct {
	name string
	set  bool
}

// onlyFor reports fields set on a tool of another kind.
func (b *defBuilder) onlyFor(kind string, fields ...defField) {
	if b.def.Kind == kind || !slices.Contains(toolKinds, b.def.Kind) {
		return // an unknown kind is reported once, as such
	}
	for _, f := range fields {
		if f.set {
			b.add(f.name, "is only for kind %s; this tool is kind %s", kind, b.def.Kind)
		}
	}
}

// parameters checks the arguments schema and returns it as JSON (nil when
// the tool takes no arguments) with the declared property names.
func (b *defBuilder) parameters() (json.RawMessage, map[string]bool) {
	declared := map[string]bool{}
	p := b.def.Parameters
	if p == nil {
		return nil, declared
	}
	schema := make(map[string]any, len(p)+1)
	for k, v := range p {
		schema[k] = v
	}
	switch typ, ok := schema["type"]; {
	case !ok:
		schema["type"] = "object"
	case typ != "object":
		b.add("parameters.type", "%v: the arguments are an object; write type: object", typ)
	}
	if props, ok := schema["properties"]; ok {
		m, isMap := props.(map[string]any)
		if !isMap {
			b.add("parameters.properties", "must be a mapping of parameter names to schemas")
		}
		for name := range m {
			declared[name] = true
		}
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		b.add("parameters", "cannot be written as JSON: %v", err)
		return nil, declared
	}
	return raw, declared
}

// template parses a template field and checks that its placeholders are
// declared parameters.
func (b *defBuilder) template(field, s string, withEnv bool) (tmpl, bool) {
	t, err := parseTemplate(s, withEnv)
	if err != nil {
		b.add(field, "%v", err)
		return t, false
	}
	ok := true
	for i, seg := range t.segs {
		if seg.param == "" || b.params[seg.param] {
			continue
		}
		ok = false
		hint := "declare it under parameters.properties, or write {{ and }} for literal braces"
		if i > 0 && strings.HasSuffix(t.segs[i-1].text, "$") {
			hint = "${VAR} environment references are only allowed in http header values"
		}
		b.add(field, "placeholder {%s} is not a declared parameter; %s", seg.param, hint)
	}
	for _, seg := range t.segs {
		switch {
		case seg.env == "":
		case config.IsGatewaySecretEnv(seg.env):
			b.ungranted(field, "${%s} is the gateway's own secret; a skill never gets it, even if granted", seg.env)
		case !slices.Contains(b.grant.Env, seg.env):
			b.ungranted(field, "${%s} is not granted to skill %q; the operator may grant it under skills.grants.%s.env", seg.env, b.skill, b.skill)
		}
	}
	return t, ok
}
