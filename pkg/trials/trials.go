// Package trials is the arithmetic of repeated trials and judge ladders (issue 26): the
// reducers that turn k answers of one judge into a verdict (majority, median), the
// agreement across them, `at_least`, and the decision to ask the next rung of a ladder.
// The kinds' judge stages use it to decide whom to ask next and the kinds' rules use it
// to derive the verdict from the recorded answers, so the judge, the aggregator and
// `tribunal audit` cannot disagree. It knows no kind and needs no bus.
package trials

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// Reducers, as TrialsResult.Reducer names them.
const (
	// ReducerMajority picks the answer most trials gave (ab's winner, equivalence's
	// per-case verdict).
	ReducerMajority = "majority"
	// ReducerMedian takes the median of each score (critic).
	ReducerMedian = "median"
)

// Needed is how many of k trials the winning answer needs: atLeast when set, else a
// strict majority (more than half). A plurality is not enough, for the reason a panel's
// is not (ab.Panel): with three possible answers, two of five for A is no agreement.
func Needed(k, atLeast int) int {
	if atLeast > 0 {
		return atLeast
	}
	return k/2 + 1
}

// Majority reduces the trials' answers ("" for a trial without a valid answer, which
// counts toward k but never for an answer) to the answer at least Needed(k, atLeast) of
// them gave. Agreement is the share of trials agreeing with the reduced answer. When no
// answer has enough, Answer is the most common one (the earliest of equals, so the
// result never depends on map order), Unsure says by how much it fell short, and the
// caller must not treat the answer as decided.
func Majority(answers []string, atLeast int) events.TrialsResult {
	k := len(answers)
	r := events.TrialsResult{Reducer: ReducerMajority, Answers: slices.Clone(answers), AtLeast: Needed(k, atLeast)}
	if k == 0 {
		r.Unsure = "no trial answered"
		return r
	}
	counts := map[string]int{}
	for _, a := range answers {
		if a != "" {
			counts[a]++
		}
	}
	for _, a := range answers {
		if a != "" && counts[a] > r.For {
			r.Answer, r.For = a, counts[a]
		}
	}
	r.Agreement = float64(r.For) / float64(k)
	if r.For < r.AtLeast {
		what := "no trial gave a valid answer"
		if r.Answer != "" {
			what = fmt.Sprintf("the most common answer %q has %d of %d trials", r.Answer, r.For, k)
		}
		r.Unsure = fmt.Sprintf("trials disagree: %s, and it needs %d (%s)", what, r.AtLeast, needWord(atLeast))
	}
	return r
}

func needWord(atLeast int) string {
	if atLeast > 0 {
		return "at_least"
	}
	return "a strict majority"
}

// Median is the median of xs (the mean of the middle two for an even count), 0 for none.
// It reduces a critic's scores: robust to one outlying trial, where a mean is not.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Agreeing is the share-of-trials record for answers reduced some other way (a median):
// For counts the trials whose answer equals answer.
func Agreeing(reducer string, answers []string, answer string) events.TrialsResult {
	r := events.TrialsResult{Reducer: reducer, Answers: slices.Clone(answers), Answer: answer}
	for _, a := range answers {
		if a == answer {
			r.For++
		}
	}
	if len(answers) > 0 {
		r.Agreement = float64(r.For) / float64(len(answers))
	}
	return r
}

// AllAgree reports whether every trial gave the reduced answer: the stability the report
// counts.
func AllAgree(r *events.TrialsResult) bool {
	return r != nil && len(r.Answers) > 0 && r.For == len(r.Answers)
}

// Signals are what one rung's answer shows about its certainty.
type Signals struct {
	// Confidence is the rung's reduced confidence; HasConfidence is false for a kind
	// whose answers carry none.
	Confidence    float64
	HasConfidence bool
	// Flip is a position swap whose two orders disagreed, in any trial.
	Flip bool
	// Trials is the rung's reduction over its trials (nil when asked once).
	Trials *events.TrialsResult
}

// Escalate reports whether a ladder's rung with signals s hands the job to the next rung
// under rule, and why (every condition that holds, in a fixed order). A nil rule never
// escalates.
func Escalate(rule *events.Escalate, s Signals) (bool, string) {
	if rule == nil {
		return false, ""
	}
	var why []string
	if rule.Confidence != nil && s.HasConfidence && s.Confidence < *rule.Confidence {
		why = append(why, fmt.Sprintf("confidence %.2f below %.2f", s.Confidence, *rule.Confidence))
	}
	if rule.Flip && s.Flip {
		why = append(why, "the position swap flipped")
	}
	if rule.Disagreement && s.Trials != nil && !AllAgree(s.Trials) {
		why = append(why, fmt.Sprintf("trials disagreed (agreement %.2f)", s.Trials.Agreement))
	}
	return len(why) > 0, strings.Join(why, "; ")
}

// Unsure says whether a decided verdict was unsure, and why: trials that did not all
// agree, and a ladder that had to climb. Nothing is unsure about a verdict asked once of
// one judge. A human review queue reads it to pick what a person should see.
func Unsure(d *events.IterationDecided) []string {
	if d == nil {
		return nil
	}
	var why []string
	if t := d.Trials; t != nil {
		if t.Unsure != "" {
			why = append(why, t.Unsure)
		} else if !AllAgree(t) {
			why = append(why, fmt.Sprintf("trial disagreement: %d of %d trials gave %q", t.For, len(t.Answers), t.Answer))
		}
	}
	if l := d.Ladder; l != nil && l.Decided > 0 {
		why = append(why, fmt.Sprintf("escalated to %s: %s", l.Rungs[l.Decided], strings.Join(l.Why, "; ")))
	}
	return why
}
