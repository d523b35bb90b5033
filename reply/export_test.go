package reply

// The timings the tests that run the reply side through a router check.
const (
	PreviewEvery      = previewEvery
	PreviewFirstAfter = previewFirstAfter
	TypingDelay       = typingDelay
	TypingEvery       = typingEvery
	TypingInFlight    = typingInFlight
)
