package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	checkliststages "github.com/tribunal-dev/tribunal/examples/kinds/checklist/stages"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge/scripted"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/registry"
)

// TestExampleKindEndToEnd proves the seam a kind plugs into: the checklist kind
// (examples/kinds/checklist), one folder and the one registry line below, runs through
// the real services with nothing else changed. The client plans and uploads its jobs, the
// renderer, gater and judge run its stages (the offline judge answering it through the
// registry), the aggregator decides with its rules and folds its manifest, the results
// show its rows, and the audit re-derives every decision from the stream, clean.
func TestExampleKindEndToEnd(t *testing.T) {
	defer registry.Add(checkliststages.Kind{})() // the registry line

	env := NewEnv(t)
	p := Scripted(t, scripted.Options{Fixtures: map[string]string{"checklist": "pass"}},
		map[string]any{"CL-2": map[string]any{"unmet": []int{2}, "note": "the notes give no date"}})
	env.Start(p, "all", bus.Services...)

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte("# Release 1.3\nOut on 4 May; fixes the login loop.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	items := "names the release\nnames the date"
	b := &batch.Batch{Dir: dir, Path: filepath.Join(dir, "batch.yaml"), File: batch.File{Version: 1, Name: "checklist", Kind: "checklist",
		ACs: []batch.AC{
			{ID: "CL-1", Criterion: items, Part: &checkliststages.Entry{Output: "Release 1.2, out on 3 May."}},
			{ID: "CL-2", Criterion: items, Part: &checkliststages.Entry{Output: "Release 1.2."}},
			{ID: "CL-3", Criterion: items, Part: &checkliststages.Entry{OutputFile: "notes.md"}},
			{ID: "CL-4", Criterion: items, Part: &checkliststages.Entry{OutputFile: "absent.md"}},
		}}}
	for i := range b.ACs {
		b.ACs[i].Index, b.ACs[i].Line = i, i+1
	}
	sub := env.Submit(b, e2eTenant)
	res := env.Wait(sub, 60*time.Second)

	rows := rowsByID(res.Rows)
	for id, want := range map[string]struct{ status, verdict string }{
		"CL-1": {"compared", "pass"}, "CL-2": {"compared", "fail"}, "CL-3": {"compared", "pass"}, "CL-4": {"blocked", ""},
	} {
		r := rows[id]
		if r.Kind != "checklist" || r.Status != want.status || r.Verdict != want.verdict {
			t.Errorf("%s: %s %s %q (%s); want %s %q", id, r.Kind, r.Status, r.Verdict, r.Detail+r.Reason, want.status, want.verdict)
		}
	}
	if d := rows["CL-2"].Detail; d != "1 of 2 items met: the notes give no date" {
		t.Errorf("CL-2 detail %q", d)
	}
	if res.Summary.Total != 4 || res.Summary.ExitCode != kind.ExitFindings {
		t.Errorf("summary %+v; want 4 jobs, exit %d (a finding and a blocked job)", res.Summary, kind.ExitFindings)
	}
	var m struct {
		Kind    events.Kind `json:"kind"`
		Results []struct {
			ACID      string `json:"ac_id"`
			Checklist *struct {
				Unmet []int `json:"unmet"`
			} `json:"checklist"`
		} `json:"results"`
	}
	if err := json.Unmarshal(res.Manifests["checklist"], &m); err != nil {
		t.Fatalf("checklist manifest %s: %v", res.Manifests["checklist"], err)
	}
	if m.Kind != "checklist" || len(m.Results) != 4 || m.Results[1].ACID != "CL-2" || m.Results[1].Checklist == nil || len(m.Results[1].Checklist.Unmet) != 1 {
		t.Errorf("checklist manifest %s", res.Manifests["checklist"])
	}
	for _, j := range env.jobs(sub.BatchID) {
		if j.Status == events.StatusCompared && (len(j.Calls) != 1 || j.Calls[0].Record == nil) {
			t.Errorf("%s: calls %+v; want its one judge call, with its record", j.ACID, j.Calls)
		}
	}

	rep := auditBatch(t, env, sub.BatchID)
	if !rep.OK() {
		t.Fatalf("the audit of the checklist batch: %d mismatches:%s", len(rep.Mismatches), auditDump(t, rep))
	}
	if rep.Jobs != 4 || len(rep.Batches) != 1 || !rep.Batches[0].Complete {
		t.Fatalf("audit report %+v", rep)
	}
}
