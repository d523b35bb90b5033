//go:build !cgo || !linux

package gcpace

// trimC does nothing without cgo on Linux (see trim_cgo.go).
func trimC() {}
