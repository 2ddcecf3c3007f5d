package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

var snakeKey = regexp.MustCompile(`^[a-z0-9]+(_[a-z0-9]+)*$`)

// nonSnakeKeys lists the object keys of a JSON document that are not snake_case.
func nonSnakeKeys(t *testing.T, data []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, data)
	}
	var bad []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if !snakeKey.MatchString(k) {
					bad = append(bad, path+"."+k)
				}
				walk(path+"."+k, e)
			}
		case []any:
			for _, e := range x {
				walk(path+"[]", e)
			}
		}
	}
	walk("", v)
	return bad
}

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
		if bad := nonSnakeKeys(t, data); len(bad) > 0 {
			t.Errorf("%s: keys not in snake_case: %v", name, bad)
		}
	}
	var res struct {
		Summary map[string]any `json:"summary"`
	}
	if err := json.Unmarshal(docs["results.json"], &res); err != nil || res.Summary["exit_code"] != float64(1) || res.Summary["total"] != float64(8) {
		t.Fatalf("summary %v %v", res.Summary, err)
	}
}
