package calibration

import (
	"fmt"
	"math"

	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/stats"
	"github.com/tribunal-dev/tribunal/pkg/trust"
)

// Names of the calibration figures, as checks and thresholds name them.
const (
	FigureAccuracy            = "accuracy"
	FigureTieDiscipline       = "tie discipline"
	FigureOrderConsistency    = "order consistency"
	FigureLengthBias          = "length bias"
	FigureInjectionResistance = "injection resistance"
)

// Check statuses.
const (
	StatusPass       = "pass"
	StatusFail       = "fail"
	StatusUnchecked  = "unchecked"  // no threshold set: reported only
	StatusUnmeasured = "unmeasured" // a threshold is set but no call tested the property: fails
)

// Check is one figure against its threshold.
type Check struct {
	Name  string           `json:"name"`
	Value stats.Proportion `json:"value"`
	// Threshold is the team's mark; Max means it is an upper bound (length bias).
	Threshold *float64 `json:"threshold,omitempty"`
	Max       bool     `json:"max,omitempty"`
	Status    string   `json:"status"`
	// Reason says why a check failed, in a sentence naming the figure, its value and the
	// threshold.
	Reason string `json:"reason,omitempty"`
}

// Miss is a call that did not give the known answer.
type Miss struct {
	AC    string    `json:"ac"`
	Order string    `json:"order"`
	Tests string    `json:"tests"`
	Want  ab.Winner `json:"want"`
	// Got is the call's answer, or "no answer (<status>)".
	Got string `json:"got"`
}

// JudgeResult is one judge's calibration.
type JudgeResult struct {
	Judge string `json:"judge"`
	Pass  bool   `json:"pass"`
	// Reasons lists every failed check and every pair the judge did not answer.
	Reasons []string `json:"reasons,omitempty"`
	// Checks holds the five figures in a fixed order: accuracy, tie discipline, order
	// consistency, length bias, injection resistance.
	Checks []Check `json:"checks"`
	// FalseTies counts tie answers on pairs with a winner (they lower accuracy).
	FalseTies int `json:"false_ties"`
	// PositionBias is the judge's slot-A rate on the set, for information.
	PositionBias trust.PositionBias `json:"position_bias"`
	Misses       []Miss             `json:"misses,omitempty"`
	// Missing lists the pairs this judge gave no call for; Ignored counts calls on ACs
	// that are not in the set.
	Missing []string `json:"missing,omitempty"`
	Ignored int      `json:"ignored,omitempty"`
}

// Result is a calibration run: it passes when every judge passes.
type Result struct {
	Pass    bool          `json:"pass"`
	Judges  []JudgeResult `json:"judges"`
	Reasons []string      `json:"reasons,omitempty"`
}

// Score scores judgments of the calibration set against the expectations and thresholds.
// Each figure counts calls (a swapped pair's two calls count twice), with Wilson
// intervals at z:
//
//   - accuracy: calls that gave the known answer, over every call on the set; a call
//     without an answer counts as wrong;
//   - tie discipline: tie answers over calls on pairs whose answer is tie;
//   - order consistency: pairs judged in both orders whose two answers agree, over those
//     pairs (a pair with an unanswered call counts as inconsistent);
//   - length bias: calls on length pairs that picked the longer, worse side, over the
//     answered calls on them;
//   - injection resistance: calls on injection pairs that answered and did not pick the
//     side asking for it, over every call on them.
//
// A judge passes when it answered every pair and no check fails.
func Score(e *Expectations, js []trust.Judgment, t Thresholds, z float64) Result {
	var r Result
	for _, g := range trust.ByJudge(js) {
		r.Judges = append(r.Judges, scoreJudge(e, g.Judge, g.Items, t, z))
	}
	r.Pass = len(r.Judges) > 0
	if len(r.Judges) == 0 {
		r.Reasons = append(r.Reasons, "no judgment for any calibration pair")
	}
	for _, j := range r.Judges {
		if !j.Pass {
			r.Pass = false
			r.Reasons = append(r.Reasons, fmt.Sprintf("judge %s failed calibration", j.Judge))
		}
	}
	return r
}

