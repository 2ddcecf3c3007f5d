package client

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/ab"
)

// TestWriteCFNManifest pins seed 000's manifest location and identity: "Emitted at
// <project-root>/.cfn-cache/manifests/cfn-ab-critic-<nanosecond-timestamp>.json", with
// "review_id": "ab-critic-<ns>" and "source": "cfn-ab-critic", found by the vote step's
// "discovery glob ... cfn-ab-critic-*.json".
func TestWriteCFNManifest(t *testing.T) {
	root := t.TempDir()
	comps := []ab.Comparison{ab.Compared("AC-7", ab.Pair{Ours: "o.md", Reference: "r.md"}, ab.Assign("AC-7", 0), ab.RawVerdict{RawWinner: "B", Confidence: 0.8, BiggestGap: "g"})}
	m := ab.BuildManifest("ab-team-b1", "tribunal", time.Unix(0, 0), 0.75, comps)
	res := &Results{BatchID: "b1", Manifest: &m}
	at := time.Unix(1_700_000_000, 123456789)
	paths := []string{}
	for i := 0; i < 2; i++ {
		p, err := res.WriteCFN(root, at.Add(time.Duration(i)))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	found, err := filepath.Glob(filepath.Join(root, ".cfn-cache", "manifests", "cfn-ab-critic-*.json"))
	if err != nil || len(found) != 2 {
		t.Fatalf("the seed's glob finds %q (%v), want both manifests", found, err)
	}
	data, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	var got ab.Manifest
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	ns := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(paths[0]), "cfn-ab-critic-"), ".json")
	if ns != "1700000000123456789" || got.ReviewID != "ab-critic-"+ns || got.Source != "cfn-ab-critic" {
		t.Fatalf("file %s: review_id %q source %q", paths[0], got.ReviewID, got.Source)
	}
	if got.Status != ab.ManifestStatus || len(got.Comparisons) != 1 || len(got.Suggestions) != 1 || got.Comparisons[0].Winner != ab.WinnerReference {
		t.Fatalf("the manifest's content must be the batch's: %s", data)
	}
	if res.Manifest.ReviewID != "ab-team-b1" {
		t.Fatal("WriteCFN changed the batch's own manifest")
	}
	if p, err := (&Results{}).WriteCFN(root, at); p != "" || err != nil {
		t.Fatalf("a batch without ab ACs wrote %q (%v)", p, err)
	}
}
