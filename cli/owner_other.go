//go:build !unix

package cli

import "github.com/switchboard-gateway/switchboard/config"

// ownerRefused: no file owners to protect off Unix.
func ownerRefused(*config.Config, string) error { return nil }
