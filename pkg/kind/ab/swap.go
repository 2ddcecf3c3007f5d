package ab

// CombineSwap combines the two answers of a position-swap pair. LLM judges are known to
// favour a slot (often whichever comes first) regardless of content; asking again with
// the slots exchanged separates a real preference from that bias.
//
// first was judged under firstAssign and second under firstAssign.Swapped(). Both are
// un-shuffled to roles. When the roles agree the pair is consistent: that winner stands,
// with the lower of the two confidences, because the combined claim is only as strong as
// its weaker half.
//
// When they disagree the pair is inconsistent and the result is a tie at confidence 0.
// A pick that follows the slot rather than the artifact is evidence of position bias, not
// of quality, so the pair carries no usable preference, and 0 says exactly that: it
// claims nothing, and it cannot inflate a panel's mean confidence for a tie that nobody
// actually judged. Routing is unaffected by the number (a tie is polish at any
// confidence); the suggestion then asks a person to look.
//
// Inputs are expected to be validated (RawVerdict.Validate). If either does not
// un-shuffle to a valid winner, or firstAssign is invalid, the pair is reported as
// inconsistent: nothing is inferred from an answer outside the schema.
func CombineSwap(first, second RawVerdict, firstAssign Assignment) (winner Winner, confidence float64, consistent bool) {
	w1 := Unshuffle(first.RawWinner, firstAssign)
	w2 := Unshuffle(second.RawWinner, firstAssign.Swapped())
	if !w1.Valid() || w1 != w2 {
		return WinnerTie, 0, false
	}
	confidence = first.Confidence
	if second.Confidence < confidence {
		confidence = second.Confidence
	}
	return w1, confidence, true
}
