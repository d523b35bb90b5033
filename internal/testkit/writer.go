package testkit

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
)

// KeepWriting inserts rows named prefix0, prefix1, … into db's state table
// (the store's schema) until stop is called, so that a test can do its work
// while the store is being written; it returns once the first row is in.
// stop waits for the writer and returns its error, if any.
func KeepWriting(db *sql.DB, prefix string) (stop func() error) {
	quit, started := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() {
		defer func() {
			select {
			case <-started:
			default:
				close(started) // failed before the first row: let the caller on
			}
		}()
		for i := 0; ; i++ {
			if _, err := db.ExecContext(context.Background(),
				"INSERT INTO state (key, value, updated_at) VALUES (?, 'v', 0)", fmt.Sprintf("%s%d", prefix, i)); err != nil {
				werr = err
				return
			}
			if i == 0 {
				close(started)
			}
			select {
			case <-quit:
				return
			default:
			}
		}
	})
	<-started
	return func() error {
		close(quit)
		wg.Wait()
		return werr
	}
}
