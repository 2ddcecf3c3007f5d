package ab

import (
	"fmt"
	"sort"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// Vote is one judge's un-shuffled verdict in a panel.
type Vote struct {
	// Judge identifies the voter (a model name, say); it is only recorded.
	Judge      string  `json:"judge,omitempty"`
	Winner     Winner  `json:"winner"`
	Confidence float64 `json:"confidence"`
	// Sampling is how the judge's (first) call was sampled; only recorded.
	Sampling *events.Sampling `json:"sampling,omitempty"`
}

// PanelResult is the outcome of a panel of judges.
type PanelResult struct {
	// Winner is the strict-majority winner, or tie when there is none.
	Winner Winner `json:"winner"`
	// Confidence is the mean confidence of the votes for Winner (0 when none).
	Confidence float64 `json:"confidence"`
	// Agreement is "<votes for Winner>/<panel size>", e.g. "2/3", the form the vote
	// routing (3/3, 2/3, 1/3, 0/3) reads.
	Agreement string `json:"agreement"`
	// For is the number of votes for Winner; Size is the number of votes cast.
	For  int `json:"for"`
	Size int `json:"size"`
	// Votes are the votes as given, kept for the audit.
	Votes []Vote `json:"votes"`
}

// Panel combines several judges' votes.
//
// The winner is the value (ours, reference or tie) that more than half of the votes
// chose. A plurality is not enough: with three possible answers, a panel split one way
// each, or two-one-one among four, has not agreed on anything, and reporting the largest
// faction as the winner would overstate it. Without a strict majority the result is a
// tie, which routes to a polish suggestion for a person to look at.
//
// Agreement counts the votes for the resulting winner over the panel size. Without a
// majority that is the number of tie votes, possibly 0 ("0/3": nobody voted for the tie
// the panel ended in). Confidence is the mean confidence of the votes agreeing with the
// winner, so dissenting votes neither raise nor lower it; it is 0 when no vote agrees.
//
// Votes whose winner is not ours, reference or tie count toward the panel size (they
// were cast) but never toward any winner. An empty panel is a tie at "0/0" with
// confidence 0.
func Panel(votes []Vote) PanelResult {
	counts := map[Winner]int{}
	for _, v := range votes {
		if v.Winner.Valid() {
			counts[v.Winner]++
		}
	}
	winner := WinnerTie
	for _, w := range []Winner{WinnerOurs, WinnerReference, WinnerTie} {
		if 2*counts[w] > len(votes) {
			winner = w
		}
	}
	// Sum in sorted order: float addition is not associative, and votes from concurrent
	// judges may arrive in any order, yet the mean must come out bit for bit the same.
	var agreeing []float64
	for _, v := range votes {
		if v.Winner == winner {
			agreeing = append(agreeing, v.Confidence)
		}
	}
	sort.Float64s(agreeing)
	var sum float64
	for _, c := range agreeing {
		sum += c
	}
	n := len(agreeing)
	conf := 0.0
	if n > 0 {
		conf = sum / float64(n)
	}
	return PanelResult{
		Winner:     winner,
		Confidence: conf,
		Agreement:  fmt.Sprintf("%d/%d", n, len(votes)),
		For:        n,
		Size:       len(votes),
		Votes:      append(make([]Vote, 0, len(votes)), votes...),
	}
}
