// Package collect builds the inputs of a trust report (package trust) from what a batch
// left behind: its final job records (pkg/records) and its events as the stream keeps
// them (pkg/audit.Replay decodes them). It does no I/O, so `tribunal report`, the
// console's report page and the aggregator's figures at batch completion all build the
// same input from the same records.
//
// What comes from where:
//
//   - outcomes and judgments from the job records: an ab job's outcome is its final
//     status and derived winner, and its judgments are the votes of the verdict its
//     outcome was derived from (a redriven job's superseded attempt is not counted);
//   - artifact lengths from the latest render.done of each ab job: the blob sizes of its
//     two artifacts when both are text (images and HTML have no length that means
//     anything to a reader);
//   - calls from every verdict.emitted of the batch, whatever its kind and attempt (a
//     failed first attempt is a call the batch paid for); a rejudge's verdicts are not
//     the batch's and are left out;
//   - HE-2 spot checks from spotcheck.recorded, attributed to the judge of the view's
//     job record, and the rubric's dimensions from the rubric verdicts' answers.
package collect

import (
	"encoding/json"
	"slices"

	"github.com/tribunal-dev/tribunal/pkg/kind/critic"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/trust"
)

// Input builds a trust report's input from a batch's job records and its events. jobs
// that are not final yet are left out (a report on a batch still running covers what is
// decided). evs may hold events of other batches and rejudges: only the batch's own, as
// named by the jobs, are read. The report options (level, seed, resamples, length rule)
// are the caller's to set.
func Input(jobs []*records.Job, evs []events.Event) trust.Input {
	in := trust.Input{}
	if len(jobs) == 0 {
		return in
	}
	tenant, batch := jobs[0].Tenant, jobs[0].Batch
	own := ownEvents(tenant, batch, evs)
	lengths := textLengths(own)
	byAC := map[string]*records.Job{}
	sorted := slices.Clone(jobs)
	slices.SortFunc(sorted, func(a, b *records.Job) int { return a.Index - b.Index })
	for _, j := range sorted {
		byAC[j.ACID] = j
		if j.Spec.Kind != events.KindAB || !j.Final() {
			continue
		}
		in.Outcomes = append(in.Outcomes, Outcome(j))
		in.Judgments = append(in.Judgments, Judgments(j, lengths[j.ACID])...)
	}
	dims := map[string]bool{}
	for _, ev := range own {
		switch p := ev.Payload.(type) {
		case *events.VerdictEmitted:
			in.Calls = append(in.Calls, Calls(p)...)
			if rubricwire.VoteOf(p.KindPart) != nil && rubricwire.VoteOf(p.KindPart).Status == events.VoteOK {
				// The names only: the aggregator judged the verdict's validity already.
				var v struct {
					Dimensions map[string]json.RawMessage `json:"dimensions"`
				}
				if json.Unmarshal([]byte(rubricwire.VoteOf(p.KindPart).Verdict), &v) == nil {
					for d := range v.Dimensions {
						dims[d] = true
					}
				}
			}
		case *events.SpotcheckRecorded:
			sc := trust.SpotCheck{AC: p.ACID, Approved: p.Approved, Dimension: p.Dimension}
			if j := byAC[p.ACID]; j != nil && len(j.Judges) > 0 {
				sc.Judge = j.Judges[0]
			}
			in.SpotChecks = append(in.SpotChecks, sc)
		}
	}
	for d := range dims {
		in.Dimensions = append(in.Dimensions, d)
	}
	slices.Sort(in.Dimensions)
	return in
}

// ownEvents keeps the batch's own events once each, in stream order: no rejudge, no
// other batch, no second copy of an event id (a redelivered publish the stream kept).
func ownEvents(tenant, batch string, evs []events.Event) []events.Event {
	seen := map[string]bool{}
	var out []events.Event
	for _, ev := range evs {
		if ev.Tenant != tenant || ev.BatchID != batch || ev.Rejudge != "" || seen[ev.ID] {
			continue
		}
		seen[ev.ID] = true
		out = append(out, ev)
	}
	return out
}

