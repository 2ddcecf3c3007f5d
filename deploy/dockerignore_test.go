package deploy

import (
	"path"
	"strings"
	"testing"
)

// TestDockerignoreKeepsLocalStateOut: the image build context leaves out what a checkout
// accumulates that is not the Go module: keys (.env), the state folder of `tribunal run`
// and `tribunal view` (.tribunal/, holding every batch judged there, at any depth) and
// the services' default data folder. A pattern is matched as the builder matches it,
// with ** for any folders.
func TestDockerignoreKeepsLocalStateOut(t *testing.T) {
	var patterns []string
	for _, line := range strings.Split(string(read(t, ".dockerignore")), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "!") {
			patterns = append(patterns, strings.Trim(line, "/"))
		}
	}
	ignored := func(p string) bool {
		for _, pat := range patterns {
			for _, prefix := range []string{p, path.Dir(p)} {
				if ok, _ := path.Match(pat, prefix); ok {
					return true
				}
				if rest, ok := strings.CutPrefix(pat, "**/"); ok {
					for dir := prefix; dir != "." && dir != "/"; dir = path.Dir(dir) {
						if m, _ := path.Match(rest, path.Base(dir)); m {
							return true
						}
					}
				}
			}
		}
		return false
	}
	for _, p := range []string{".env", ".tribunal/nats/jetstream", "examples/quickstart/.tribunal/blobs", ".tribunal", "tribunal-data/blobs"} {
		if !ignored(p) {
			t.Errorf(".dockerignore sends %s into the build context", p)
		}
	}
	for _, p := range []string{"go.mod", "cmd/tribunal/main.go", "deploy/healthcheck/main.go"} {
		if ignored(p) {
			t.Errorf(".dockerignore leaves %s out of the build context, which the images need", p)
		}
	}
}
