//go:build unix

package cli

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/switchboard-gateway/switchboard/config"
)

// euid is the effective user id (a variable for the tests).
var euid = os.Geteuid

// ownerRefused turns down a command on an SQLite store run as root in a
// directory that belongs to another user (the service's state directory):
// the files root would create there (the database, its -wal and -shm, a
// backup) would be root's, and the service could not open them.
func ownerRefused(cfg *config.Config, cmd string) error {
	if euid() != 0 || cfg.Store.Driver != config.StoreSQLite || cfg.Store.Path == "" {
		return nil
	}
	dir := filepath.Dir(cfg.Store.Path)
	fi, err := os.Stat(dir)
	if err != nil {
		return nil // opening the store reports it
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid == 0 {
		return nil
	}
	name := strconv.FormatUint(uint64(st.Uid), 10)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	return fmt.Errorf("refusing to run %s as root: %s belongs to %s, and files root creates there (the database's -wal and -shm, a backup) would lock that user out; run it as %s, such as: sudo -u %s switchboard %s --config CONFIG",
		cmd, dir, name, name, name, cmd)
}
