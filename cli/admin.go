package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/store"
)

// storeCommand is an admin command that works on the database directly
// (so it also works while the service runs). Each runs in the same
// scaffold: the configuration is loaded (by RunWith), the store is opened,
// the command runs, the store is closed, and what it returns becomes the
// exit code.
type storeCommand struct {
	name string
	// usage is printed, with exit code 2, when the arguments do not fit.
	usage string
	// ready reports whether args are worth opening the store for; the
	// command itself may still find them wrong (errUsage).
	ready func(args []string) bool
	// refuse, when set, may turn the command down before the store is
	// opened: its error is printed, exit code 2.
	refuse func(cfg *config.Config) error
	run    func(ctx context.Context, c *adminRun, args []string) error
}

// adminRun is what a store command works with.
type adminRun struct {
	cfg *config.Config
	st  *store.Store
	out io.Writer
}

// storeCommandNamed returns the admin command on the store called name.
func storeCommandNamed(name string) (storeCommand, bool) {
	c, ok := storeCommandFor(name)
	c.name = name
	return c, ok
}

func storeCommandFor(name string) (storeCommand, bool) {
	switch name {
	case "pairing":
		return storeCommand{
			usage: "usage: switchboard pairing list | approve CODE | deny CODE | revoke CHANNEL USER_ID\n",
			ready: func(args []string) bool { return len(args) > 0 },
			run:   pairing,
		}, true
	case "schedule":
		return storeCommand{
			usage: "usage: switchboard schedule list | cancel ID\n",
			ready: func(args []string) bool { return len(args) > 0 },
			run:   scheduleCommand,
		}, true
	case "skills":
		return storeCommand{
			usage: "usage: switchboard skills proposals [apply ID | revert NAME]\n",
			ready: func(args []string) bool {
				return len(args) > 0 && args[0] == "proposals" && (len(args) == 1 || len(args) == 3)
			},
			run: skillsCommand,
		}, true
	case "backup":
		return storeCommand{
			usage:  "usage: switchboard backup [PATH]\n",
			ready:  func(args []string) bool { return len(args) <= 1 },
			refuse: backupRefused,
			run:    backup,
		}, true
	}
	return storeCommand{}, false
}

// loadStoreConfig loads the configuration for a command on the store: only
// the store's settings are checked (config.ValidateStore), so that an
// operator can approve a pairing code as the service user without the
// secrets in the unit's EnvironmentFile.
func loadStoreConfig(path string) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	if err := cfg.ValidateStore(); err != nil {
		return nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	return cfg, nil
}

// errUsage from a command prints its usage, exit code 2.
var errUsage = errors.New("usage")

// usageError is a wrong argument: its message, exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// do is the scaffold: open the store, run, close, report.
func (c storeCommand) do(ctx context.Context, cfg *config.Config, args []string, out, errw io.Writer) int {
	if !c.ready(args) {
		fmt.Fprint(errw, c.usage)
		return ExitConfig
	}
	if err := ownerRefused(cfg, c.name); err != nil {
		fmt.Fprintf(errw, "switchboard: %v\n", err)
		return ExitConfig
	}
	if c.refuse != nil {
		if err := c.refuse(cfg); err != nil {
			fmt.Fprintf(errw, "switchboard: %v\n", err)
			return ExitConfig
		}
	}
	st, err := store.OpenDriver(ctx, cfg.Store.Driver, cfg.Store.Source())
	if err != nil {
		fmt.Fprintf(errw, "switchboard: %v\n", err)
		return ExitFail
	}
	defer st.Close()
	err = c.run(ctx, &adminRun{cfg: cfg, st: st, out: out}, args)
	var ue usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, errUsage):
		fmt.Fprint(errw, c.usage)
		return ExitConfig
	case errors.As(err, &ue):
		fmt.Fprintf(errw, "switchboard: %v\n", err)
		return ExitConfig
	default:
		fmt.Fprintf(errw, "switchboard: %v\n", err)
		return ExitFail
	}
}

// pairing lists, approves, denies or revokes access requests made with
// pairing codes.
func pairing(ctx context.Context, c *adminRun, args []string) error {
	st, out := c.st, c.out
	switch {
	case args[0] == "list" && len(args) == 1:
		list, err := st.PendingPairings(ctx)
		if err != nil {
			return err
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
		return nil
	case args[0] == "approve" && len(args) == 2:
		p, err := st.ApprovePairing(ctx, args[1])
		switch {
		case errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("no pairing code %q; see `switchboard pairing list`", args[1])
		case errors.Is(err, store.ErrPairingExpired):
			return fmt.Errorf("code %s has expired; ask the user to write to the bot again for a new one", args[1])
		case err != nil:
			return err
		}
		fmt.Fprintf(out, "approved %s user %s; they can talk to the bot now\n", p.Channel, p.UserID)
		return nil
	case args[0] == "deny" && len(args) == 2:
		p, err := st.DenyPairing(ctx, args[1])
		switch {
		case errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("no pending pairing code %q (unknown, expired or already handled); see `switchboard pairing list`", args[1])
		case err != nil:
			return err
		}
		fmt.Fprintf(out, "denied %s user %s; the code no longer works\n", p.Channel, p.UserID)
		return nil
	case args[0] == "revoke" && len(args) == 3:
		ok, err := st.RevokeUser(ctx, args[1], args[2])
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%s user %s was not approved by pairing (users in allow_users are removed in the config)", args[1], args[2])
		}
		fmt.Fprintf(out, "revoked %s user %s\n", args[1], args[2])
		return nil
	}
	return errUsage
}
