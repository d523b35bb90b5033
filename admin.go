package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"switchboard/config"
	"switchboard/store"
)

// openStore opens the database for an admin command, reporting a failure.
func openStore(ctx context.Context, cfg *config.Config, errw io.Writer) (*store.Store, bool) {
	st, err := store.OpenDriver(ctx, cfg.Store.Driver, cfg.Store.Source())
	if err != nil {
		fmt.Fprintf(errw, "switchboard: %v\n", err)
		return nil, false
	}
	return st, true
}

// pairing lists, approves or revokes access requests made with pairing codes.
func pairing(ctx context.Context, cfg *config.Config, args []string, out, errw io.Writer) int {
	usage := "usage: switchboard pairing list | approve CODE | revoke CHANNEL USER_ID\n"
	if len(args) == 0 {
		fmt.Fprint(errw, usage)
		return exitConfig
	}
	st, ok := openStore(ctx, cfg, errw)
	if !ok {
		return exitFail
	}
	defer st.Close()
	switch {
	case args[0] == "list" && len(args) == 1:
		list, err := st.PendingPairings(ctx)
		if err != nil {
			fmt.Fprintf(errw, "switchboard: %v\n", err)
			return exitFail
		}
		if len(list) == 0 {
			fmt.Fprintln(out, "no pending pairing requests")
		}
		for _, p := range list {
			name := p.Username
			if name != "" {
				name = " @" + name
			}
			fmt.Fprintf(out, "%s  %s user %s%s, expires %s\n", p.Code, p.Channel, p.UserID, name, p.ExpiresAt.Format("15:04 MST"))
		}
		return exitOK
	case args[0] == "approve" && len(args) == 2:
		p, err := st.ApprovePairing(ctx, args[1])
		switch {
		case errors.Is(err, store.ErrNotFound):
			fmt.Fprintf(errw, "switchboard: no pairing code %q; see `switchboard pairing list`\n", args[1])
			return exitFail
		case errors.Is(err, store.ErrPairingExpired):
			fmt.Fprintf(errw, "switchboard: code %s has expired; ask the user to write to the bot again for a new one\n", args[1])
			return exitFail
		case err != nil:
			fmt.Fprintf(errw, "switchboard: %v\n", err)
			return exitFail
		}
		fmt.Fprintf(out, "approved %s user %s; they can talk to the bot now\n", p.Channel, p.UserID)
		return exitOK
	case args[0] == "revoke" && len(args) == 3:
		ok, err := st.RevokeUser(ctx, args[1], args[2])
		if err != nil {
			fmt.Fprintf(errw, "switchboard: %v\n", err)
			return exitFail
		}
		if !ok {
			fmt.Fprintf(errw, "switchboard: %s user %s was not approved by pairing (users in allow_users are removed in the config)\n", args[1], args[2])
			return exitFail
		}
		fmt.Fprintf(out, "revoked %s user %s\n", args[1], args[2])
		return exitOK
	}
	fmt.Fprint(errw, usage)
	return exitConfig
}
