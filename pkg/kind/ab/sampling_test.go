package ab

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

func sampled(v events.Vote, temp *float32, format, reported string) events.Vote {
	v.Judge.Sampling = &events.Sampling{Temperature: temp, MaxTokens: 4096, ResponseFormat: format, ReportedModel: reported}
	return v
}

// TestSamplingInManifestAndRow: the manifest's tribunal section and the results row say
// how each call was sampled, and a verdict with a call that pinned no temperature is
// marked so in both.
func TestSamplingInManifestAndRow(t *testing.T) {
	t.Parallel()
	zero := float32(0)
	pinned := []events.Vote{
		sampled(vote("gpt-4o", "AB", slotOf(acOursA, WinnerOurs), 0.9), &zero, events.FormatJSONSchema, "gpt-4o-2024-08-06"),
		sampled(vote("gpt-4o", "BA", Assign(acOursA, 0).Swapped().Label(WinnerOurs), 0.8), &zero, events.FormatJSONObject, "gpt-4o-2024-08-06"),
	}
	sp := spec(acOursA, 0.75)
	SpecOf(sp.KindPart).Positions = "swap"
	d := Derive(sp, 0, pinned)
	ex := d.Comparison.Tribunal
	if ex.Unpinned || ex.Judge.Sampling == nil || ex.Judge.Sampling.ReportedModel != "gpt-4o-2024-08-06" || *ex.Judge.Sampling.Temperature != 0 {
		t.Fatalf("extras %+v judge %+v", ex, ex.Judge)
	}
	data, err := json.Marshal(d.Comparison)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"sampling":{"temperature":0,"max_tokens":4096,"response_format":"json_schema","reported_model":"gpt-4o-2024-08-06"}`) {
		t.Errorf("manifest record %s", data)
	}

	row := rowOf(t, sp, pinned, d)
	if row.Unpinned || len(row.Sampling) != 2 || row.Sampling[1].ResponseFormat != events.FormatJSONObject || row.Sampling[0].Judge != "openai/gpt-4o" {
		t.Errorf("row sampling %+v unpinned %v; want both settings (the second fell back to JSON mode)", row.Sampling, row.Unpinned)
	}

	// A panel where one judge pinned no temperature: each panel vote keeps its sampling
	// and the verdict is marked unpinned.
	sp = spec(acOursA, 0.75)
	panel := []events.Vote{
		sampled(vote("a", "AB", slotOf(acOursA, WinnerOurs), 0.9), &zero, events.FormatJSONSchema, "a"),
		sampled(vote("b", "AB", slotOf(acOursA, WinnerOurs), 0.9), nil, events.FormatJSONSchema, "b"),
		vote("c", "AB", slotOf(acOursA, WinnerOurs), 0.9), // recorded before sampling was
	}
	d = Derive(sp, 0, panel)
	ex = d.Comparison.Tribunal
	if !ex.Unpinned || ex.Panel == nil || ex.Panel.Votes[1].Sampling == nil || ex.Panel.Votes[1].Sampling.Pinned() || ex.Panel.Votes[2].Sampling != nil {
		t.Fatalf("panel extras %+v", ex)
	}
	row = rowOf(t, sp, panel, d)
	if !row.Unpinned || len(row.Sampling) != 2 {
		t.Errorf("row sampling %+v unpinned %v", row.Sampling, row.Unpinned)
	}
}

func rowOf(t *testing.T, sp events.JobSpec, votes []events.Vote, d Decision) kind.Row {
	t.Helper()
	j := &records.Job{Tenant: "t", Batch: "b", ACID: sp.ACID, Spec: sp, Status: events.StatusCompared, Decided: d.Decided}
	if err := setResult(j, Result{Comparison: d.Comparison, Votes: votes}); err != nil {
		t.Fatal(err)
	}
	return Kind{}.Row(j)
}
