package ab

import (
	"fmt"
	"math"
)

// DefaultThreshold is the confidence ours must reach for a win to count as clean, and
// the reference must reach for its win to be a fix rather than polish.
const DefaultThreshold = 0.75

// BlockConfidence is the confidence at which a reference win becomes a merge blocker.
// It is absolute, not relative to the threshold, mirroring the persona critic's block
// rule: a judge that is this sure the reference is better has found something a vote
// must not wave through.
const BlockConfidence = 0.9

// Tag routes a suggestion in the vote that consumes the manifest.
type Tag string

const (
	// TagBlock is a merge blocker regardless of how the vote goes.
	TagBlock Tag = "block"
	// TagFix means the reference clearly beat ours: behaviour is likely off.
	TagFix Tag = "fix"
	// TagPolish is a low-stakes improvement: a weak reference win, a tie, or an
	// unconvincing win by ours.
	TagPolish Tag = "polish"
)

// Impact is a suggestion's impact in the shared suggestion shape.
type Impact string

const (
	// ImpactHigh goes with TagBlock.
	ImpactHigh Impact = "high"
	// ImpactMedium goes with TagFix, and with TagPolish when ours did not win.
	ImpactMedium Impact = "medium"
	// ImpactLow goes with TagPolish when ours won, just not convincingly.
	ImpactLow Impact = "low"
)

// CheckThreshold reports whether t can be used as a threshold: a number in [0,1]. A bad
// threshold is a usage error (exit 2), caught before any comparison is routed.
func CheckThreshold(t float64) error {
	if math.IsNaN(t) || t < 0 || t > 1 {
		return fmt.Errorf("ab: threshold %v: must be a number in [0,1]", t)
	}
	return nil
}

// Route decides whether a judged comparison produces a suggestion, and with which tag
// and impact. The rows are tried in this order and the first that matches wins:
//
//	winner == ours      and confidence >= threshold  -> no suggestion
//	winner == reference and confidence >= 0.9        -> block,  high
//	winner == reference and confidence >= threshold  -> fix,    medium
//	winner == reference (below threshold)            -> polish, medium
//	tie, at any confidence                           -> polish, medium
//	winner == ours      and confidence <  threshold  -> polish, low
//
// A suggestion is made exactly when the winner is not ours or the confidence is below
// the threshold; ours winning convincingly is the only clean result.
//
// Block is checked before fix and does not depend on the threshold. With a threshold
// above 0.9 the fix row therefore cannot match: a reference win at or above the threshold
// is already a block, one in [0.9, threshold) is still a block (raising the bar for ours
// must not make a confident loss less serious), and one below 0.9 is polish.
//
// Route expects a validated winner and confidence. It stays on the safe side otherwise:
// a winner that is not ours is treated like a tie (polish), and a NaN confidence passes
// no ">=" test, so it can never produce a clean result or a block.
func Route(winner Winner, confidence, threshold float64) (suggest bool, tag Tag, impact Impact) {
	switch winner {
	case WinnerOurs:
		if confidence >= threshold {
			return false, "", ""
		}
		return true, TagPolish, ImpactLow
	case WinnerReference:
		switch {
		case confidence >= BlockConfidence:
			return true, TagBlock, ImpactHigh
		case confidence >= threshold:
			return true, TagFix, ImpactMedium
		}
		return true, TagPolish, ImpactMedium
	}
	return true, TagPolish, ImpactMedium
}
