package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromInfo(t *testing.T) {
	vcs := func(settings ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Path: "m", Version: "(devel)"}}
		for i := 0; i+1 < len(settings); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return info
	}
	installed := &debug.BuildInfo{Main: debug.Module{Path: "m", Version: "v1.4.0"}}
	for _, tt := range []struct {
		name, linked string
		info         *debug.BuildInfo
		ok           bool
		want         string
	}{
		{"set at link time", "v1.2.3", installed, true, "v1.2.3"},
		{"go install module@version", "", installed, true, "v1.4.0"},
		{"linked dev counts as unset", "dev", installed, true, "v1.4.0"},
		{"a checkout", "", vcs("vcs.revision", "0123456789abcdef0123", "vcs.time", "2026-12-03T17:00:00Z", "vcs.modified", "false"), true, "dev-0123456789ab (2026-12-03T17:00:00Z)"},
		{"a checkout with changes", "", vcs("vcs.revision", "0123456789abcdef0123", "vcs.modified", "true"), true, "dev-0123456789ab-dirty"},
		{"no VCS stamp", "", vcs(), true, "dev"},
		{"no build information", "", nil, false, "dev"},
	} {
		if got := FromInfo(tt.linked, tt.info, tt.ok); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
