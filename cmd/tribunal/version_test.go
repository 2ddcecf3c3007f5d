package main

import (
	"debug/buildinfo"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// TestVersionFromBuildInfo: a binary built without -ldflags (as `go build` and `go
// install` build it) reports the version its build information records, not "dev".
func TestVersionFromBuildInfo(t *testing.T) {
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	want := telemetry.BuildVersion("", info)
	out, stderr, code := run(t, t.TempDir(), "version")
	if code != 0 || strings.TrimSpace(out) != "tribunal "+want {
		t.Fatalf("version: exit %d, %q, want %q\n%s", code, out, "tribunal "+want, stderr)
	}
	if want == "dev" {
		t.Logf("the test binary records no module version nor commit (built outside a checkout?): %s", info.Main.Version)
	}
}
