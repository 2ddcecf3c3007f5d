package telemetry_test

import (
	"runtime/debug"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// TestBuildVersion: the -ldflags version wins; without it, the module version `go
// install` records, else the commit and whether the tree was modified, else "dev".
func TestBuildVersion(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		name, set string
		info      *debug.BuildInfo
		want      string
	}{
		{"ldflags", "0.1.0", &debug.BuildInfo{Main: debug.Module{Version: "v9.9.9"}}, "0.1.0"},
		{"go install module@version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.1"}}, "v0.3.1"},
		{"ldflags dev is unset", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.1"}}, "v0.3.1"},
		{"pseudo-version from the checkout", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260101120000-8bff6ab1c2d3+dirty"}}, "v0.0.0-20260101120000-8bff6ab1c2d3+dirty"},
		{"devel with commit", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("8bff6ab1c2d3e4f5a6b7", "false")}, "dev+8bff6ab1c2d3"},
		{"devel modified", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("8bff6ab1c2d3e4f5a6b7", "true")}, "dev+8bff6ab1c2d3.dirty"},
		{"devel without vcs", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"no build info", "", nil, "dev"},
	} {
		if got := telemetry.BuildVersion(tc.set, tc.info); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if v := telemetry.ReadBuildVersion(""); v == "" {
		t.Error("the test binary's version is empty")
	}
}
