package trust

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/tribunal-dev/tribunal/pkg/stats"
)

// Input is everything a trust report is computed from, built from one batch's events.
type Input struct {
	// Outcomes holds one final outcome per pairwise AC (the batch's results).
	Outcomes []Outcome
	// Judgments holds every call of each pairwise AC's deciding verdict.
	Judgments []Judgment
	// Calls holds every judge call of any kind, for the cost figures.
	Calls []Call
	// SpotChecks and Dimensions are the HE-2 checks and the rubric's dimensions.
	SpotChecks []SpotCheck
	Dimensions []string
	// Level is the confidence level of every interval; zero means 0.95.
	Level float64
	// Seed and Resamples drive the score's bootstrap; Resamples zero means 1000.
	Seed      uint64
	Resamples int
	// Length sets the length-sensitivity rule.
	Length LengthOptions
}

// Report is the trust report of a batch: overall, per judge, and the panel's agreement.
// Its JSON form is what `tribunal report --json` prints.
type Report struct {
	Level     float64 `json:"level"`
	Seed      uint64  `json:"seed"`
	Resamples int     `json:"resamples"`
	// Outcomes are the batch's final outcomes.
	Outcomes OutcomeRates `json:"outcomes"`
	// Overall holds the call-level figures over every judge together; Judges one entry
	// per judge, sorted by name.
	Overall JudgeReport   `json:"overall"`
	Judges  []JudgeReport `json:"judges"`
	// Panel is set when more than one judge answered pairwise ACs.
	Panel *PanelAgreement `json:"panel,omitempty"`
	// SpotChecks is set when there were HE-2 checks; SpotChecksByJudge splits them.
	SpotChecks        *SpotChecks            `json:"spot_checks,omitempty"`
	SpotChecksByJudge map[string]*SpotChecks `json:"spot_checks_by_judge,omitempty"`
}

// JudgeReport holds the figures of one judge, or of all judges together (Judge "").
type JudgeReport struct {
	Judge string `json:"judge,omitempty"`
	// Outcomes are this judge's own outcomes per AC (JudgeOutcomes); unset in Overall,
	// whose outcomes are the batch's.
	Outcomes     *OutcomeRates     `json:"outcomes,omitempty"`
	PositionBias PositionBias      `json:"position_bias"`
	Flips        Flips             `json:"flips"`
	Length       LengthSensitivity `json:"length"`
	Usage        Usage             `json:"usage"`
}

// BuildReport computes the trust report.
func BuildReport(in Input) (Report, error) {
	if in.Level == 0 {
		in.Level = 0.95
	}
	if in.Resamples == 0 {
		in.Resamples = 1000
	}
	z, err := stats.ZFor(in.Level)
	if err != nil {
		return Report{}, fmt.Errorf("trust: report level: %w", err)
	}
	boot := stats.BootstrapOptions{Resamples: in.Resamples, Level: in.Level, Seed: in.Seed}
	r := Report{Level: in.Level, Seed: in.Seed, Resamples: in.Resamples}
	if r.Outcomes, err = Rates(in.Outcomes, z, boot); err != nil {
		return Report{}, err
	}
	calls := map[string][]Call{}
	for _, g := range ByJudge(in.Calls) {
		calls[g.Judge] = g.Items
	}
	r.Overall = judgeReport("", in.Judgments, in.Calls, z, in.Length)
	outcomes := map[string][]Outcome{}
	for _, g := range JudgeOutcomes(in.Judgments) {
		outcomes[g.Judge] = g.Items
	}
	judged := ByJudge(in.Judgments)
	seen := map[string]bool{}
	for _, g := range judged {
		seen[g.Judge] = true
		jr := judgeReport(g.Judge, g.Items, calls[g.Judge], z, in.Length)
		rates, err := Rates(outcomes[g.Judge], z, boot)
		if err != nil {
			return Report{}, fmt.Errorf("judge %s: %w", g.Judge, err)
		}
		jr.Outcomes = &rates
		r.Judges = append(r.Judges, jr)
	}
	// Judges of the other kinds (no pairwise judgment) still have costs.
	for _, g := range ByJudge(in.Calls) {
		if !seen[g.Judge] {
			r.Judges = append(r.Judges, JudgeReport{Judge: g.Judge, Usage: UsageOf(g.Items)})
		}
	}
	slices.SortFunc(r.Judges, func(a, b JudgeReport) int { return cmp.Compare(a.Judge, b.Judge) })
	if len(judged) > 1 {
		p, err := Panel(in.Judgments, z)
		if err != nil {
			return Report{}, err
		}
		r.Panel = &p
	}
	if len(in.SpotChecks) > 0 {
		sc := SpotCheckAgreement(in.SpotChecks, in.Dimensions, z)
		r.SpotChecks = &sc
		r.SpotChecksByJudge = map[string]*SpotChecks{}
		for _, g := range ByJudge(in.SpotChecks) {
			s := SpotCheckAgreement(g.Items, in.Dimensions, z)
			r.SpotChecksByJudge[g.Judge] = &s
		}
	}
	return r, nil
}

func judgeReport(judge string, js []Judgment, calls []Call, z float64, lo LengthOptions) JudgeReport {
	return JudgeReport{
		Judge: judge, PositionBias: PositionBiasOf(js, z), Flips: FlipsOf(js, z),
		Length: LengthOf(js, z, lo), Usage: UsageOf(calls),
	}
}
