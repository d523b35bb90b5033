// Package docs holds Switchboard's documentation (the Markdown pages in this
// folder) and the tests that keep it true: every relative link in README.md
// and docs/*.md resolves, every configuration key is in configuration.md, and
// architecture.md's package table matches `go list ./...`.
package docs
