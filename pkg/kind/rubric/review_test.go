package rubric_test

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/stats"
)

// scores is one verdict's scores by dimension of the default rubric.
type scores map[string]float64

func verdictFor(r *argus.Rubric, iteration int, s scores) argus.Verdict {
	v := argus.Verdict{Iteration: iteration, Feature: "f", Target: "t", State: "s", Appearance: "a", ReferenceSource: "human",
		Dimensions: map[string]argus.DimensionScore{}, FailedDimensions: []string{}}
	for _, n := range r.DimensionNames() {
		v.Dimensions[n] = argus.DimensionScore{Score: s[n], Anchor: r.Dimensions[n].Anchor, Evidence: "seen"}
	}
	chk, err := argus.NormalizeVerdict(v, r)
	if err != nil {
		panic(err)
	}
	return chk.Verdict
}

// viewJob is a signed-off view whose last verdict scored judge.
func viewJob(t *testing.T, i int, judge scores) *records.Job {
	t.Helper()
	r := argus.DefaultRubric()
	st := rubric.State{Verdicts: []rubric.IterationVerdict{{Iteration: 1, Verdict: verdictFor(r, 1, scores{})}, {Iteration: 2, Verdict: verdictFor(r, 2, judge)}},
		Rubric: r.Rules()}
	loop, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return &records.Job{Tenant: "team-a", Batch: "b", ACID: fmt.Sprintf("F--t%d--s--a", i), Index: i, Status: events.StatusSignedOff,
		Spec: events.JobSpec{Kind: events.KindRubric}, Loop: loop, Judges: []string{"p/m"},
		Calls: []records.Call{{Judge: "p/old", Status: events.VoteOK}, {Judge: "p/m", Status: events.VoteOK}}}
}

