package main

import (
	"strings"
	"testing"
)

// TestJudgeModeFlags: a judge mode the deployment cannot run is refused before any work,
// exit 2, saying what to change: the batch mode needs the openai judge, and a mode is
// direct or batch.
func TestJudgeModeFlags(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "batch.yaml", "--judge-mode", "batch"}, "--judge-mode batch needs --judge openai"},
		{[]string{"run", "batch.yaml", "--judge-mode", "later"}, "want direct or batch"},
		{[]string{"run", "batch.yaml", "--judge", "openai", "--judge-model", "m", "--judge-mode", "batch", "--judge-batch-max-requests", "60000"}, "max requests 60000"},
	} {
		_, stderr, code := run(t, dir, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", c.args, code, stderr, c.want)
		}
	}
}
