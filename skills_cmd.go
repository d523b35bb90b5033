package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"switchboard/config"
	"switchboard/skills"
	"switchboard/store"
)

// skillsCommand lists the skill improvements the bot proposed after turns
// in which a skill was active, applies one as the skill's learned overlay,
// or reverts a skill to its file's instructions. The skill files are never
// written; a running server uses the change from its next turn.
func skillsCommand(ctx context.Context, cfg *config.Config, args []string, out, errw io.Writer) int {
	usage := "usage: switchboard skills proposals [apply ID | revert NAME]\n"
	if len(args) == 0 || args[0] != "proposals" || (len(args) != 1 && len(args) != 3) {
		fmt.Fprint(errw, usage)
		return exitConfig
	}
	st, ok := openStore(ctx, cfg, errw)
	if !ok {
		return exitFail
	}
	defer st.Close()
	files := skills.Load(os.DirFS(cfg.Skills.Dir), skills.Builtin(), skills.Env{})
	overlay := skills.NewOverlay(st, nil)
	if len(args) == 1 {
		return listProposals(ctx, overlay, files, out, errw)
	}
	switch args[1] {
	case "apply":
		id, err := strconv.ParseInt(strings.TrimPrefix(args[2], "#"), 10, 64)
		if err != nil {
			fmt.Fprintf(errw, "switchboard: %q is not a proposal number; see `switchboard skills proposals`\n", args[2])
			return exitConfig
		}
		p, err := overlay.ApplyProposal(ctx, files, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			fmt.Fprintf(errw, "switchboard: no proposal %d; see `switchboard skills proposals`\n", id)
			return exitFail
		case errors.Is(err, skills.ErrStaleProposal):
			fmt.Fprintf(errw, "switchboard: the instructions of skill %q changed since proposal %d was made; it no longer applies\n", p.Skill, id)
			return exitFail
		case errors.Is(err, skills.ErrUnknownSkill):
			fmt.Fprintf(errw, "switchboard: skill %q of proposal %d is not loaded from %s\n", p.Skill, id, cfg.Skills.Dir)
			return exitFail
		case err != nil:
			fmt.Fprintf(errw, "switchboard: %v\n", err)
			return exitFail
		}
		fmt.Fprintf(out, "applied proposal %d to skill %s: used from the next turn; undo with `switchboard skills proposals revert %s`\n", p.ID, p.Skill, p.Skill)
		return exitOK
	case "revert":
		p, err := overlay.Revert(ctx, args[2])
		if errors.Is(err, store.ErrNotFound) {
			fmt.Fprintf(errw, "switchboard: skill %q has no applied proposal; its file's instructions are in use\n", args[2])
			return exitFail
		}
		if err != nil {
			fmt.Fprintf(errw, "switchboard: %v\n", err)
			return exitFail
		}
		fmt.Fprintf(out, "reverted skill %s to its file's instructions (proposal %d is no longer used)\n", p.Skill, p.ID)
		return exitOK
	}
	fmt.Fprint(errw, usage)
	return exitConfig
}

func listProposals(ctx context.Context, overlay *skills.Overlay, files *skills.Registry, out, errw io.Writer) int {
	ps, err := overlay.Proposals(ctx, 0)
	if err != nil {
		fmt.Fprintf(errw, "switchboard: %v\n", err)
		return exitFail
	}
	if len(ps) == 0 {
		fmt.Fprintln(out, "no skill proposals yet")
		return exitOK
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
	return exitOK
}
