package telemetry

import (
	"runtime/debug"
)

// BuildVersion is the version a tribunal binary reports (`tribunal version`,
// tribunal_build_info, the trace resource's service.version): set, the version given at
// build time with -ldflags "-X main.version=..." (a release image's), when it is neither
// empty nor "dev"; otherwise what the Go toolchain recorded in the binary. `go install
// module@v0.3.1` records v0.3.1, and a `go build` in a git checkout a version derived
// from the commit (v0.0.0-20260101120000-8bff6ab1c2d3, "+dirty" for uncommitted changes),
// both used as they are; a build that recorded no module version says "dev", followed by
// the commit it was built from when known ("dev+8bff6ab1c2d3", ".dirty" added for
// uncommitted changes). Without this every `go install` build said "dev".
func BuildVersion(set string, info *debug.BuildInfo) string {
	if set != "" && set != "dev" {
		return set
	}
	if info == nil {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	revision, modified := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if revision == "" {
		return "dev"
	}
	v := "dev+" + revision[:min(12, len(revision))]
	if modified {
		v += ".dirty"
	}
	return v
}

// ReadBuildVersion is BuildVersion of the running binary's own build information.
func ReadBuildVersion(set string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return BuildVersion(set, info)
}
