package agent

import "errors"

// ErrCheckpoint, as the cause of a turn's cancelled context (see
// context.WithCancelCause), asks Run to checkpoint the turn instead of
// ending it: a turn that answers a stored message (Turn.InboxID) is left
// running in the store with every step it committed, so that it can be
// resumed after a restart (Turn.ResumeTurnID). The router cancels with it
// at shutdown; any other cancellation ends the turn as cancelled.
var ErrCheckpoint = errors.New("agent: turn checkpointed for a restart")