func answerOf(t *testing.T, s scores) []byte {
	t.Helper()
	r := argus.DefaultRubric()
	dims := map[string]argus.DimensionScore{}
	for _, n := range r.DimensionNames() {
		dims[n] = argus.DimensionScore{Score: s[n], Anchor: r.Dimensions[n].Anchor, Evidence: "seen"}
	}
	data, err := json.Marshal(map[string]any{"dimensions": dims, "closer_to_reference_than_prev": nil, "all_pass": true, "failed_dimensions": []string{}})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestRubricAgreementPerDimension: 60 reviewed views, the person's scores differing
// from the judge's on a known pattern in both directions. The report's agreement per
// rubric dimension (exact share with its Wilson interval, quadratic weighted kappa and
// mean absolute difference in score units with bootstrap intervals, which way the judge
// errs) equals this test's own computation from the scores, from a confusion matrix of
// proportions rather than the statistics package's counts; and so does the pass/fail
// label's share and Cohen's kappa.
func TestRubricAgreementPerDimension(t *testing.T) {
	k := rubric.Kind{}
	r := argus.DefaultRubric()
	names := r.DimensionNames()
	const n = 60
	judgeS, personS := make([]scores, n), make([]scores, n)
	var jobs []*records.Job
	for i := range n {
		judgeS[i], personS[i] = scores{}, scores{}
		for d, name := range names {
			js := float64((i/(d%3+1)+d)%3) / 2
			if i%5 <= 1 {
				// Views the judge passes (i%5 == 0) or fails on one half score (1).
				js = 1
				if i%5 == 1 && d == i%len(names) {
					js = 0.5
				}
			}
			ps := js
			if i%5 == 1 {
				// The person passes those the judge failed on a half score.
				ps = 1
				judgeS[i][name], personS[i][name] = js, ps
				continue
			}
			switch (i + 2*d) % 7 {
			case 0: // the person is stricter by a step
				ps = math.Max(0, js-0.5)
			case 3: // the person is more lenient by a step
				ps = math.Min(1, js+0.5)
			case 5:
				if js == 1 { // the person is stricter by two steps
					ps = 0
				}
			}
			judgeS[i][name], personS[i][name] = js, ps
		}
		j := viewJob(t, i, judgeS[i])
		jv, model, ok := k.JudgeVerdict(j)
		if !ok || model != "p/m" {
			t.Fatalf("view %d: judge verdict %v %q", i, ok, model)
		}
		pv, err := k.ReviewAnswer(j, answerOf(t, personS[i]))
		if err != nil {
			t.Fatalf("view %d: %v", i, err)
		}
		j.Reviews = []records.Review{{By: "ann", Event: fmt.Sprint("e", i), Judge: jv, Person: pv, Model: model}}
		jobs = append(jobs, j)
	}
	rep, err := client.ReviewAgreement(jobs, 7)
	if err != nil || rep == nil || len(rep.Agreement) != 1 {
		t.Fatalf("agreement %+v, %v", rep, err)
	}
	a := rep.Agreement[0]
	if a.Kind != "rubric" || a.Model != "p/m" || a.N != n || len(a.Scores) != len(names) {
		t.Fatalf("agreement %+v", a)
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	for _, s := range a.Scores {
		// The independent computation: a 3x3 table of proportions over steps 0, 1, 2.
		var obs [3][3]float64
		same, higher, lower, absSum := 0, 0, 0, 0.0
		for i := range n {
			js, ps := judgeS[i][s.Dimension], personS[i][s.Dimension]
			a, b := int(js*2), int(ps*2)
			obs[a][b] += 1.0 / n
			absSum += math.Abs(js - ps)
			switch {
			case js == ps:
				same++
			case js > ps:
				higher++
			default:
				lower++
			}
		}
		var rowM, colM [3]float64
		for a := range 3 {
			for b := range 3 {
				rowM[a] += obs[a][b]
				colM[b] += obs[a][b]
			}
		}
		num, den := 0.0, 0.0
		for a := range 3 {
			for b := range 3 {
				w := float64((a - b) * (a - b))
				num += w * obs[a][b]
				den += w * rowM[a] * colM[b]
			}
		}
		kappa := 1 - num/den
		mad := absSum / n
		if s.N != n || s.Exact.K != same || s.Higher != higher || s.Lower != lower {
			t.Errorf("%s: n %d exact %d higher %d lower %d, want %d %d %d %d", s.Dimension, s.N, s.Exact.K, s.Higher, s.Lower, n, same, higher, lower)
		}
		if higher == 0 || lower == 0 {
			t.Errorf("%s: the pattern should err both ways (higher %d, lower %d)", s.Dimension, higher, lower)
		}
		near(s.Dimension+" exact", s.Exact.Point, float64(same)/n)
		w := stats.Wilson(same, n, 1.959963984540054)
		near(s.Dimension+" exact lo", s.Exact.Lo, w.Lo)
		near(s.Dimension+" exact hi", s.Exact.Hi, w.Hi)
		if !s.Kappa.Defined {
			t.Fatalf("%s: weighted kappa undefined", s.Dimension)
		}
		near(s.Dimension+" weighted kappa", s.Kappa.Point, kappa)
		near(s.Dimension+" mean absolute difference", s.MeanAbsDiff.Point, mad)
		// The intervals hold the estimate and say something: wider than nothing,
		// narrower than the whole scale.
		if s.Kappa.Lo > kappa || s.Kappa.Hi < kappa || s.Kappa.Hi-s.Kappa.Lo <= 0 || s.Kappa.Hi-s.Kappa.Lo > 1 {
			t.Errorf("%s: weighted kappa %v outside or degenerate [%v, %v]", s.Dimension, kappa, s.Kappa.Lo, s.Kappa.Hi)
		}
		if s.MeanAbsDiff.Lo > mad || s.MeanAbsDiff.Hi < mad || s.MeanAbsDiff.Hi-s.MeanAbsDiff.Lo <= 0 || s.MeanAbsDiff.Hi > 1 {
			t.Errorf("%s: mean absolute difference %v outside or degenerate [%v, %v]", s.Dimension, mad, s.MeanAbsDiff.Lo, s.MeanAbsDiff.Hi)
		}
	}
	// The label: pass iff every dimension reaches its threshold (1 in the default rubric).
	var jl, pl []string
	same, lenient, strict := 0, 0, 0
	for i := range n {
		label := func(s scores) string {
			for _, name := range names {
				if s[name] < r.Threshold(name) {
					return rubric.LabelFail
				}
			}
			return rubric.LabelPass
		}
		jv, pv := label(judgeS[i]), label(personS[i])
		jl, pl = append(jl, jv), append(pl, pv)
		switch {
		case jv == pv:
			same++
		case jv == rubric.LabelPass:
			lenient++
		default:
			strict++
		}
	}
	if a.Share.K != same || a.Lenient != lenient || a.Strict != strict || len(a.Disagreements) != lenient+strict {
		t.Errorf("labels: share %d lenient %d strict %d disagreements %d, want %d %d %d", a.Share.K, a.Lenient, a.Strict, len(a.Disagreements), same, lenient, strict)
	}
	po, pe := float64(same)/n, 0.0
	for _, c := range []string{rubric.LabelPass, rubric.LabelFail} {
		ca, cb := 0, 0
		for i := range n {
			if jl[i] == c {
				ca++
			}
			if pl[i] == c {
				cb++
			}
		}
		pe += float64(ca) / n * float64(cb) / n
	}
	if lenient == 0 || strict == 0 || !a.Kappa.Defined {
		t.Fatalf("the labels should disagree both ways (lenient %d, strict %d) with a defined kappa", lenient, strict)
	}
	near("label kappa", a.Kappa.Point, (po-pe)/(1-pe))
	// Re-derived from the same records and seed, the report is the same.
	again, err := client.ReviewAgreement(jobs, 7)
	if err != nil || again.Agreement[0].Scores[0].Kappa != a.Scores[0].Kappa || again.Agreement[0].Scores[0].MeanAbsDiff != a.Scores[0].MeanAbsDiff {
		t.Errorf("agreement re-derived differs: %+v vs %+v (%v)", again.Agreement[0].Scores[0], a.Scores[0], err)
	}
	if sc := k.ReviewScale(); sc.Lo != 0 || sc.Hi != 2 || sc.Unit != 0.5 {
		t.Errorf("scale %+v, want 0..2 in steps of 0.5", sc)
	}
}

// TestRubricReviewShowsTheLastCall: the call a reviewer is shown is the one of the
// verdict reviewed, the view's last judged iteration, not the job's first call; the
// answer shape lists the view's own rubric dimensions; the doubts that queue a view are
// the judge contradicting its scores, a frozen dimension and an HE-2 spot-check naming a
// dimension.
func TestRubricReviewShowsTheLastCall(t *testing.T) {
	k := rubric.Kind{}
	j := viewJob(t, 1, scores{"typography": 1})
	c, ok := k.ReviewCall(j)
	if !ok || c.Judge != "p/m" {
		t.Fatalf("review call %+v %v", c, ok)
	}
	r := &argus.Rubric{Dimensions: map[string]argus.RubricDimension{"only": {Threshold: 0.5, Anchor: argus.AnchorSpecText}}}
	st := rubric.State{Verdicts: []rubric.IterationVerdict{{Iteration: 1, Disagreed: true, Verdict: verdictFor(r, 1, scores{"only": 0.5})}}, Rubric: r.Rules()}
	st.Loop.Frozen = []string{"only"}
	st.SignOff = &argus.SignOff{HumanSpotcheck: "only"}
	j.Loop, _ = json.Marshal(st)
	if got := k.ReviewTemplateOf(j); got != `{"dimensions": {"only": {"score": "0 | 0.5 | 1", "anchor": "spec-text", "evidence": "the observation behind the score"}}, "closer_to_reference_than_prev": "true | false | null", "all_pass": "true | false", "failed_dimensions": ["the dimensions below their threshold"], "notes": ""}` {
		t.Fatalf("template %s", got)
	}
	if u := k.Unsure(j); len(u) != 3 || u[2] != "the HE-2 spot-check named only" {
		t.Fatalf("unsure %v", u)
	}
	// The threshold of the view's own rubric derives the label: 0.5 passes here.
	jv, _, _ := k.JudgeVerdict(j)
	pv, err := k.ReviewAnswer(j, []byte(`{"dimensions": {"only": {"score": 0.5, "anchor": "spec-text", "evidence": "x"}}, "all_pass": false, "failed_dimensions": ["only"]}`))
	if err != nil || jv.Label != rubric.LabelPass || pv.Label != rubric.LabelPass || pv.Scores["only"] != 1 {
		t.Fatalf("judge %+v person %+v %v", jv, pv, err)
	}
	for _, status := range []events.Status{events.StatusNeedsContext, events.StatusAwaitingSpotcheck, events.StatusPending, events.StatusBlocked} {
		j.Status = status
		if _, _, ok := k.JudgeVerdict(j); ok {
			t.Errorf("a %s view has a verdict to review", status)
		}
		if _, err := k.ReviewAnswer(j, nil); err == nil {
			t.Errorf("a review of a %s view was read", status)
		}
	}
}
