package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/store"
)

// backupRefused turns `switchboard backup` down on PostgreSQL, whose own
// tool does it, with the command line to run (the DSN's password hidden).
func backupRefused(cfg *config.Config) error {
	if cfg.Store.Driver != config.StorePostgres {
		return nil
	}
	return fmt.Errorf("backup: the store is PostgreSQL; back it up with pg_dump (give the password in PGPASSWORD or ~/.pgpass):\n  pg_dump --format=custom --file=switchboard-%s.dump --dbname='%s'",
		time.Now().UTC().Format("20060102-150405"), store.RedactDSN(cfg.Store.DSN))
}

// backup writes a consistent copy of the SQLite store to args[0], or
// beside the store, while the gateway may be serving from it.
func backup(ctx context.Context, c *adminRun, args []string) error {
	dest := store.DefaultBackupPath(c.cfg.Store.Path, time.Now())
	if len(args) == 1 {
		dest = args[0]
	}
	size, err := c.st.Backup(ctx, dest)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "backed up %s to %s (%d bytes)\nto restore: stop switchboard, replace %s with it, delete %s-wal and %s-shm, start it\n",
		c.cfg.Store.Path, dest, size, c.cfg.Store.Path, c.cfg.Store.Path, c.cfg.Store.Path)
	return nil
}
