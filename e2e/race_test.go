//go:build race

package e2e

// raceBuild: this test binary was built with -race, so the builds the tests
// make use -race too and find every dependency (go-sqlite3's cgo build
// above all) compiled in Go's cache already.
const raceBuild = true
