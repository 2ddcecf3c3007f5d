package equivalence

import (
	"fmt"
	"slices"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// equivalence's wire schema: its part of a job spec and of a decision, and the checks
// each equivalence event passes on the way in. The parts travel under the key
// "equivalence", where they were fields of pkg/events before (events.Parts); its cases
// of a gates.done and a verdict are the shared payloads' Cases.
func init() {
	events.RegisterKind(events.KindEquivalence, events.KindWire{
		Spec: func(s events.JobSpec) error { return SpecOf(s.KindPart).validate() },
		Gates: func(p *events.GatesDone) error {
			if len(p.Cases) == 0 {
				return events.Missing("cases")
			}
			for i, c := range p.Cases {
				if err := c.Original.Validate(fmt.Sprintf("cases[%d].original", i)); err != nil {
					return err
				}
				if err := c.Candidate.Validate(fmt.Sprintf("cases[%d].candidate", i)); err != nil {
					return err
				}
			}
			return nil
		},
		Verdict: func(p *events.VerdictEmitted) error {
			if len(p.Cases) == 0 {
				return events.Missing("cases")
			}
			for i, c := range p.Cases {
				if c.CaseID == "" {
					return events.Missing(fmt.Sprintf("cases[%d].case_id", i))
				}
				if err := events.ValidStatus(fmt.Sprintf("cases[%d].status", i), c.Status); err != nil {
					return err
				}
			}
			return nil
		},
		Parts: events.Parts{
			JSON:    "Equivalence",
			Spec:    func() any { return new(Spec) },
			Decided: func() any { return new(Decided) },
		},
	})
}

// Spec is the input of an `equivalence` job: two versions of a document and the
// transfer set of cases that defines the behaviour to preserve (events.JobSpec.KindPart).
type Spec struct {
	Original  events.Source `msgpack:"original"`
	Candidate events.Source `msgpack:"candidate"`
	Cases     []events.Case `msgpack:"cases"`
	// Variant is "skill" (the document is invoked on a case) or "instruction-file" (an
	// always-loaded instruction file; the runner only states the actions it would take).
	Variant string `msgpack:"variant"`
	// Round numbers the rounds of a transform loop: the teacher transcripts of round 1
	// are reused by every later round.
	Round int `msgpack:"round"`
	// MinCases below which the transfer set is flagged as thin coverage.
	MinCases int `msgpack:"min_cases"`
	// RunnerModel is the model that applies the documents; empty means the default.
	RunnerModel string `msgpack:"runner_model,omitempty"`
}

// SpecOf is equivalence's part of a job spec (its KindPart); nil when it has none.
func SpecOf(part any) *Spec {
	s, _ := part.(*Spec)
	return s
}

func (s *Spec) validate() error {
	if s == nil {
		return events.Missing("equivalence")
	}
	if err := s.Original.Validate("equivalence.original"); err != nil {
		return err
	}
	if err := s.Candidate.Validate("equivalence.candidate"); err != nil {
		return err
	}
	switch s.Variant {
	case events.VariantSkill, events.VariantInstructionFile:
	default:
		return events.Invalid("equivalence.variant", fmt.Sprintf("want skill or instruction-file, got %q", s.Variant))
	}
	if s.Round < 1 {
		return events.Invalid("equivalence.round", "must be 1 or more")
	}
	seen := map[string]bool{}
	for i, c := range s.Cases {
		f := fmt.Sprintf("equivalence.cases[%d]", i)
		if err := events.ValidateName(c.ID); err != nil {
			return events.Invalid(f+".id", err.Error())
		}
		if seen[c.ID] {
			return events.Invalid(f+".id", fmt.Sprintf("duplicate case id %q", c.ID))
		}
		seen[c.ID] = true
		if !slices.Contains(events.TaxonomyTags, c.Tag) {
			return events.Invalid(f+".tag", fmt.Sprintf("want happy, edge, adversarial or composition, got %q", c.Tag))
		}
		if c.Baseline != nil {
			if err := c.Baseline.Validate(f + ".baseline"); err != nil {
				return err
			}
		}
	}
	return nil
}

// Decided is the aggregator's derived outcome of an equivalence job
// (events.IterationDecided.KindPart).
type Decided struct {
	Pass        bool            `msgpack:"pass"`
	Regressions int             `msgpack:"regressions"`
	Divergences int             `msgpack:"divergences"`
	Equivalents int             `msgpack:"equivalents"`
	Invalid     int             `msgpack:"invalid"`
	Coverage    events.Coverage `msgpack:"coverage"`
	// Cases holds the per-case verdicts in transfer-set order.
	Cases []events.CaseVote `msgpack:"cases"`
}

// DecidedOf is equivalence's part of a decision (its KindPart); nil when it has none.
func DecidedOf(part any) *Decided {
	d, _ := part.(*Decided)
	return d
}
