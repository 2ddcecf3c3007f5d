package client

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
)

// TestCFNRoot: the seed's manifests go under the project root, the nearest folder holding
// .cfn-cache or .git, never above a repository's root; a folder with neither is its own.
func TestCFNRoot(t *testing.T) {
	t.Parallel()
	top := t.TempDir()
	repo := filepath.Join(top, "repo")
	sub := filepath.Join(repo, "pkg", "deep")
	for _, d := range []string{filepath.Join(repo, ".git"), sub, filepath.Join(top, ".cfn-cache"), filepath.Join(top, "plain", "x")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ dir, want string }{
		{sub, repo},  // the repository's root, not the .cfn-cache above it
		{repo, repo}, // at the root itself
		{filepath.Join(top, "plain", "x"), top},
	} {
		if got, err := CFNRoot(tc.dir); err != nil || got != tc.want {
			t.Errorf("CFNRoot(%s) = %s, %v; want %s", tc.dir, got, err, tc.want)
		}
	}
	// A project with its own .cfn-cache inside the repository keeps its manifests there.
	inner := filepath.Join(repo, "pkg")
	if err := os.Mkdir(filepath.Join(inner, ".cfn-cache"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, _ := CFNRoot(sub); got != inner {
		t.Errorf("CFNRoot(%s) = %s; want %s", sub, got, inner)
	}
	lone := t.TempDir()
	if got, _ := CFNRoot(lone); got != lone && !strings.HasPrefix(lone, got) {
		t.Errorf("CFNRoot(%s) = %s", lone, got)
	}
}

// TestWriteCFN: the manifest written for the seed's vote step carries only compared and
// blocked records, under its seed name, at the root or at --out's file.
func TestWriteCFN(t *testing.T) {
	t.Parallel()
	p := ab.Pair{Ours: "o.md", Reference: "r.md"}
	m := ab.BuildManifest("ab-t-b", "tribunal", time.Unix(0, 0), 0.75, []ab.Comparison{
		ab.Compared("AC-1", p, ab.Assign("AC-1", 0), ab.RawVerdict{RawWinner: "B", Confidence: 0.8, BiggestGap: "g"}),
		ab.SchemaViolation("AC-2", p, ab.Assign("AC-2", 0), errors.New("confidence 7: must be a number in [0,1]")),
	})
	r := &Results{Manifest: &m}
	root := t.TempDir()
	now := time.Unix(0, 1234567890123)
	path, err := r.WriteCFN(root, now)
	if err != nil || path != filepath.Join(root, ".cfn-cache", "manifests", "cfn-ab-critic-1234567890123.json") {
		t.Fatalf("WriteCFN = %s, %v", path, err)
	}
	out := filepath.Join(t.TempDir(), "nested", "m.json")
	if ok, err := r.WriteCFNTo(out, now); !ok || err != nil {
		t.Fatalf("WriteCFNTo = %v, %v", ok, err)
	}
	for _, f := range []string{path, out} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			ReviewID    string `json:"review_id"`
			Source      string `json:"source"`
			Comparisons []struct {
				Status, BlockedReason string
			} `json:"comparisons"`
		}
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		if got.ReviewID != "ab-critic-1234567890123" || got.Source != "cfn-ab-critic" || len(got.Comparisons) != 2 ||
			got.Comparisons[0].Status != "compared" || got.Comparisons[1].Status != "blocked" || strings.Contains(string(data), "schema_violation") ||
			!strings.Contains(string(data), `"blocked_reason": "schema violation: confidence 7: must be a number in [0,1]"`) {
			t.Errorf("%s: %s", f, data)
		}
	}
}
