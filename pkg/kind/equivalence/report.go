package equivalence

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"slices"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// Taxonomy tags of the transfer set. The cases are all the evidence an equivalence claim
// rests on: a kind of case the set never tries is a kind of behaviour nobody checked.
const (
	TagHappy       = "happy"
	TagEdge        = "edge"
	TagAdversarial = "adversarial"
	TagComposition = "composition"
)

// taxonomy is every tag in the order coverage reports them.
var taxonomy = []string{TagHappy, TagEdge, TagAdversarial, TagComposition}

// DefaultMinCases is the transfer-set size below which coverage is reported incomplete
// when the caller configures no minimum: one case per taxonomy tag.
const DefaultMinCases = 4

// TransferCase is one case of the transfer set: an input both document versions are run
// on, and the kind of behaviour it probes.
type TransferCase struct {
	ID    string `json:"id"`
	Input string `json:"input"`
	// Tag is one of happy, edge, adversarial, composition (exact, lower case).
	Tag string `json:"tag"`
}

// CacheID identifies the case for the baseline cache: its id qualified by a hash of its
// input. Pass it as RunnerKey's caseID so that editing a case's input under an unchanged
// id can never reuse a teacher transcript made from the old input.
func (c TransferCase) CacheID() string {
	sum := sha256.Sum256([]byte(c.Input))
	return c.ID + "@sha256:" + hex.EncodeToString(sum[:])
}

// CoverageReport says how far a transfer set spans the taxonomy. It is recorded next to
// the verdicts and never gates them: the seed leaves judging a thin set to the caller,
// but a reader of the output must be able to see that the claim is thin.
type CoverageReport struct {
	// Complete is true when every taxonomy tag is present and there are at least
	// MinCases cases.
	Complete bool `json:"complete"`
	// MissingTags lists the taxonomy tags no case carries, in taxonomy order; [] if none.
	MissingTags []string `json:"missing_tags"`
	// UnknownTags lists tags outside the taxonomy, sorted, once each. They do not count
	// toward coverage (a misspelt "Edge" probes nothing we can name) but do not make the
	// set incomplete by themselves.
	UnknownTags []string `json:"unknown_tags,omitempty"`
	// Cases is the number of distinct case ids: a repeated id adds no breadth.
	Cases    int `json:"cases"`
	MinCases int `json:"min_cases"`
}

// Coverage reports which taxonomy tags set misses and whether it has at least minCases
// cases (minCases <= 0 means DefaultMinCases).
func Coverage(set []TransferCase, minCases int) CoverageReport {
	if minCases <= 0 {
		minCases = DefaultMinCases
	}
	seenTag := map[string]bool{}
	ids := map[string]bool{}
	unknown := []string{}
	for _, c := range set {
		ids[c.ID] = true
		if slices.Contains(taxonomy, c.Tag) {
			seenTag[c.Tag] = true
		} else if !slices.Contains(unknown, c.Tag) {
			unknown = append(unknown, c.Tag)
		}
	}
	missing := []string{}
	for _, t := range taxonomy {
		if !seenTag[t] {
			missing = append(missing, t)
		}
	}
	slices.Sort(unknown)
	r := CoverageReport{MissingTags: missing, Cases: len(ids), MinCases: minCases}
	if len(unknown) > 0 {
		r.UnknownTags = unknown
	}
	r.Complete = len(missing) == 0 && r.Cases >= minCases
	return r
}

// Case statuses. Only StatusOK carries a verdict; the other two are cases the run could
// not judge, which Summarize counts apart and which always fail the gate.
const (
	StatusOK = events.VoteOK
	// StatusSchemaViolation: the judge's answer stayed invalid after the repair re-ask,
	// or a recorded verdict does not validate.
	StatusSchemaViolation = events.VoteSchemaViolation
	// StatusBlocked: no verdict could be asked for: a runner or judge provider was
	// unavailable, a runner's output stayed invalid, an input was missing, or no result
	// was recorded for a case of the transfer set.
	StatusBlocked = "blocked"
)

// CaseResult is one row of the output's cases[]: the seed's four fields plus the status
// that says whether the verdict can be trusted at all.
type CaseResult struct {
	CaseID string `json:"case_id"`
	// Verdict is "" unless Status is ok.
	Verdict        string `json:"verdict"`
	BehaviourDelta string `json:"behaviour_delta"`
	// EfficiencySignal is omitted unless Status is ok.
	EfficiencySignal EfficiencySignal  `json:"efficiency_signal,omitzero"`
	Status           events.VoteStatus `json:"status"`
	// Error says why a case has no valid verdict.
	Error string `json:"error,omitempty"`
}

// OK records a judged case. The answer is re-validated by Summarize, so an invalid answer
// passed here still cannot count as a verdict.
func OK(caseID string, a Answer) CaseResult {
	return CaseResult{CaseID: caseID, Verdict: a.Verdict, BehaviourDelta: a.BehaviourDelta, EfficiencySignal: a.EfficiencySignal, Status: StatusOK}
}

// SchemaViolation records a case whose judge answer could not be accepted.
func SchemaViolation(caseID, reason string) CaseResult {
	return CaseResult{CaseID: caseID, Status: StatusSchemaViolation, Error: reason}
}

// Blocked records a case that could not be judged, with the reason.
func Blocked(caseID, reason string) CaseResult {
	return CaseResult{CaseID: caseID, Status: StatusBlocked, Error: reason}
}

// Answer returns the judge's answer carried by an ok row.
func (c CaseResult) Answer() Answer {
	return Answer{Verdict: c.Verdict, BehaviourDelta: c.BehaviourDelta, EfficiencySignal: c.EfficiencySignal}
}

