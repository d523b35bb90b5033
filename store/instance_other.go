//go:build !unix

package store

import (
	"errors"
	"os"
)

// tryLock: no advisory locks off Unix; LockInstance reports it and the
// caller goes on without the lock.
func tryLock(*os.File) (bool, error) {
	return false, errors.New("no advisory file locks on this system")
}

func unlock(*os.File) error { return nil }
