package collect_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	critickind "github.com/tribunal-dev/tribunal/pkg/kind/critic"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/trust"
	"github.com/tribunal-dev/tribunal/pkg/trust/collect"
)

var update = flag.Bool("update", false, "rewrite testdata/report.golden")

// TestReportGolden: a batch of every shipped kind (ab votes in both orders and with
// repeated trials, two ab judges, text and image renders, a redrive, a critic with a later
// trial, an equivalence verdict whose runners are no judge's calls, a rubric view with a
// spot check) builds the same input and the same report, byte for byte, as
// testdata/report.golden holds: written before the figures named no kind, so the kinds
// supplying their parts through package trust's interfaces changed nothing.
func TestReportGolden(t *testing.T) {
	const tn, bt = "team-a", "b-1"
	vote := func(model, order, raw string, conf float64, trial int) events.Vote {
		return events.Vote{Judge: events.JudgeInfo{Provider: "openai", Model: model, PromptTokens: 100 + trial, CompletionTokens: 10, LatencyMillis: 40 + int64(len(raw))},
			Order: order, Status: events.VoteOK, RawWinner: raw, Confidence: conf, BiggestGap: "gap", Trial: trial}
	}
	job := func(index int, ac, positions string, votes ...events.Vote) *records.Job {
		spec := events.JobSpec{Kind: events.KindAB, ACID: ac, KindPart: &ab.Spec{Threshold: 0.75, Positions: positions,
			Ours: events.Source{Name: "o.md"}, Reference: events.Source{Name: "r.md"}}}
		j := &records.Job{Tenant: tn, Batch: bt, ACID: ac, Index: index, Spec: spec}
		ev := events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: votes}, tn, bt, ac, 0, "verdict", nil)
		if err := (ab.Kind{}).Decide(&kind.Step{Event: ev, Job: j}); err != nil {
			t.Fatal(err)
		}
		return j
	}
	render := func(ac string, attempt int, oursClass string, oursSize, refSize int64) events.Event {
		art := func(class string, size int64) events.Artifact {
			return events.Artifact{Class: class, Blob: events.Blob{SHA256: "0000000000000000000000000000000000000000000000000000000000000000", MediaType: "text/plain", Size: size}}
		}
		rd := &events.RenderDone{Spec: events.JobSpec{Kind: events.KindAB, ACID: ac},
			Artifacts: map[string]events.Artifact{"ours": art(oursClass, oursSize), "reference": art("text", refSize)}}
		return events.NewAttempt(rd, tn, bt, ac, 0, "render", attempt, nil)
	}
	verdict := func(ac string, v *events.VerdictEmitted) events.Event {
		return events.New(v, tn, bt, ac, 0, "verdict", nil)
	}
	var jobs []*records.Job
	var evs []events.Event
	for i, ac := range []string{"AC-1", "AC-2", "AC-3", "AC-4", "AC-5", "AC-6", "AC-7", "AC-8"} {
		raw := []string{"A", "B", "tie", "A"}[i%4]
		votes := []events.Vote{vote("m", "AB", raw, 0.9, 0), vote("m", "BA", []string{"B", "B", "tie", "A"}[i%4], 0.8, 0),
			vote("n", "AB", []string{"A", "A", "B", "tie"}[i%4], 0.7, 0)}
		if i == 5 {
			votes = []events.Vote{vote("m", "AB", "A", 0.9, 0), vote("m", "AB", "B", 0.9, 1), vote("m", "AB", "A", 0.9, 2)}
		}
		jobs = append(jobs, job(i, ac, "swap", votes...))
		class := "text"
		if i == 3 {
			class = "image"
		}
		evs = append(evs, render(ac, 0, class, int64(100+i*90), int64(400-i*30)))
		evs = append(evs, verdict(ac, &events.VerdictEmitted{Kind: events.KindAB, Votes: votes}))
	}
	evs = append(evs, render("AC-2", 1, "text", 999, 100)) // a redrive rendered again
	bad := vote("m", "AB", "C", 0.5, 0)
	jobs = append(jobs, job(8, "AC-9", "single", bad))
	jobs = append(jobs, &records.Job{Tenant: tn, Batch: bt, ACID: "AC-10", Index: 9, Status: events.StatusBlocked, BlockReason: "missing artifact",
		Spec: events.JobSpec{Kind: events.KindAB, ACID: "AC-10"}})
	jobs = append(jobs, &records.Job{Tenant: tn, Batch: bt, ACID: "crit", Index: 10, Status: events.StatusCompared, Spec: events.JobSpec{Kind: events.KindCritic, ACID: "crit"}})
	jobs = append(jobs, &records.Job{Tenant: tn, Batch: bt, ACID: "eq", Index: 11, Status: events.StatusCompared, Spec: events.JobSpec{Kind: events.KindEquivalence, ACID: "eq"}})
	jobs = append(jobs, &records.Job{Tenant: tn, Batch: bt, ACID: "feat--list", Index: 12, Status: events.StatusCompared, Judges: []string{"openai/vision"},
		Spec: events.JobSpec{Kind: events.KindRubric, ACID: "feat--list"}})
	cj := events.JudgeInfo{Provider: "anthropic", Model: "c", PromptTokens: 7, CompletionTokens: 3, LatencyMillis: 900}
	rubricVerdict := `{"iteration":1,"feature":"f","target":"list","dimensions":{"layout":{"score":1,"anchor":"a","evidence":"e"},"color":{"score":1,"anchor":"a","evidence":"e"}},"closer_to_reference_than_prev":null,"all_pass":true,"failed_dimensions":[],"notes":"n"}`
	evs = append(evs,
		verdict("AC-9", &events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{bad}}),
		verdict("crit", &events.VerdictEmitted{Kind: events.KindCritic, KindPart: &critickind.Vote{Judge: cj, Status: events.VoteOK},
			KindTrials: []critickind.Vote{{Judge: cj, Status: events.VoteUnavailable}}}),
		verdict("eq", &events.VerdictEmitted{Kind: events.KindEquivalence,
			Cases: []events.CaseVote{{CaseID: "c1", Judge: events.JudgeInfo{Provider: "openai", Model: "eq", PromptTokens: 50, LatencyMillis: 70}, Status: events.VoteOK},
				{CaseID: "c2", Judge: events.JudgeInfo{Provider: "openai", Model: "eq", Cached: true}, Status: events.VoteOK}},
			Runs: []events.RunnerRun{{CaseID: "c1", Side: "candidate", Runner: events.RunnerInfo{Judge: events.JudgeInfo{Provider: "openai", Model: "runner", PromptTokens: 5000}}}}}),
		verdict("feat--list", &events.VerdictEmitted{Kind: events.KindRubric, KindPart: &rubricwire.Vote{Judge: events.JudgeInfo{Provider: "openai", Model: "vision", PromptTokens: 2000}, Status: events.VoteOK, Verdict: rubricVerdict}}),
		events.New(&events.SpotcheckRecorded{ACID: "feat--list", Dimension: "color"}, tn, bt, "feat--list", 0, "spot", nil),
		events.New(&events.SpotcheckRecorded{ACID: "feat--list", Approved: true}, tn, bt, "feat--list", 0, "spot2", nil),
	)

	in := collect.Input(jobs, evs)
	in.Seed = 7
	rep, err := trust.BuildReport(in)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	for _, v := range []any{in, rep} {
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got.Write(data)
		got.WriteByte('\n')
	}
	path := filepath.Join("testdata", "report.golden")
	if *update {
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("the report's input and figures differ from testdata/report.golden:\n%s", got.Bytes())
	}
}
