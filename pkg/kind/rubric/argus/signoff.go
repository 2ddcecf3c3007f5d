package argus

import "time"

// SignOff is the record written when a view reaches its streak. It is the one artifact
// of a loop worth keeping: which view, after how many iterations, against what kind of
// reference, on which verdict, with which baseline, and whether a human has looked.
type SignOff struct {
	// Feature, Target, State and Appearance name the signed-off view.
	Feature    string `json:"feature"`
	Target     string `json:"target"`
	State      string `json:"state"`
	Appearance string `json:"appearance"`
	// SignedOffAt is when the streak completed (UTC).
	SignedOffAt time.Time `json:"signed_off_at"`
	// Iterations is how many iterations the view took, a measure of how hard it was.
	Iterations int `json:"iterations"`
	// ReferenceSource tells a reader whether the reference was a human's design
	// (human) or an approved agent render (candidate).
	ReferenceSource string `json:"reference_source"`
	// FinalVerdict is the last judged (normalized) verdict.
	FinalVerdict *Verdict `json:"final_verdict"`
	// SnapshotBaseline identifies the render kept as the regression baseline, e.g. a
	// content-addressed blob key.
	SnapshotBaseline string `json:"snapshot_baseline"`
	// HumanSpotcheck starts as pending; a human sets approved or names a dimension.
	HumanSpotcheck string `json:"human_spotcheck"`
}

// NewSignOff builds the sign-off record of a view from its final loop state. The time
// is passed in rather than read from the clock so that replaying the event log
// rebuilds the identical record.
func NewSignOff(feature string, v View, s LoopState, final *Verdict, baseline string, at time.Time) SignOff {
	src := s.ReferenceSource
	if src == "" && final != nil {
		src = final.ReferenceSource
	}
	return SignOff{
		Feature: feature, Target: v.Target, State: v.State, Appearance: v.Appearance,
		SignedOffAt: at.UTC(), Iterations: s.Iteration, ReferenceSource: src,
		FinalVerdict: final, SnapshotBaseline: baseline, HumanSpotcheck: SpotcheckPending,
	}
}
