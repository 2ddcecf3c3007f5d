package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/jsontest"
)

// TestJSONKeysAreSnakeCase: `run --json`, the results.json it writes, and the other
// commands' --json name every key in snake_case, the summary's included (its Total,
// ExitCode and Manifests were Go field names once).
func TestJSONKeysAreSnakeCase(t *testing.T) {
	dir := projectDir(t)
	out := t.TempDir()
	stdout, stderr, code := runState(t, dir, "run", "examples/quickstart", "--json", "--out", out)
	if code != 1 {
		t.Fatalf("run --json: exit %d\n%s", code, stderr)
	}
	docs := map[string][]byte{"run --json": []byte(stdout)}
	results, _ := filepath.Glob(filepath.Join(out, "quickstart-*", "results.json"))
	if len(results) != 1 {
		t.Fatalf("results.json: %v", results)
	}
	docs["results.json"], _ = os.ReadFile(results[0])
	for _, args := range [][]string{{"validate", "examples/quickstart", "--json"}, {"prune", "--dry-run", "--json"}} {
		stdout, stderr, _ := runState(t, dir, args...)
		if stdout == "" {
			t.Fatalf("%v printed nothing: %s", args, stderr)
		}
		docs[args[0]+" --json"] = []byte(stdout)
	}
	for name, data := range docs {
		bad, err := jsontest.NonSnakeKeys(data, nil)
		if err != nil || len(bad) > 0 {
			t.Errorf("%s: keys not in snake_case: %v %v", name, bad, err)
		}
	}
	var res struct {
		Summary map[string]any `json:"summary"`
	}
	if err := json.Unmarshal(docs["results.json"], &res); err != nil || res.Summary["exit_code"] != float64(1) || res.Summary["total"] != float64(8) {
		t.Fatalf("summary %v %v", res.Summary, err)
	}
}
