// Package collect builds the inputs of a trust report (package trust) from what a batch
// left behind: its final job records (pkg/records) and its events as the stream keeps
// them (pkg/audit.Replay decodes them). It does no I/O, so `tribunal report`, the
// console's report page and the aggregator's figures at batch completion all build the
// same input from the same records. It names no kind: each job's or verdict's kind,
// looked up in the kinds' registration (kind.Lookup), supplies its part through package
// trust's interfaces.
//
// What comes from where:
//
//   - outcomes and judgments from the job records of a pairwise kind (trust.Pairwise):
//     a job's outcome is its final status and derived winner, and its judgments are the
//     votes of the verdict its outcome was derived from (a redriven job's superseded
//     attempt is not counted);
//   - artifact lengths from the latest render.done of each pairwise job, as its kind
//     reads them (the blob sizes of its two artifacts when both are text);
//   - calls from every verdict.emitted of the batch, whatever its kind and attempt (a
//     failed first attempt is a call the batch paid for), as the verdict's kind lists its
//     judge's calls (trust.JudgeCalling, else kind.Calling); a rejudge's verdicts are not
//     the batch's and are left out;
//   - HE-2 spot checks from spotcheck.recorded, attributed to the judge of the view's
//     job record, and the dimensions from the valid verdicts of a kind that grades them
//     (trust.Dimensioned).
package collect

import (
	"slices"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
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
		p, ok := pairwise(j.Spec.Kind)
		if !ok || !j.Final() {
			continue
		}
		in.Outcomes = append(in.Outcomes, p.PairOutcome(j))
		in.Judgments = append(in.Judgments, p.PairJudgments(j, lengths[j.ACID])...)
	}
	dims := map[string]bool{}
	for _, ev := range own {
		switch p := ev.Payload.(type) {
		case *events.VerdictEmitted:
			in.Calls = append(in.Calls, Calls(p)...)
			if k, err := kind.Lookup(p.Kind); err == nil {
				if d, ok := k.(trust.Dimensioned); ok {
					for _, name := range d.Dimensions(p) {
						dims[name] = true
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

// pairwise is kind k's part of the pairwise figures, when its judge compares two
// artifacts (trust.Pairwise).
func pairwise(k events.Kind) (trust.Pairwise, bool) {
	impl, err := kind.Lookup(k)
	if err != nil {
		return nil, false
	}
	p, ok := impl.(trust.Pairwise)
	return p, ok
}

// textLengths reads each pairwise job's artifact lengths from its latest render.done
// (the highest attempt, the last one of it in the stream), as its kind reads them: none
// when they have no length (trust.Pairwise.PairLengths).
func textLengths(evs []events.Event) map[string]trust.Lengths {
	out := map[string]trust.Lengths{}
	attempt := map[string]int{}
	for _, ev := range evs {
		rd, ok := ev.Payload.(*events.RenderDone)
		if !ok {
			continue
		}
		p, ok := pairwise(rd.Spec.Kind)
		if !ok || rd.Blocked != "" {
			continue
		}
		if a, seen := attempt[ev.JobID]; seen && ev.Attempt < a {
			continue
		}
		attempt[ev.JobID] = ev.Attempt
		l, ok := p.PairLengths(rd)
		if !ok {
			delete(out, ev.JobID)
			continue
		}
		out[ev.JobID] = l
	}
	return out
}

// Judgments are the calls of the verdict a pairwise job's outcome was derived from, each
// un-shuffled to roles, with the artifacts' lengths (trust.Pairwise); none for a job of a
// kind that is not pairwise.
func Judgments(j *records.Job, l trust.Lengths) []trust.Judgment {
	p, ok := pairwise(j.Spec.Kind)
	if !ok {
		return nil
	}
	return p.PairJudgments(j, l)
}

// Calls are a verdict's judge calls, any kind, for the cost figures: as its kind lists
// its judge's calls (trust.JudgeCalling), or every call it records (kind.Calling). An
// input refused before any call (status blocked) is not a call.
func Calls(v *events.VerdictEmitted) []trust.Call {
	k, err := kind.Lookup(v.Kind)
	if err != nil {
		return nil
	}
	var calls []records.Call
	switch c := k.(type) {
	case trust.JudgeCalling:
		calls = c.JudgeCalls(v)
	case kind.Calling:
		calls = c.Calls(v)
	}
	var out []trust.Call
	for _, c := range calls {
		if c.Status == events.VoteBlocked {
			continue
		}
		out = append(out, trust.Call{Judge: c.Judge, Status: string(c.Status), PromptTokens: c.PromptTokens,
			CompletionTokens: c.CompletionTokens, LatencyMillis: c.LatencyMillis, Cached: c.Cached})
	}
	return out
}
