package reply

// The timings the tests that run the reply side through a router check.
const (
	PreviewEvery      = previewEvery
	PreviewFirstAfter = previewFirstAfter
	TypingDelay       = typingDelay
	TypingEvery       = typingEvery
	TypingInFlight    = typingInFlight
)

// ReplyKey is replyKey: the name of a reply's parts in the store.
func ReplyKey(ordinal int, text string) string { return replyKey(ordinal, text) }
