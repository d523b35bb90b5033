package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/switchboard-gateway/switchboard/skills"
	"github.com/switchboard-gateway/switchboard/store"
)

// skillsCommand lists the skill improvements the bot proposed after turns
// in which a skill was active, applies one as the skill's learned overlay,
// or reverts a skill to its file's instructions. The skill files are never
// written; a running server uses the change from its next turn.
func skillsCommand(ctx context.Context, c *adminRun, args []string) error {
	cfg, st, out := c.cfg, c.st, c.out
	files := skills.Load(os.DirFS(cfg.Skills.Dir), skills.Builtin(), skills.Env{Grants: cfg.Skills.Grants})
	overlay := skills.NewOverlay(st, nil)
	if len(args) == 1 {
		return listProposals(ctx, overlay, files, out)
	}
	switch args[1] {
	case "apply":
		id, err := strconv.ParseInt(strings.TrimPrefix(args[2], "#"), 10, 64)
		if err != nil {
			return usageError{fmt.Sprintf("%q is not a proposal number; see `switchboard skills proposals`", args[2])}
		}
		p, err := overlay.ApplyProposal(ctx, files, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("no proposal %d; see `switchboard skills proposals`", id)
		case errors.Is(err, skills.ErrStaleProposal):
			return fmt.Errorf("the instructions of skill %q changed since proposal %d was made; it no longer applies", p.Skill, id)
		case errors.Is(err, skills.ErrUnknownSkill):
			return fmt.Errorf("skill %q of proposal %d is not loaded from %s", p.Skill, id, cfg.Skills.Dir)
		case err != nil:
			return err
		}
		fmt.Fprintf(out, "applied proposal %d to skill %s: used from the next turn; undo with `switchboard skills proposals revert %s`\n", p.ID, p.Skill, p.Skill)
		return nil
	case "revert":
		p, err := overlay.Revert(ctx, args[2])
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("skill %q has no applied proposal; its file's instructions are in use", args[2])
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "reverted skill %s to its file's instructions (proposal %d is no longer used)\n", p.Skill, p.ID)
		return nil
	}
	return errUsage
}

func listProposals(ctx context.Context, overlay *skills.Overlay, files *skills.Registry, out io.Writer) error {
	ps, err := overlay.Proposals(ctx, 0)
	if err != nil {
		return err
	}
	if len(ps) == 0 {
		fmt.Fprintln(out, "no skill proposals yet")
		return nil
	}
	for _, p := range ps {
		status := p.Status
		if s, ok := files.Get(p.Skill); !ok || skills.InstructionsHash(s.Instructions) != p.BaseHash {
			status += ", stale: the skill's file changed"
		} else if p.Status == store.ProposalApplied {
			status += ", in use"
		}
		fmt.Fprintf(out, "%d  %s  %s  (%s)", p.ID, p.Skill, p.CreatedAt.Local().Format("2006-01-02 15:04"), status)
		if p.Assessment != "" {
			fmt.Fprintf(out, "  %s", p.Assessment)
		}
		fmt.Fprintln(out)
		if p.Notes != "" {
			fmt.Fprintf(out, "    why: %s\n", strings.Join(strings.Fields(p.Notes), " "))
		}
		for _, line := range strings.Split(strings.TrimSpace(p.Instructions), "\n") {
			fmt.Fprintf(out, "    | %s\n", line)
		}
	}
	fmt.Fprintln(out, "apply one with `switchboard skills proposals apply ID`; undo with `switchboard skills proposals revert NAME`")
	return nil
}
