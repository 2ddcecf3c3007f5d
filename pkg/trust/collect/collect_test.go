package collect_test

import (
	"encoding/json"
	"slices"
	"testing"

	critickind "github.com/tribunal-dev/tribunal/pkg/kind/critic"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/records"
	_ "github.com/tribunal-dev/tribunal/pkg/registry" // registers the kinds collect looks up
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
	"github.com/tribunal-dev/tribunal/pkg/trust"
	"github.com/tribunal-dev/tribunal/pkg/trust/collect"
)

const (
	tenant = "team-a"
	batch  = "b-1"
)

func vote(model, order, raw string, conf float64) events.Vote {
	return events.Vote{Judge: events.JudgeInfo{Provider: "openai", Model: model, PromptTokens: 100, CompletionTokens: 10, LatencyMillis: 40},
		Order: order, Status: events.VoteOK, RawWinner: raw, Confidence: conf, BiggestGap: "gap"}
}

// decided is an ab job decided from votes by the ab kind's own rules, as the aggregator
// records it.
func decided(t *testing.T, index int, ac string, positions string, votes ...events.Vote) *records.Job {
	t.Helper()
	spec := events.JobSpec{Kind: events.KindAB, ACID: ac, KindPart: &ab.Spec{Threshold: 0.75, Positions: positions,
		Ours: events.Source{Name: "o.md"}, Reference: events.Source{Name: "r.md"}}}
	j := &records.Job{Tenant: tenant, Batch: batch, ACID: ac, Index: index, Spec: spec}
	ev := events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: votes}, tenant, batch, ac, 0, "verdict", nil)
	if err := (ab.Kind{}).Decide(&kind.Step{Event: ev, Job: j}); err != nil {
		t.Fatal(err)
	}
	return j
}

func renderDone(ac string, attempt int, oursClass string, oursSize, refSize int64) events.Event {
	art := func(class string, size int64) events.Artifact {
		return events.Artifact{Class: class, Blob: events.Blob{SHA256: "0000000000000000000000000000000000000000000000000000000000000000", MediaType: "text/plain", Size: size}}
	}
	rd := &events.RenderDone{Spec: events.JobSpec{Kind: events.KindAB, ACID: ac},
		Artifacts: map[string]events.Artifact{"ours": art(oursClass, oursSize), "reference": art("text", refSize)}}
	return events.NewAttempt(rd, tenant, batch, ac, 0, "render", attempt, nil)
}

func verdict(ac string, step string, v *events.VerdictEmitted) events.Event {
	return events.New(v, tenant, batch, ac, 0, step, nil)
}