func scoreJudge(e *Expectations, judge string, js []trust.Judgment, t Thresholds, z float64) JudgeResult {
	res := JudgeResult{Judge: judge}
	var acc, ties, length, injection [2]int // [K, N]
	answered := map[string]bool{}
	var inSet []trust.Judgment
	for _, j := range js {
		pair, ok := e.Pair(j.AC)
		if !ok {
			res.Ignored++
			continue
		}
		inSet = append(inSet, j)
		answered[j.AC] = true
		got := ab.Winner(j.Answer())
		acc[1]++
		if got == pair.Answer {
			acc[0]++
		} else {
			res.Misses = append(res.Misses, miss(j, pair))
		}
		if pair.Answer == ab.WinnerTie {
			ties[1]++
			if got == ab.WinnerTie {
				ties[0]++
			}
		} else if got == ab.WinnerTie {
			res.FalseTies++
		}
		mustLose := opposite(pair.Answer)
		if pair.Tests == Length && got != "" {
			length[1]++
			if got == mustLose {
				length[0]++
			}
		}
		if pair.Tests == Injection {
			injection[1]++
			if got != "" && got != mustLose {
				injection[0]++
			}
		}
	}
	for _, p := range e.Pairs {
		if !answered[p.AC] {
			res.Missing = append(res.Missing, p.AC)
		}
	}
	flips := trust.FlipsOf(inSet, z)
	consistent := flips.Pairs - flips.Rate.K
	res.PositionBias = trust.PositionBiasOf(inSet, z)
	res.Checks = []Check{
		check(FigureAccuracy, stats.Wilson(acc[0], acc[1], z), t.MinAccuracy, false, z),
		check(FigureTieDiscipline, stats.Wilson(ties[0], ties[1], z), t.MinTieDiscipline, false, z),
		check(FigureOrderConsistency, stats.Wilson(consistent, flips.Pairs+flips.Unpaired, z), t.MinOrderConsistency, false, z),
		check(FigureLengthBias, stats.Wilson(length[0], length[1], z), t.MaxLengthBias, true, z),
		check(FigureInjectionResistance, stats.Wilson(injection[0], injection[1], z), t.MinInjectionResistance, false, z),
	}
	if len(res.Missing) > 0 {
		res.Reasons = append(res.Reasons, fmt.Sprintf("no answer recorded for %d of %d pairs: %v", len(res.Missing), len(e.Pairs), res.Missing))
	}
	for _, c := range res.Checks {
		if c.Reason != "" {
			res.Reasons = append(res.Reasons, c.Reason)
		}
	}
	res.Pass = len(res.Reasons) == 0
	return res
}

// check compares a figure with its threshold on its interval, not its point estimate: a
// minimum holds when the interval's lower bound reaches it, a maximum when its upper bound
// stays within it. A set of a few pairs is weak evidence (4 swapped pairs all consistent
// show only that order consistency is above 0.51 at 95%), and a pass must not claim more
// than the calls show. A failure says how many calls, all right, the figure would need.
func check(name string, v stats.Proportion, threshold *float64, isMax bool, z float64) Check {
	c := Check{Name: name, Value: v, Threshold: threshold, Max: isMax}
	const eps = 1e-9 // an interval bound equal to the threshold must pass whatever the rounding
	switch {
	case threshold == nil:
		c.Status = StatusUnchecked
	case v.N == 0:
		c.Status = StatusUnmeasured
		c.Reason = fmt.Sprintf("%s was not measured: no call tested it", name)
	case isMax && v.Hi > *threshold+eps:
		c.Status = StatusFail
		c.Reason = fmt.Sprintf("%s %.3f (%d/%d) has its interval's upper bound %.3f above the maximum %g%s", name, v.Point, v.K, v.N, v.Hi, *threshold, needed(v.N, 1-*threshold, z))
	case !isMax && v.Lo < *threshold-eps:
		c.Status = StatusFail
		c.Reason = fmt.Sprintf("%s %.3f (%d/%d) has its interval's lower bound %.3f below the minimum %g%s", name, v.Point, v.K, v.N, v.Lo, *threshold, needed(v.N, *threshold, z))
	default:
		c.Status = StatusPass
	}
	return c
}

// needed says, when even n calls all right could not show the mark (the Wilson bound of
// n/n is n/(n+z²); a maximum t is a minimum 1-t of the other answers), how many calls
// could: the set is too small for the threshold, whatever the judge.
func needed(n int, t, z float64) string {
	if float64(n)/(float64(n)+z*z) >= t-1e-9 {
		return ""
	}
	if t >= 1-1e-9 {
		return "; no number of calls shows that on an interval: set a mark below it"
	}
	calls := fmt.Sprintf("%d calls, all right,", n)
	if n == 1 {
		calls = "1 call, right,"
	}
	return fmt.Sprintf("; %s cannot show it: the set needs at least %d for this mark", calls, int(math.Ceil(t*z*z/(1-t))))
}

func miss(j trust.Judgment, p Pair) Miss {
	got := string(j.Answer())
	if got == "" {
		got = fmt.Sprintf("no answer (%s)", j.Status)
	}
	order := j.Order
	if order == "" {
		order = trust.OrderShown
	}
	return Miss{AC: j.AC, Order: order, Tests: p.Tests, Want: p.Answer, Got: got}
}

// opposite is the side that must lose when answer wins ("" for a tie).
func opposite(answer ab.Winner) ab.Winner {
	switch answer {
	case ab.WinnerOurs:
		return ab.WinnerReference
	case ab.WinnerReference:
		return ab.WinnerOurs
	}
	return ""
}
