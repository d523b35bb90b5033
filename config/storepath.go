package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// storeNextTo makes the SQLite database default to the directory of the
// configuration file at path when the file does not set store.path: a
// configuration in ~/.config/switchboard or /etc/switchboard keeps its
// database beside it, whatever the working directory. A file in the working
// directory changes nothing (the default stays "switchboard.db"), and a
// store.path written in the file stays as written (a relative one relative
// to the working directory, as before).
//
// One exception keeps setups from before this rule working: when the file
// is elsewhere, nothing is beside it yet, and the working directory holds
// switchboard.db (where earlier versions put the database), that file stays
// in use, and Warnings says so.
func (c *Config) storeNextTo(path string) {
	if c.src == nil || c.src.lines["store.path"] != 0 || c.Store.Driver != StoreSQLite || c.Store.Path != defaultStorePath {
		return
	}
	dir := filepath.Dir(path)
	if sameDir(dir, ".") {
		return
	}
	beside := filepath.Join(dir, defaultStorePath)
	if !exists(beside) && exists(defaultStorePath) {
		wd, _ := os.Getwd()
		c.src.storeNote = "store.path is not set, so the database belongs beside the configuration, in " + beside +
			"; " + filepath.Join(wd, defaultStorePath) + " (where earlier versions put it) is used instead, as it exists and that one does not: set store.path to keep it there, or move it"
		return
	}
	c.Store.Path = beside
}

// sameDir reports whether a and b name the same directory.
func sameDir(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA != nil || errB != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return os.SameFile(fa, fb)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
