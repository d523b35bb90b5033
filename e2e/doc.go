// Package e2e holds the end-to-end tests: the whole gateway run through
// cli.Run (and gateway.Build where a test needs the router or the store)
// against the fakes of internal/ (tgfake, discordfake, testkit's model)
// over real HTTP on 127.0.0.1, on real database files; and the binary as
// people build it (`go install module@version`, `go build` in a checkout).
package e2e
