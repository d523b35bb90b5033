package cli

import (
	"fmt"
	"os"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/sandbox"
	"github.com/switchboard-gateway/switchboard/skills"
)

// codeArgumentFindings are check's and doctor's warnings about command
// tools that put a model-chosen value where their program reads code
// (sed's script, sh -c's text, python3's script, env's program): one per
// argument (see skills.CodeArguments and docs/tools.md).
func codeArgumentFindings(cfg *config.Config) []Finding {
	reg := skills.Load(os.DirFS(cfg.Skills.Dir), skills.Builtin(), skills.Env{})
	var out []Finding
	for _, s := range reg.Skills() {
		for _, d := range s.DefineTools {
			if d.Kind != "command" {
				continue
			}
			for _, why := range skills.CodeArguments(d.Argv) {
				out = append(out, Finding{SevWarn, "skills", fmt.Sprintf("skill %s, command tool %s: %s", s.Name, d.Name, why),
					"keep code out of the model's hands: name the script in the skill and pass the model's text as data (after --, or in a file); " +
						"sed and gawk run with --sandbox and every command runs confined, but the program still runs what it is given (docs/tools.md)"})
			}
		}
	}
	return out
}

// sandboxFindings are doctor's lines on what confines command tools on this
// host, one per protection (Landlock, non-dumpable, a separate uid, the
// descendant sweep), and whether their workspace is reachable.
func sandboxFindings(cfg *config.Config) []Finding {
	cmd := cfg.Tools.Command
	var out []Finding
	for _, p := range sandbox.Protections() {
		f := Finding{Where: "sandbox", Message: p.String()}
		if !p.Active && cmd.Enabled {
			f.Severity = SevWarn
			f.Fix = "command tools are on without this protection: docs/tools.md (Confinement) says what it needs"
		}
		out = append(out, f)
	}
	if cmd.Enabled {
		if err := sandbox.Reachable(cmd.Workspace); err != nil {
			out = append(out, Finding{SevWarn, "sandbox", err.Error(), ""})
		}
	}
	return out
}