// Lengths are the lengths of an ab job's two text artifacts, 0 when unknown.
type Lengths struct{ Ours, Reference int }

// textLengths reads each ab job's artifact lengths from its latest render.done (the
// highest attempt, the last one of it in the stream): the blob sizes in bytes of both
// artifacts when both are text.
func textLengths(evs []events.Event) map[string]Lengths {
	out := map[string]Lengths{}
	attempt := map[string]int{}
	for _, ev := range evs {
		rd, ok := ev.Payload.(*events.RenderDone)
		if !ok || rd.Spec.Kind != events.KindAB || rd.Blocked != "" {
			continue
		}
		if a, seen := attempt[ev.JobID]; seen && ev.Attempt < a {
			continue
		}
		attempt[ev.JobID] = ev.Attempt
		o, ok1 := rd.Artifacts[string(ab.Ours)]
		r, ok2 := rd.Artifacts[string(ab.Reference)]
		if !ok1 || !ok2 || o.Class != "text" || r.Class != "text" {
			delete(out, ev.JobID)
			continue
		}
		out[ev.JobID] = Lengths{Ours: int(o.Blob.Size), Reference: int(r.Blob.Size)}
	}
	return out
}

// Outcome is a final ab job's outcome: its derived winner when it was compared, blocked
// otherwise (blocked before or by the judge, or a schema violation: no valid verdict).
func Outcome(j *records.Job) trust.Outcome {
	o := trust.Outcome{AC: j.ACID}
	if j.Status != events.StatusCompared || j.Decided == nil || ab.DecidedOf(j.Decided.KindPart) == nil {
		o.Blocked = true
		return o
	}
	o.Winner = ab.Winner(ab.DecidedOf(j.Decided.KindPart).Winner)
	return o
}

// Judgments are the calls of the verdict an ab job's outcome was derived from, each
// un-shuffled under the assignment it was judged with (a swapped call under the swapped
// one), with the artifacts' lengths; none for a job of another kind.
func Judgments(j *records.Job, l Lengths) []trust.Judgment {
	if j.Spec.Kind != events.KindAB {
		return nil
	}
	r, err := ab.ResultOf(j)
	if err != nil || r == nil {
		return nil
	}
	assign := r.Comparison.LabelAssignment
	if !assign.Valid() {
		assign = ab.Assign(j.ACID, j.Iteration)
	}
	var out []trust.Judgment
	for _, v := range r.Votes {
		a := assign
		order := v.Order
		if order == trust.OrderBA {
			a = a.Swapped()
		} else {
			order = trust.OrderAB
		}
		jd := trust.Judgment{AC: j.ACID, Judge: kind.JudgeName(v.Judge), Order: order, Status: string(v.Status),
			RawWinner: v.RawWinner, Confidence: v.Confidence, LenOurs: l.Ours, LenRef: l.Reference, Trial: v.Trial}
		if v.Status == events.VoteOK {
			jd.Winner = ab.Unshuffle(v.RawWinner, a)
		}
		out = append(out, jd)
	}
	return out
}

// Calls are a verdict's judge calls, any kind, for the cost figures. An input refused
// before any call (status blocked) is not a call.
func Calls(v *events.VerdictEmitted) []trust.Call {
	var out []trust.Call
	add := func(j events.JudgeInfo, status events.VoteStatus) {
		if status == events.VoteBlocked {
			return
		}
		out = append(out, trust.Call{Judge: kind.JudgeName(j), Status: string(status), PromptTokens: j.PromptTokens,
			CompletionTokens: j.CompletionTokens, LatencyMillis: j.LatencyMillis, Cached: j.Cached})
	}
	for _, vote := range v.Votes {
		add(vote.Judge, vote.Status)
	}
	if c := critic.VoteOf(v.KindPart); c != nil {
		add(c.Judge, c.Status)
	}
	for _, c := range critic.TrialsOf(v.KindTrials) {
		add(c.Judge, c.Status)
	}
	for _, c := range v.Cases {
		add(c.Judge, c.Status)
	}
	if r := rubricwire.VoteOf(v.KindPart); r != nil {
		add(r.Judge, r.Status)
	}
	return out
}
