package config

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"strings"
)

// Error is one configuration problem. Load and Validate return either a
// single *Error or several joined with errors.Join; errors.As finds them in
// both cases, which is how `switchboard check` tells a bad configuration
// (exit status 2) from other failures.
type Error struct {
	File string // the configuration file, if the problem is in one
	Line int    // 1-based line in File; 0 when unknown
	Key  string // dotted key path such as "llm.model"; empty for whole-file problems
	Msg  string // what is wrong and what to do, starting with Key when there is one

	err error // underlying cause, for errors.Is (fs.ErrNotExist, for example)
}

// Error renders the problem as "file:line: msg", leaving out what is unknown.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":")
			b.WriteString(strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.err }

// joinErrors joins problems in file order, the order an editor visits them.
// Problems without a line keep their relative order after those with one.
func joinErrors(errs []*Error) error {
	if len(errs) == 0 {
		return nil
	}
	slices.SortStableFunc(errs, func(a, b *Error) int {
		return cmp.Compare(lineOrMax(a.Line), lineOrMax(b.Line))
	})
	if len(errs) == 1 {
		return errs[0]
	}
	all := make([]error, len(errs))
	for i, e := range errs {
		all[i] = e
	}
	return errors.Join(all...)
}

func lineOrMax(line int) int {
	if line <= 0 {
		return int(^uint(0) >> 1)
	}
	return line
}
