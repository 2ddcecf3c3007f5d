package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// natsServerModule is the nats-server tribunal embeds (`tribunal serve nats`, the
// all-in-one mode); the deployments run the same release line.
const natsServerModule = "github.com/nats-io/nats-server/v2"

// EmbeddedNATSVersion is the nats-server version go.mod (in root) pins, the one every
// tribunal binary embeds, e.g. "v2.15.2"; "" if go.mod does not require it.
func EmbeddedNATSVersion(root string) string {
	name := filepath.Join(root, "go.mod")
	data, err := os.ReadFile(name)
	if err != nil {
		return ""
	}
	f, err := modfile.ParseLax(name, data, nil)
	if err != nil {
		return ""
	}
	for _, r := range f.Replace {
		if r.Old.Path == natsServerModule {
			return r.New.Version
		}
	}
	for _, r := range f.Require {
		if r.Mod.Path == natsServerModule {
			return r.Mod.Version
		}
	}
	return ""
}

// natsImageMismatch says what is wrong with a NATS container image given the embedded
// nats-server version ("" when nothing is): the image must be tagged with a release of
// the same major.minor ("nats:2.15.2-alpine", "nats:2.15-alpine"), not a floating tag,
// and no pre-release when the embedded one is stable.
func natsImageMismatch(image, embedded string) string {
	name, tag, _ := strings.Cut(image, ":")
	if name != "nats" && !strings.HasSuffix(name, "/nats") {
		return ""
	}
	want := majorMinor(strings.TrimPrefix(embedded, "v"))
	ver, _, _ := strings.Cut(tag, "-")
	if want == "" {
		return fmt.Sprintf("image %q: the embedded nats-server version is unknown", image)
	}
	if got := majorMinor(ver); got != want {
		return fmt.Sprintf("image %q: want NATS %s.x, the release tribunal embeds (%s %s)", image, want, natsServerModule, embedded)
	}
	return ""
}

// majorMinor is "2.15" of "2.15.2" or "2.15", "" if v does not start with two numbers.
func majorMinor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return ""
	}
	for _, p := range parts[:2] {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return ""
		}
	}
	return parts[0] + "." + parts[1]
}

// knownImageBinaries records where each pinned third-party image puts the program that a
// manifest may start by path (bypassing the image's entrypoint), read from the image's
// Dockerfile at that release, and whether the image has /bin/sh to run a command line.
// A manifest naming another path for that image, or a newer tag without an entry here,
// is a Problem: the container would not start.
var knownImageBinaries = map[string]struct {
	binary string
	shell  bool
}{
	// versity/versitygw Dockerfile: alpine final stage,
	// COPY --from=0 /app/cmd/versitygw/versitygw /usr/local/bin/versitygw.
	"versity/versitygw:v1.8.0": {binary: "/usr/local/bin/versitygw", shell: true},
}