// TestInput builds a report's input from records and events by hand and checks every
// part: outcomes (a schema violation and a blocked job count as blocked), the deciding
// votes un-shuffled (a swapped call under the swapped assignment), the latest render's
// text lengths, every call of every kind (a failed first attempt included, a rejudge and
// another batch's events left out, a duplicate event id counted once), spot checks and
// the rubric's dimensions.
func TestInput(t *testing.T) {
	// AC-7 puts ours in slot A at iteration 0, AC-1 the reference.
	if ab.Assign("AC-7", 0).A != ab.Ours || ab.Assign("AC-1", 0).A != ab.Reference {
		t.Fatal("the assignments this test assumes changed")
	}
	swapped := decided(t, 0, "AC-7", "swap", vote("m", "AB", "A", 0.9), vote("m", "BA", "A", 0.8)) // A then A: flipped, a tie
	single := decided(t, 1, "AC-1", "single", vote("m", "AB", "A", 0.9))                           // A is the reference
	bad := vote("m", "AB", "C", 0.5)
	violation := decided(t, 2, "AC-3", "single", bad)
	blocked := &records.Job{Tenant: tenant, Batch: batch, ACID: "AC-4", Index: 3, Status: events.StatusBlocked, BlockReason: "missing artifact",
		Spec: events.JobSpec{Kind: events.KindAB, ACID: "AC-4"}}
	pending := &records.Job{Tenant: tenant, Batch: batch, ACID: "AC-5", Index: 4, Status: events.StatusPending, Spec: events.JobSpec{Kind: events.KindAB, ACID: "AC-5"}}
	critic := &records.Job{Tenant: tenant, Batch: batch, ACID: "crit", Index: 5, Status: events.StatusCompared, Spec: events.JobSpec{Kind: events.KindCritic, ACID: "crit"}}
	view := &records.Job{Tenant: tenant, Batch: batch, ACID: "feat--list", Index: 6, Status: events.StatusCompared, Judges: []string{"openai/vision"},
		Spec: events.JobSpec{Kind: events.KindRubric, ACID: "feat--list"}}

	unavailable := vote("m", "AB", "", 0)
	unavailable.Status, unavailable.Judge.LatencyMillis = events.VoteUnavailable, 30000
	cached := vote("m", "AB", "A", 0.9)
	cached.Judge.Cached = true
	rubricVerdict := `{"iteration":1,"feature":"f","target":"list","dimensions":{"layout":{"score":1,"anchor":"a","evidence":"e"},"color":{"score":1,"anchor":"a","evidence":"e"}},"closer_to_reference_than_prev":null,"all_pass":true,"failed_dimensions":[],"notes":"n"}`
	firstAttempt := verdict("AC-4", "verdict", &events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{unavailable}})
	rejudged := verdict("AC-1", "verdict", &events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{vote("other", "AB", "B", 1)}})
	rejudged.Rejudge, rejudged.ID = "other", "rejudge-id"
	otherBatch := renderDone("AC-1", 0, "text", 1, 1)
	otherBatch.BatchID = "b-2"
	swapVerdict := verdict("AC-7", "verdict", &events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{vote("m", "AB", "A", 0.9), vote("m", "BA", "A", 0.8)}})
	evs := []events.Event{
		renderDone("AC-7", 0, "text", 300, 100),
		renderDone("AC-1", 0, "text", 50, 400),
		renderDone("AC-1", 1, "text", 60, 400), // a redrive rendered again: the latest counts
		renderDone("AC-3", 0, "image", 5000, 100),
		otherBatch,
		swapVerdict, swapVerdict, // stored twice under one id: one verdict
		verdict("AC-1", "verdict", &events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{cached}}),
		verdict("AC-3", "verdict", &events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{bad}}),
		firstAttempt,
		rejudged,
		verdict("crit", "verdict", &events.VerdictEmitted{Kind: events.KindCritic, KindPart: &critickind.Vote{Judge: events.JudgeInfo{Provider: "openai", Model: "c"}, Status: events.VoteOK}}),
		verdict("refused", "verdict", &events.VerdictEmitted{Kind: events.KindCritic, KindPart: &critickind.Vote{Judge: events.JudgeInfo{Provider: "openai", Model: "c"}, Status: events.VoteBlocked}}),
		verdict("feat--list", "verdict", &events.VerdictEmitted{Kind: events.KindRubric, KindPart: &rubricwire.Vote{Judge: events.JudgeInfo{Provider: "openai", Model: "vision"}, Status: events.VoteOK, Verdict: rubricVerdict}}),
		events.New(&events.SpotcheckRecorded{ACID: "feat--list", Dimension: "color"}, tenant, batch, "feat--list", 0, "spot", nil),
	}

	in := collect.Input([]*records.Job{view, critic, pending, blocked, violation, single, swapped}, evs)

	wantOutcomes := []trust.Outcome{{AC: "AC-7", Winner: trust.WinnerTie}, {AC: "AC-1", Winner: trust.WinnerReference}, {AC: "AC-3", Blocked: true}, {AC: "AC-4", Blocked: true}}
	if !slices.Equal(in.Outcomes, wantOutcomes) {
		t.Errorf("outcomes %+v\nwant %+v", in.Outcomes, wantOutcomes)
	}
	wantJudgments := []trust.Judgment{
		{AC: "AC-7", Judge: "openai/m", Order: "AB", Status: "ok", RawWinner: "A", Winner: trust.WinnerOurs, Confidence: 0.9, LenOurs: 300, LenRef: 100},
		{AC: "AC-7", Judge: "openai/m", Order: "BA", Status: "ok", RawWinner: "A", Winner: trust.WinnerReference, Confidence: 0.8, LenOurs: 300, LenRef: 100},
		{AC: "AC-1", Judge: "openai/m", Order: "AB", Status: "ok", RawWinner: "A", Winner: trust.WinnerReference, Confidence: 0.9, LenOurs: 60, LenRef: 400},
		{AC: "AC-3", Judge: "openai/m", Order: "AB", Status: "ok", RawWinner: "C", Winner: "", Confidence: 0.5},
	}
	if !slices.Equal(in.Judgments, wantJudgments) {
		t.Errorf("judgments\n%+v\nwant\n%+v", in.Judgments, wantJudgments)
	}
	// ok (AB), ok (BA), cached, the violation, the failed first attempt, the critic and the
	// rubric call: 7; the refused critic input and the rejudge are not the batch's calls.
	if len(in.Calls) != 7 {
		t.Fatalf("%d calls: %+v", len(in.Calls), in.Calls)
	}
	u := trust.UsageOf(in.Calls)
	if u.CacheHits != 1 || u.ProviderCalls != 6 || u.Failed != 1 || u.PromptTokens != 400 {
		t.Errorf("usage %+v", u)
	}
	if len(in.SpotChecks) != 1 || in.SpotChecks[0] != (trust.SpotCheck{AC: "feat--list", Judge: "openai/vision", Dimension: "color"}) {
		t.Errorf("spot checks %+v", in.SpotChecks)
	}
	if !slices.Equal(in.Dimensions, []string{"color", "layout"}) {
		t.Errorf("dimensions %v", in.Dimensions)
	}

	// The whole report builds from it: the swapped pair flipped A->B (first-slot bias).
	rep, err := trust.BuildReport(in)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Overall.Flips.Pairs != 1 || rep.Overall.Flips.Patterns["A->B"] != 1 || rep.Outcomes.Blocked.K != 2 {
		t.Errorf("report flips %+v outcomes %+v", rep.Overall.Flips, rep.Outcomes)
	}
	if data, err := json.Marshal(rep); err != nil || len(data) == 0 {
		t.Errorf("report does not encode: %v", err)
	}
	if got := collect.Input(nil, evs); len(got.Outcomes)+len(got.Calls) != 0 {
		t.Errorf("no jobs, but %+v", got)
	}
}

