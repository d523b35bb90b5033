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

// skillsNextTo makes the skills folder default to switchboard-skills
// beside the configuration file at path when the file does not set
// skills.dir, as storeNextTo does for the database: never the "skills"
// folder of a clone, which holds Go source. A file in the working
// directory keeps the relative default.
//
// A setup from before this rule keeps working: when nothing is at the new
// place and the working directory has a skills folder of skill files (no
// Go source), that folder stays in use, and Warnings says so.
func (c *Config) skillsNextTo(path string) {
	if c.src == nil || c.src.lines["skills.dir"] != 0 || c.Skills.Dir != defaultSkillsDir {
		return
	}
	beside := defaultSkillsDir
	if dir := filepath.Dir(path); !sameDir(dir, ".") {
		beside = filepath.Join(dir, defaultSkillsDir)
	}
	if !exists(beside) && isSkillsFolder(legacySkillsDir) {
		wd, _ := os.Getwd()
		c.src.skillsNote = "skills.dir is not set, so the skills belong beside the configuration, in " + beside +
			"; " + filepath.Join(wd, legacySkillsDir) + " (where earlier versions looked) is used instead, as it exists and that one does not: set skills.dir to keep it, or move the files"
		beside = legacySkillsDir
	}
	c.Skills.Dir = beside
}

// isSkillsFolder reports whether dir exists and holds no Go source (a
// clone's skills package is not an operator's skills folder).
func isSkillsFolder(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".go" {
			return false
		}
	}
	return true
}
