package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/review"
)

// TestExportGoldReportsWhatItSkips: --export-gold writes the reviewed ACs of the kinds
// whose calibration set tribunal calibrate reads (ab's) and reports, per kind, every
// reviewed AC it left out and why: ab's whose reviewers disagree, and every reviewed
// critic, equivalence and rubric AC (calibrate has no known-answer form for their
// verdicts). An unreviewed AC is no gold and not counted; nothing of a reviewed AC is
// dropped without a word.
func TestExportGoldReportsWhatItSkips(t *testing.T) {
	abJob := func(id string, labels ...string) *records.Job {
		j := &records.Job{Tenant: "default", Batch: "b", ACID: id, Spec: events.JobSpec{Kind: events.KindAB, ACID: id, Criterion: "clear",
			KindPart: &ab.Spec{Ours: events.Source{URL: "https://example.com/" + id + "/ours.png"}, Reference: events.Source{URL: "https://example.com/" + id + "/ref.png"}}}}
		for i, l := range labels {
			j.Reviews = append(j.Reviews, records.Review{By: "person-" + string(rune('a'+i)), Person: review.Verdict{Label: l}})
		}
		return j
	}
	other := func(k events.Kind, id string, reviewed bool) *records.Job {
		j := &records.Job{Tenant: "default", Batch: "b", ACID: id, Spec: events.JobSpec{Kind: k, ACID: id}}
		if reviewed {
			j.Reviews = []records.Review{{By: "person-a", Person: review.Verdict{Label: "pass"}}}
		}
		return j
	}
	jobs := []*records.Job{
		abJob("AC-1", "ours"), abJob("AC-2", "tie", "tie"), abJob("AC-3", "ours", "reference"), abJob("AC-4"),
		other(events.KindCritic, "AC-5", true), other(events.KindCritic, "AC-6", true), other(events.KindCritic, "AC-7", false),
		other(events.KindEquivalence, "AC-8", true), other(events.KindRubric, "AC-9", true),
	}
	for i, j := range jobs {
		j.Index = i
	}
	dir := t.TempDir()
	rep, err := exportGold(context.Background(), nil, jobs, dir)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	rep.write(&sb)
	out := sb.String()
	if rep.total() != 2 {
		t.Errorf("written %d, want 2:\n%s", rep.total(), out)
	}
	calib := "tribunal calibrate reads calibration sets of ab only"
	for _, want := range []string{
		"  ab: 2 written, 1 skipped\n    1 skipped: its reviewers disagree, so it has no known answer (AC-3)\n",
		"  critic: 0 written, 2 skipped\n    2 skipped: " + calib + ", and a verdict of kind critic has no known-answer form there (AC-5, AC-6)\n",
		"  equivalence: 0 written, 1 skipped\n    1 skipped: " + calib + ", and a verdict of kind equivalence has no known-answer form there (AC-8)\n",
		"  rubric: 0 written, 1 skipped\n    1 skipped: " + calib + ", and a verdict of kind rubric has no known-answer form there (AC-9)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "AC-4") || strings.Contains(out, "AC-7") {
		t.Errorf("an unreviewed AC is in the report:\n%s", out)
	}
	exp, err := os.ReadFile(filepath.Join(dir, "expectations.yaml"))
	if err != nil || !strings.Contains(string(exp), "AC-1:") || !strings.Contains(string(exp), "AC-2:") || strings.Contains(string(exp), "AC-3") {
		t.Errorf("expectations.yaml: %v\n%s", err, exp)
	}

	// Nothing calibrate reads: exit 2, and the report of what was skipped.
	var none strings.Builder
	err = writeGold(context.Background(), nil, jobs[4:], t.TempDir(), "", &none)
	if err == nil || !strings.Contains(err.Error(), "no reviewed AC that tribunal calibrate can read") || !strings.Contains(err.Error(), "critic: 0 written, 2 skipped") || none.Len() != 0 {
		t.Errorf("a gold set of critic, equivalence and rubric ACs only: %v (stdout %q)", err, none.String())
	}
}
