// Package confine keeps paths inside one directory, the workspace. The
// send_file tool, the workspace file tools and skills' command tools ask it
// whether a path stays there; each words the refusal for its own users.
//
// A path is judged twice. By its text (Relative): no NUL byte, not absolute,
// no ".." element. By where it leads (Dir.Resolve): every symbolic link in
// the part of the path that exists is followed, and the result must be the
// directory or inside it, the directory itself taken with its own links
// resolved. The part that does not exist yet (a file about to be written) is
// kept as written: a missing name cannot be a link.
//
// The checks say why a path is refused. Code that opens files should also
// go through an os.Root on the directory (Dir.OpenRoot), which enforces the
// same rule atomically when the file is opened; a program run by a command
// tool cannot, so for it these checks are the whole guard.
package confine

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Why a path is refused; match with errors.Is. The texts complete a
// sentence that starts with the path ("x" is an absolute path).
var (
	ErrNUL      = errors.New("contains a NUL byte")
	ErrAbsolute = errors.New("is an absolute path")
	ErrDotDot   = errors.New("contains a .. path element")
	ErrBroken   = errors.New("cannot be resolved (a broken symbolic link?)")
	ErrOutside  = errors.New("resolves outside the directory")
)

// Relative checks a path meant relative to a confined directory by its text
// alone: ErrNUL, ErrAbsolute or ErrDotDot, or nil.
func Relative(p string) error {
	switch {
	case strings.ContainsRune(p, 0):
		return ErrNUL
	case filepath.IsAbs(p):
		return ErrAbsolute
	case HasDotDot(p):
		return ErrDotDot
	}
	return nil
}

// HasDotDot reports whether p has a ".." element ("a/../b", "..", but not
// "..b" or "a..").
func HasDotDot(p string) bool {
	return slices.Contains(strings.Split(filepath.ToSlash(p), "/"), "..")
}

// Dir is a directory paths are confined to: absolute, with its symbolic
// links resolved.
type Dir struct{ path string }

// At returns the confined directory dir, absolute or relative to the
// working directory. dir need not exist yet: the part of it that does not
// is kept as written. The error is filepath.Abs's, or wraps ErrBroken when
// a link on the way to dir leads nowhere.
func At(dir string) (Dir, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Dir{}, err
	}
	real, err := resolve(abs)
	if err != nil {
		return Dir{}, &os.PathError{Op: "resolve", Path: abs, Err: err}
	}
	return Dir{path: real}, nil
}

// Path is the directory: absolute, its links resolved.
func (d Dir) Path() string { return d.path }

// OpenRoot opens the directory as an os.Root, which refuses at every call,
// without races, a name that leaves it through ".." or a link.
func (d Dir) OpenRoot() (*os.Root, error) { return os.OpenRoot(d.path) }

// Resolve returns where p leads, p being relative to d or absolute: its
// links followed as far as it exists, the rest as written (cleaned). It
// returns ErrBroken when a link leads nowhere, and ErrOutside when the result
// is not d or inside it. Resolve does not judge p's text: call Relative
// first where p must be relative (or use Check).
func (d Dir) Resolve(p string) (string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(d.path, p)
	}
	real, err := resolve(p)
	if err != nil {
		return "", err
	}
	if !d.contains(real) {
		return "", ErrOutside
	}
	return real, nil
}

// Check judges a path meant relative to d: Relative, then Resolve.
func (d Dir) Check(rel string) error {
	if err := Relative(rel); err != nil {
		return err
	}
	_, err := d.Resolve(rel)
	return err
}

// contains reports whether the clean absolute path p is d or inside it.
func (d Dir) contains(p string) bool {
	rel, err := filepath.Rel(d.path, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// resolve follows the links of the longest part of the absolute path p that
// exists and appends the rest: a name that does not exist is not a link.
func resolve(p string) (string, error) {
	rest := ""
	for {
		if _, err := os.Lstat(p); err == nil {
			break
		}
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", ErrBroken
	}
	return filepath.Join(real, rest), nil
}
