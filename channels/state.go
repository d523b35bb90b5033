package channels

import "context"

// State is a channel's own small durable state, by key: a sync token, a
// login kept between restarts. BuildEnv.State is the store's, scoped to
// the channel; what a value holds is the adapter's business (a secret in
// it is protected as the store is, see docs/security.md).
type State interface {
	// GetState returns the value of key; ok is false when there is none.
	GetState(ctx context.Context, key string) (value string, ok bool, err error)
	// SetState sets key to value.
	SetState(ctx context.Context, key, value string) error
	// DeleteState removes key (no error when there is none).
	DeleteState(ctx context.Context, key string) error
}
