package equivalence

import (
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// Kind is the `equivalence` judge kind.
type Kind struct{}

var _ kind.Kind = Kind{}

// Name implements kind.Kind.
func (Kind) Name() events.Kind { return events.KindEquivalence }

// Result is an equivalence job's derived result, kept on its record: the seed's report
// and the runner transcripts it compared, for reviewers.
type Result struct {
	Report      Report              `json:"report"`
	Transcripts []events.Transcript `json:"transcripts,omitempty"`
	// Reviewed are the cases a person's review decided, in the order first decided,
	// when the batch lets people decide; JudgeCases are then the judge's answers as
	// they stood before any review decided, from which every later one derives again.
	Reviewed   []CaseReview      `json:"reviewed,omitempty"`
	JudgeCases []events.CaseVote `json:"judge_cases,omitempty"`
}

// CaseReview is a case whose verdict a person's review decided: who, their verdict and
// the judge's it replaced.
type CaseReview struct {
	Case string `json:"case_id"`
	// DecidedBy is ReviewedBy: a person's review decided the case.
	DecidedBy    string `json:"decided_by"`
	By           string `json:"by"`
	Verdict      string `json:"verdict"`
	JudgeVerdict string `json:"judge_verdict"`
	Judge        string `json:"judge,omitempty"`
}

// ResultOf reads an equivalence job's result; nil when the job has none yet.
func ResultOf(j *records.Job) (*Result, error) {
	return kind.Unmarshal[Result](j, j.Result, "equivalence result")
}

func setResult(j *records.Job, r Result) error {
	return kind.Marshal(j, &j.Result, "equivalence result", r)
}

// Decide implements kind.Kind: the seed's output (cases and summary, pass iff no case
// regressed), the coverage flag and the efficiency report, from the per-case answers.
func (Kind) Decide(st *kind.Step) error {
	ve, ok := st.Event.Payload.(*events.VerdictEmitted)
	if !ok || SpecOf(st.Job.Spec.KindPart) == nil {
		return fmt.Errorf("%w: an equivalence job takes equivalence verdicts, not %s", kind.ErrNotForKind, st.Event.Type)
	}
	j := st.Job
	d := Derive(j.Spec, ve.Cases)
	j.Status, j.Decided, j.Judges = d.Status, d.Decided, d.Decided.Judges
	if d.Blocked != "" {
		j.BlockStage, j.BlockReason = "judge", d.Blocked
	}
	res := Result{Report: d.Report}
	for _, c := range ve.Cases {
		if c.Original != nil && c.Candidate != nil {
			res.Transcripts = append(res.Transcripts, events.Transcript{CaseID: c.CaseID, Side: "original", Blob: *c.Original},
				events.Transcript{CaseID: c.CaseID, Side: "candidate", Blob: *c.Candidate})
		}
	}
	return setResult(j, res)
}

// Blocked implements kind.Kind: a blocked job has no report.
func (Kind) Blocked(*records.Job) {}

// Outcome implements kind.Kind: a pass is clean, anything else a finding.
func (Kind) Outcome(j *records.Job) kind.Outcome {
	if r, err := ResultOf(j); err == nil && r != nil && r.Report.Summary.Pass {
		return kind.OutcomeClean
	}
	return kind.OutcomeFinding
}

// Manifest implements kind.Kind: one result per AC, in batch order.
func (Kind) Manifest(_, batch string) kind.Manifest {
	return kind.NewListFold(events.KindEquivalence, batch, func(j *records.Job) ManifestRow {
		row := ManifestRow{ManifestEntry: kind.EntryOf(j)}
		if r, _ := ResultOf(j); r != nil {
			row.Equivalence, row.Reviewed = &r.Report, r.Reviewed
		}
		return row
	})
}

// Manifest is the equivalence kind's manifest: one result per AC, in batch order.
type Manifest = kind.ListManifest[ManifestRow]

// ManifestRow is one AC of the equivalence manifest.
type ManifestRow struct {
	kind.ManifestEntry
	Equivalence *Report `json:"equivalence,omitempty"`
	// Reviewed are the cases people's reviews decided (the batch let them), each with
	// the judge's verdict it replaced.
	Reviewed []CaseReview `json:"reviewed,omitempty"`
}

// Row implements kind.Kind.
func (Kind) Row(j *records.Job) kind.Row {
	row := kind.BaseRow(j)
	r, _ := ResultOf(j)
	if r == nil {
		return row
	}
	e := r.Report
	row.Verdict = "fail"
	if e.Summary.Pass {
		row.Verdict = "pass"
	}
	row.Detail = fmt.Sprintf("%d regressed, %d diverged, %d equivalent", e.Summary.Regressions, e.Summary.Divergences, e.Summary.Equivalents)
	if n := e.Summary.SchemaViolations + e.Summary.Blocked; n > 0 {
		row.Detail += fmt.Sprintf(", %d without a valid verdict", n)
	}
	if !e.Coverage.Complete {
		row.Detail += fmt.Sprintf("; thin coverage (%d cases, min %d, missing %v)", e.Coverage.Cases, e.Coverage.MinCases, e.Coverage.MissingTags)
	}
	return row
}

// Estimate implements kind.Kind: every case runs both documents (the original's run is
// cached for later rounds) and is judged once.
func (Kind) Estimate(spec events.JobSpec) kind.Estimate {
	es := SpecOf(spec.KindPart)
	if es == nil {
		return kind.Estimate{}
	}
	e := kind.Estimate{Sources: []kind.Source{{Role: "original", Src: es.Original, Document: true}, {Role: "candidate", Src: es.Candidate, Document: true}},
		Cases: len(es.Cases), JudgeCalls: len(es.Cases) * spec.Repeats.K(), MaxJudgeCalls: len(es.Cases) * spec.Repeats.K(), RunnerCalls: 2 * len(es.Cases),
		RunnerModel: es.RunnerModel}
	if es.Round > 1 {
		e.RunnerCalls = len(es.Cases)
		return e
	}
	for _, c := range es.Cases {
		if c.Baseline != nil {
			e.RunnerCalls-- // an imported teacher is not run
		}
	}
	return e
}
