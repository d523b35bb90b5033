package agent

import (
	"slices"
)

// ToolRules shape which tools a step offers and when a turn may end
// (LOOP.md D). Skills and scheduled jobs contribute them; the zero value
// restricts nothing.
type ToolRules struct {
	// Allow, when non-nil, offers only these tools. An empty non-nil Allow
	// offers nothing: an explicit stop, never "all tools".
	Allow []string
	// Terminal tools end the turn once called successfully.
	Terminal []string
	// RequiredBeforeExit tools must have been called before the turn may end
	// with a text answer (except at the step cap).
	RequiredBeforeExit []string
	// MaxCount caps the calls per tool in a turn (each call counts once).
	MaxCount map[string]int
	// Children: after a call to the key, the next step offers only these.
	Children map[string][]string
}

// RuleSource is a Source that also contributes tool rules for the step.
type RuleSource interface {
	Source
	Rules(info TurnInfo) ToolRules
}

// Merge combines two rule sets: allowlists unite (nil stays unrestricted
// only if both are nil), terminal and required tools unite, the smaller
// max count wins, children lists unite.
func (r ToolRules) Merge(o ToolRules) ToolRules {
	out := ToolRules{
		Terminal:           union(r.Terminal, o.Terminal),
		RequiredBeforeExit: union(r.RequiredBeforeExit, o.RequiredBeforeExit),
	}
	if r.Allow != nil || o.Allow != nil {
		out.Allow = union(r.Allow, o.Allow)
		if out.Allow == nil {
			out.Allow = []string{}
		}
	}
	for _, m := range []map[string]int{r.MaxCount, o.MaxCount} {
		for k, v := range m {
			if out.MaxCount == nil {
				out.MaxCount = map[string]int{}
			}
			if cur, ok := out.MaxCount[k]; !ok || v < cur {
				out.MaxCount[k] = v
			}
		}
	}
	for _, m := range []map[string][]string{r.Children, o.Children} {
		for k, v := range m {
			if out.Children == nil {
				out.Children = map[string][]string{}
			}
			prev, seen := out.Children[k]
			out.Children[k] = union(prev, v)
			if !seen && out.Children[k] == nil {
				out.Children[k] = []string{}
			}
		}
	}
	return out
}

func union(a, b []string) []string {
	if a == nil && b == nil {
		return nil
	}
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return out
}

// AllowedTools applies the rules to the tools available in a step, given
// the names of the tools called so far in the turn, in order. It returns
// the allowed names (in the order of available) and whether the rules left
// nothing although tools were available — an explicit stop.
func AllowedTools(available []string, r ToolRules, calls []string) (allowed []string, stop bool) {
	keep := func(name string) bool {
		if r.Allow != nil && !slices.Contains(r.Allow, name) {
			return false
		}
		if n, ok := r.MaxCount[name]; ok && count(calls, name) >= n {
			return false
		}
		if len(calls) > 0 {
			if kids, ok := r.Children[calls[len(calls)-1]]; ok && !slices.Contains(kids, name) {
				return false
			}
		}
		return true
	}
	for _, name := range available {
		if keep(name) {
			allowed = append(allowed, name)
		}
	}
	return allowed, len(allowed) == 0 && len(available) > 0
}

// MissingRequired returns the required tools not called yet, in order.
func MissingRequired(r ToolRules, calls []string) []string {
	var out []string
	for _, name := range r.RequiredBeforeExit {
		if !slices.Contains(calls, name) {
			out = append(out, name)
		}
	}
	return out
}

func count(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}
