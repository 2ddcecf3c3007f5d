package events

import (
	"fmt"
	"slices"
)

// Taxonomy tags of an equivalence transfer set.
var TaxonomyTags = []string{"happy", "edge", "adversarial", "composition"}

// Runner variants of the equivalence kind.
const (
	VariantSkill           = "skill"
	VariantInstructionFile = "instruction-file"
)

// CriticSpec is the input of a `critic` job: a task and the output produced for it.
type CriticSpec struct {
	// Task is the task description, inline.
	Task string `msgpack:"task"`
	// Output is the produced output: inline text the client stored as a blob, or an
	// artifact file. Its Error says "missing input" when there is none.
	Output Source `msgpack:"output"`
}

func (s *CriticSpec) validate() error {
	if s == nil {
		return missing("critic")
	}
	if s.Output.Blob == nil && s.Output.URL == "" && s.Output.Error == "" {
		return missing("critic.output")
	}
	return s.Output.validate("critic.output")
}

// Case is one case of an equivalence transfer set.
type Case struct {
	ID    string `msgpack:"id"`
	Input string `msgpack:"input"`
	// Tag is happy, edge, adversarial or composition.
	Tag string `msgpack:"tag"`
	// Baseline is a teacher (original) transcript captured elsewhere and handed in with
	// the batch: the runner uses it instead of running the original document.
	Baseline *Blob `msgpack:"baseline,omitempty"`
}

// EquivalenceSpec is the input of an `equivalence` job: two versions of a document and
// the transfer set of cases that defines the behaviour to preserve.
type EquivalenceSpec struct {
	Original  Source `msgpack:"original"`
	Candidate Source `msgpack:"candidate"`
	Cases     []Case `msgpack:"cases"`
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

func (s *EquivalenceSpec) validate() error {
	if s == nil {
		return missing("equivalence")
	}
	if err := s.Original.validate("equivalence.original"); err != nil {
		return err
	}
	if err := s.Candidate.validate("equivalence.candidate"); err != nil {
		return err
	}
	switch s.Variant {
	case VariantSkill, VariantInstructionFile:
	default:
		return invalid("equivalence.variant", fmt.Sprintf("want skill or instruction-file, got %q", s.Variant))
	}
	if s.Round < 1 {
		return invalid("equivalence.round", "must be 1 or more")
	}
	seen := map[string]bool{}
	for i, c := range s.Cases {
		f := fmt.Sprintf("equivalence.cases[%d]", i)
		if err := ValidateName(c.ID); err != nil {
			return invalid(f+".id", err.Error())
		}
		if seen[c.ID] {
			return invalid(f+".id", fmt.Sprintf("duplicate case id %q", c.ID))
		}
		seen[c.ID] = true
		if !knownTag(c.Tag) {
			return invalid(f+".tag", fmt.Sprintf("want happy, edge, adversarial or composition, got %q", c.Tag))
		}
		if c.Baseline != nil {
			if err := c.Baseline.validate(f + ".baseline"); err != nil {
				return err
			}
		}
	}
	return nil
}

func knownTag(t string) bool { return slices.Contains(TaxonomyTags, t) }

// RunnerInfo records how the runner produced one transcript.
type RunnerInfo struct {
	Judge JudgeInfo `msgpack:"judge"`
	// Baseline is true for a teacher transcript taken from the baseline cache.
	Baseline bool `msgpack:"baseline,omitempty"`
}

// Transcript is a rendered runner transcript in blob storage.
type Transcript struct {
	CaseID string     `msgpack:"case_id"`
	Side   string     `msgpack:"side"` // "original" or "candidate"
	Blob   Blob       `msgpack:"blob"`
	Runner RunnerInfo `msgpack:"runner"`
}

// CasePair is the judge-facing form of one equivalence case: two transcripts, never the
// documents or their diff.
type CasePair struct {
	CaseID string `msgpack:"case_id"`
	Tag    string `msgpack:"tag"`
	// Input is the case input both documents were applied to (data for the judge).
	Input     string   `msgpack:"input"`
	Original  Artifact `msgpack:"original"`
	Candidate Artifact `msgpack:"candidate"`
}

// CriticVote is a critic judge's answer.
type CriticVote struct {
	Judge       JudgeInfo  `msgpack:"judge"`
	Status      VoteStatus `msgpack:"status"`
	Error       string     `msgpack:"error,omitempty"`
	Raw         string     `msgpack:"raw,omitempty"`
	Correctness int        `msgpack:"correctness"`
	Slop        int        `msgpack:"slop"`
	Scope       int        `msgpack:"scope"`
	Rationale   string     `msgpack:"rationale,omitempty"`
	// ClaimedVerdict and ClaimedQuality are what the judge said; the aggregator derives
	// its own and counts the disagreements.
	ClaimedVerdict string `msgpack:"claimed_verdict,omitempty"`
	ClaimedQuality *int   `msgpack:"claimed_quality,omitempty"`
}

// EfficiencySignal is how directly the runner acted on each version.
type EfficiencySignal struct {
	OriginalDirectness  int    `msgpack:"original_directness"`
	CandidateDirectness int    `msgpack:"candidate_directness"`
	InterpretationNotes string `msgpack:"interpretation_notes"`
}

// CaseVote is an equivalence judge's answer for one case.
type CaseVote struct {
	CaseID         string           `msgpack:"case_id"`
	Judge          JudgeInfo        `msgpack:"judge"`
	Status         VoteStatus       `msgpack:"status"`
	Error          string           `msgpack:"error,omitempty"`
	Raw            string           `msgpack:"raw,omitempty"`
	Verdict        string           `msgpack:"verdict,omitempty"`
	BehaviourDelta string           `msgpack:"behaviour_delta,omitempty"`
	Efficiency     EfficiencySignal `msgpack:"efficiency_signal"`
	// Original and Candidate are the transcripts the verdict compared, for reviewers.
	Original  *Blob `msgpack:"original,omitempty"`
	Candidate *Blob `msgpack:"candidate,omitempty"`
	// Trial is which of the job's repeated trials the answer was (0 the first).
	Trial int `msgpack:"trial,omitempty" json:",omitempty"`
}

// CriticResult is the aggregator's derived outcome of a critic job.
type CriticResult struct {
	Correctness   int    `msgpack:"correctness"`
	Slop          int    `msgpack:"slop"`
	Scope         int    `msgpack:"scope"`
	Quality       int    `msgpack:"quality"`
	Verdict       string `msgpack:"verdict"`
	Rationale     string `msgpack:"rationale,omitempty"`
	Disagreements int    `msgpack:"disagreements"`
}

// EquivalenceResult is the aggregator's derived outcome of an equivalence job.
type EquivalenceResult struct {
	Pass        bool     `msgpack:"pass"`
	Regressions int      `msgpack:"regressions"`
	Divergences int      `msgpack:"divergences"`
	Equivalents int      `msgpack:"equivalents"`
	Invalid     int      `msgpack:"invalid"`
	Coverage    Coverage `msgpack:"coverage"`
	// Cases holds the per-case verdicts in transfer-set order.
	Cases []CaseVote `msgpack:"cases"`
}

// Coverage flags a thin transfer set.
type Coverage struct {
	Complete    bool     `msgpack:"complete"`
	MissingTags []string `msgpack:"missing_tags,omitempty"`
	Cases       int      `msgpack:"cases"`
	MinCases    int      `msgpack:"min_cases"`
}