// valid reports whether the row carries a verdict that may be counted.
func (c CaseResult) valid() bool {
	return c.Status == StatusOK && c.Answer().Validate() == nil
}

// Summary is the output's summary: the seed's four fields plus the counts of cases
// without a valid verdict.
type Summary struct {
	// Pass is the strict no-regression gate; see Summarize.
	Pass        bool `json:"pass"`
	Regressions int  `json:"regressions"`
	Divergences int  `json:"divergences"`
	Equivalents int  `json:"equivalents"`
	// SchemaViolations counts rows whose verdict is unusable: status schema_violation, an
	// ok row whose answer does not validate, or an unknown status.
	SchemaViolations int `json:"schema_violations"`
	// Blocked counts rows that were never judged.
	Blocked int `json:"blocked"`
}

// Summarize counts the verdicts and applies the gate. Pass is true iff there is at least
// one case, no case is candidate-regressed, and every case has a valid verdict.
//
// The seed's rule is "pass iff zero regressions"; the two additions close the ways it
// could pass vacuously. A case that was blocked or whose answer was invalid might have
// been a regression, and no evidence at all (an empty list) supports no claim. Divergences
// never fail the gate; efficiency and coverage are not read here at all.
//
// Ok rows are re-validated instead of trusted, so a tampered or hand-built record with an
// unknown verdict or a regression without its delta counts as a schema violation.
func Summarize(cases []CaseResult) Summary {
	var s Summary
	for _, c := range cases {
		switch {
		case c.valid():
			switch c.Verdict {
			case VerdictRegressed:
				s.Regressions++
			case VerdictDiverged:
				s.Divergences++
			case VerdictEquivalent:
				s.Equivalents++
			}
		case c.Status == StatusBlocked:
			s.Blocked++
		default:
			s.SchemaViolations++
		}
	}
	s.Pass = len(cases) > 0 && s.Regressions == 0 && s.SchemaViolations == 0 && s.Blocked == 0
	return s
}

// EfficiencySummary aggregates the per-case efficiency signals. It exists so a transform
// that claims to make a document lighter to follow can point at a measured gain; this
// package only reports it and never gates on it.
type EfficiencySummary struct {
	// Cases is the number of rows with a valid verdict, the only ones whose signal counts.
	Cases int `json:"cases"`
	// The means are rounded to two decimals and 0 when Cases is 0.
	MeanOriginalDirectness  float64 `json:"mean_original_directness"`
	MeanCandidateDirectness float64 `json:"mean_candidate_directness"`
	// CandidateMoreDirect counts cases where candidate_directness > original_directness,
	// the seed's per-case measure of a gain; CandidateLessDirect the opposite.
	CandidateMoreDirect int `json:"candidate_more_direct"`
	CandidateLessDirect int `json:"candidate_less_direct"`
}

// Efficiency aggregates the efficiency signals of the rows with a valid verdict,
// regressed ones included: a regression does not make the directness reading wrong.
func Efficiency(cases []CaseResult) EfficiencySummary {
	var e EfficiencySummary
	sumO, sumC := 0, 0
	for _, c := range cases {
		if !c.valid() {
			continue
		}
		e.Cases++
		o, d := c.EfficiencySignal.OriginalDirectness, c.EfficiencySignal.CandidateDirectness
		sumO += o
		sumC += d
		switch {
		case d > o:
			e.CandidateMoreDirect++
		case d < o:
			e.CandidateLessDirect++
		}
	}
	if e.Cases > 0 {
		e.MeanOriginalDirectness = round2(float64(sumO) / float64(e.Cases))
		e.MeanCandidateDirectness = round2(float64(sumC) / float64(e.Cases))
	}
	return e
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

// Report is the output document of one equivalence run: the seed's cases and summary,
// plus the coverage flag and the efficiency aggregate.
type Report struct {
	Cases      []CaseResult      `json:"cases"`
	Summary    Summary           `json:"summary"`
	Coverage   CoverageReport    `json:"coverage"`
	Efficiency EfficiencySummary `json:"efficiency"`
}

// NewReport joins the transfer set with the per-case results. Rows come out in
// transfer-set order, one per distinct case id, so the report can be checked against the
// set case by case. A case with no result becomes a blocked row; a case with more than
// one result, and a result for an id outside the set (appended after the set's rows),
// become schema-violation rows: each case gets exactly one verdict, and anything else
// fails the gate rather than being resolved by guessing which answer counts.
func NewReport(set []TransferCase, results []CaseResult, minCases int) Report {
	byID := map[string][]CaseResult{}
	for _, r := range results {
		byID[r.CaseID] = append(byID[r.CaseID], r)
	}
	rows := make([]CaseResult, 0, len(set))
	done := map[string]bool{}
	for _, c := range set {
		if done[c.ID] {
			continue
		}
		done[c.ID] = true
		switch rs := byID[c.ID]; len(rs) {
		case 0:
			rows = append(rows, Blocked(c.ID, "no result recorded for this case"))
		case 1:
			rows = append(rows, rs[0])
		default:
			rows = append(rows, SchemaViolation(c.ID, "more than one result recorded for this case"))
		}
	}
	for _, r := range results {
		if !done[r.CaseID] {
			rows = append(rows, SchemaViolation(r.CaseID, "case_id is not in the transfer set"))
		}
	}
	return Report{Cases: rows, Summary: Summarize(rows), Coverage: Coverage(set, minCases), Efficiency: Efficiency(rows)}
}
