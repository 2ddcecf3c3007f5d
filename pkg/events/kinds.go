package events

// Taxonomy tags of an equivalence transfer set.
var TaxonomyTags = []string{"happy", "edge", "adversarial", "composition"}

// Runner variants of the equivalence kind.
const (
	VariantSkill           = "skill"
	VariantInstructionFile = "instruction-file"
)

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

// RunnerRun is the usage of the runner call behind one transcript of an equivalence
// case (Transcript without its blob).
type RunnerRun struct {
	CaseID string     `msgpack:"case_id"`
	Side   string     `msgpack:"side"`
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

// Coverage flags a thin transfer set.
type Coverage struct {
	Complete    bool     `msgpack:"complete"`
	MissingTags []string `msgpack:"missing_tags,omitempty"`
	Cases       int      `msgpack:"cases"`
	MinCases    int      `msgpack:"min_cases"`
}