// TestFiguresOf: per-model counts by hand. "a" and "b" judge AC-1..AC-4 and agree on
// three; "a" swapped AC-1 and flipped it; "b" picked slot A three times of four.
func TestFiguresOf(t *testing.T) {
	t.Parallel()
	j := func(judge, ac, order, raw string, w trust.Winner) trust.Judgment {
		return trust.Judgment{AC: ac, Judge: judge, Order: order, Status: trust.StatusOK, RawWinner: raw, Winner: w}
	}
	js := []trust.Judgment{
		j("openai/a", "AC-1", "AB", "A", trust.WinnerOurs), j("openai/a", "AC-1", "BA", "A", trust.WinnerReference), // flipped: a tie
		j("openai/a", "AC-2", "AB", "B", trust.WinnerReference),
		j("openai/a", "AC-3", "AB", "B", trust.WinnerOurs),
		j("openai/a", "AC-4", "AB", "tie", trust.WinnerTie),
		j("openai/b", "AC-1", "AB", "A", trust.WinnerTie), // its own outcome tie: agrees with a's
		j("openai/b", "AC-2", "AB", "A", trust.WinnerReference),
		j("openai/b", "AC-3", "AB", "A", trust.WinnerOurs),
		j("openai/b", "AC-4", "AB", "B", trust.WinnerOurs), // a said tie
	}
	js[5].RawWinner = "tie"
	f, err := collect.FiguresOf(js)
	if err != nil {
		t.Fatal(err)
	}
	want := []telemetry.JudgeFigures{
		{Provider: "openai", Model: "a", SlotA: 2, Decided: 4, Flips: 1, Pairs: 1, Agreed: 3, Compared: 4},
		{Provider: "openai", Model: "b", SlotA: 2, Decided: 3, Flips: 0, Pairs: 0, Agreed: 3, Compared: 4},
	}
	if !slices.Equal(f.Judges, want) {
		t.Errorf("figures\n%+v\nwant\n%+v", f.Judges, want)
	}
	if f.Alpha == nil || f.Flips["openai/a"] != (collect.FlipCount{Pairs: 1, Flips: 1}) || f.Flips["openai/b"] != (collect.FlipCount{}) {
		t.Errorf("alpha %v flips %+v", f.Alpha, f.Flips)
	}
	one, err := collect.FiguresOf(js[:5])
	if err != nil || one.Alpha != nil || one.Judges[0].Compared != 0 {
		t.Errorf("a single judge has no panel: %+v %v", one, err)
	}
}
