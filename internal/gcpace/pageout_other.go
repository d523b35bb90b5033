//go:build !linux

package gcpace

// pageOutBinary does nothing off Linux (see pageout_linux.go).
func pageOutBinary() {}

// readAheadBinary does nothing off Linux (see pageout_linux.go).
func readAheadBinary() {}
