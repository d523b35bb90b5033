// Package buildinfo names the version of the running binary: the one set
// at link time (-ldflags "-X main.version=…"), else the module version the
// build recorded (`go install module@version`'s, or the pseudo-version `go
// build` stamps in a checkout: v0.0.0-<commit time>-<revision>, "+dirty"
// with uncommitted changes), else the VCS revision, else "dev".
package buildinfo

import "runtime/debug"

// Version is the binary's version; linked is what -X main.version set
// ("" or "dev" when nothing was).
func Version(linked string) string {
	info, ok := debug.ReadBuildInfo()
	return FromInfo(linked, info, ok)
}

// FromInfo is Version for the given build information (ok false: none).
func FromInfo(linked string, info *debug.BuildInfo, ok bool) string {
	if linked != "" && linked != "dev" {
		return linked
	}
	if !ok || info == nil {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, at string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	v := "dev-" + rev[:min(len(rev), 12)]
	if dirty {
		v += "-dirty"
	}
	if at != "" {
		v += " (" + at + ")"
	}
	return v
}
