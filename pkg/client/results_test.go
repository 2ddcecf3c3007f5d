package client

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestWriteCFNManifest pins seed 000's manifest location and identity: "Emitted at
// <project-root>/.cfn-cache/manifests/cfn-ab-critic-<nanosecond-timestamp>.json", with
// "review_id": "ab-critic-<ns>" and "source": "cfn-ab-critic", found by the vote step's
// "discovery glob ... cfn-ab-critic-*.json".
func TestWriteCFNManifest(t *testing.T) {
	t.Parallel()
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

// TestWriteRubricFiles pins the seed's run artifacts for a feature: "Append the view to
// .../signoff.json: {feature, target, state, appearance, signed_off_at, iterations,
// reference_source, final_verdict, snapshot_baseline, human_spotcheck}" and HE-1's
// "render a candidate to RUNS/candidates/{target}-{state}-{appearance}.png". The run's
// output folder gets both, per feature.
func TestWriteRubricFiles(t *testing.T) {
	store := tempStore(t)
	png := []byte("\x89PNG\r\n\x1a\ncandidate")
	a, err := blob.PutBytes(context.Background(), store, "team-a", png, "image/png")
	if err != nil {
		t.Fatal(err)
	}
	so := argus.SignOff{Feature: "tasks", Target: "list", State: "populated", Appearance: "light", Iterations: 2,
		ReferenceSource: "human", SnapshotBaseline: "team-a/sha256/ab", HumanSpotcheck: "pending", SignedOffAt: time.Unix(0, 0).UTC()}
	loop := func(s rubric.State) json.RawMessage {
		data, _ := json.Marshal(s)
		return data
	}
	recs := []*records.Job{
		{ACID: "v1", Spec: events.JobSpec{Kind: events.KindRubric, KindPart: &rubricwire.Spec{Feature: "tasks", Target: "list", State: "populated", Appearance: "light"}},
			Loop: loop(rubric.State{SignOff: &so})},
		{ACID: "v2", Spec: events.JobSpec{Kind: events.KindRubric, KindPart: &rubricwire.Spec{Feature: "tasks", Target: "detail", State: "empty", Appearance: "dark"}},
			Loop: loop(rubric.State{Candidate: &events.Blob{SHA256: a.Ref.SHA256, MediaType: "image/png", Size: a.Size}})},
		{ACID: "AC-1", Spec: events.JobSpec{Kind: events.KindAB}},
	}
	res := &Results{Tenant: "team-a", BatchID: "b1"}
	for _, r := range recs {
		if err := res.files(context.Background(), store, r.ACID, kindFiles(r)); err != nil {
			t.Fatal(err)
		}
	}
	out, err := res.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(out, "tasks", "signoff.json"))
	if err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	if err := json.Unmarshal(data, &list); err != nil || len(list) != 1 {
		t.Fatalf("signoff.json %s: %v", data, err)
	}
	for _, k := range []string{"feature", "target", "state", "appearance", "signed_off_at", "iterations", "reference_source", "final_verdict", "snapshot_baseline", "human_spotcheck"} {
		if _, ok := list[0][k]; !ok {
			t.Errorf("signoff.json lacks %s: %s", k, data)
		}
	}
	got, err := os.ReadFile(filepath.Join(out, "tasks", "candidates", "detail-empty-dark.png"))
	if err != nil || string(got) != string(png) {
		t.Fatalf("candidate %q %v", got, err)
	}
	res.Blobs = map[string][]byte{"../escape.png": png}
	if _, err := res.Write(t.TempDir()); err == nil {
		t.Fatal("a candidate path leaving the output folder was written")
	}
}

// TestWriteBesideTheFeature pins the seed's .argus-runs/ for a batch that asks for it
// (argus_runs): the sign-off, each iteration's gate-result.json ("gates.sh ... --out
// $RUNS/gate-result.json") and the HE-1 candidate are written under the feature's own
// .argus-runs/, and signoff.json keeps the views signed off in earlier runs, as the seed
// "appends the view to .argus-runs/signoff.json" (a view signed off again replaces its
// entry). A file there that is not a JSON list is left alone; a path leaving the batch
// folder is refused.
func TestWriteBesideTheFeature(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := tempStore(t)
	gate, err := blob.PutBytes(ctx, store, "team-a", []byte(`{"feature":"tasks","all_green":false}`+"\n"), "application/json")
	if err != nil {
		t.Fatal(err)
	}
	so := func(target string, iterations int) argus.SignOff {
		return argus.SignOff{Feature: "tasks", Target: target, State: "populated", Appearance: "light", Iterations: iterations,
			ReferenceSource: "human", HumanSpotcheck: "pending", SignedOffAt: time.Unix(0, 0).UTC()}
	}
	signed := so("list", 4)
	st, _ := json.Marshal(rubric.State{SignOff: &signed, GateResults: []rubric.GateResultFile{{Iteration: 3, Blob: events.Blob{SHA256: gate.Ref.SHA256, MediaType: "application/json", Size: gate.Size}}}})
	rec := &records.Job{ACID: "v1", Spec: events.JobSpec{Kind: events.KindRubric, KindPart: &rubricwire.Spec{Feature: "tasks", Target: "list", State: "populated",
		Appearance: "light", Runs: "specs/tasks/.argus-runs"}}, Loop: st}
	res := &Results{Tenant: "team-a", BatchID: "b1"}
	if err := res.files(ctx, store, rec.ACID, kindFiles(rec)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	runs := filepath.Join(dir, "specs", "tasks", ".argus-runs")
	if err := os.MkdirAll(runs, 0o755); err != nil {
		t.Fatal(err)
	}
	// An earlier run signed off list (2 iterations) and detail.
	earlier, _ := json.Marshal([]argus.SignOff{so("list", 2), so("detail", 3)})
	if err := os.WriteFile(filepath.Join(runs, "signoff.json"), earlier, 0o644); err != nil {
		t.Fatal(err)
	}
	written, err := res.WriteBeside(dir)
	if err != nil || len(written) != 2 {
		t.Fatalf("written %v, %v", written, err)
	}
	var list []argus.SignOff
	data, _ := os.ReadFile(filepath.Join(runs, "signoff.json"))
	if err := json.Unmarshal(data, &list); err != nil || len(list) != 2 || list[0].Target != "detail" || list[1].Target != "list" || list[1].Iterations != 4 {
		t.Fatalf("signoff.json %s, %v", data, err)
	}
	got, err := os.ReadFile(filepath.Join(runs, "list-populated-light", "iteration-3", "gate-result.json"))
	if err != nil || !strings.Contains(string(got), `"all_green":false`) {
		t.Fatalf("gate-result.json %q %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tasks")); err == nil {
		t.Fatal("the output folder's layout was written beside the batch")
	}
	if err := os.WriteFile(filepath.Join(runs, "signoff.json"), []byte("# notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := res.WriteBeside(dir); err == nil || !strings.Contains(err.Error(), "not a JSON list") {
		t.Fatalf("someone's file was overwritten: %v", err)
	}
	res.beside["tasks/signoff.json"] = "../escape/signoff.json"
	if _, err := res.WriteBeside(dir); err == nil {
		t.Fatal("a path leaving the batch folder was written")
	}
}
