package events

import (
	"fmt"
	"strconv"
)

// MaxTrials bounds `trials:`: every trial is a paid call (times the panel and the
// orders), and past a handful the verdict's stability is already measured.
const MaxTrials = 15

// Repeats is how often and by whom a job is judged beyond one call (issue 26): the same
// judge Trials times, and a judge ladder whose later rungs are asked only when the
// earlier one was unsure. The batch sets it for every kind alike; the client puts it on
// the spec and the gater passes it on to the judge, as it does the budget.
type Repeats struct {
	// Trials is how many times each judge is asked the same question (0 and 1: once).
	Trials int `msgpack:"trials,omitempty" json:"trials,omitempty"`
	// AtLeast is how many trials the winning answer needs; 0 means a strict majority.
	AtLeast int `msgpack:"at_least,omitempty" json:"at_least,omitempty"`
	// Ladder names the judge models from the cheapest up; empty means no ladder.
	Ladder []string `msgpack:"ladder,omitempty" json:"ladder,omitempty"`
	// Escalate is when a rung hands the job to the next one.
	Escalate *Escalate `msgpack:"escalate_when,omitempty" json:"escalate_when,omitempty"`
}

// Escalate is a ladder's `escalate_when:`: any condition that holds sends the job up.
type Escalate struct {
	// Confidence escalates an answer whose confidence is below it (nil: never on it).
	Confidence *float64 `msgpack:"confidence,omitempty" json:"confidence,omitempty"`
	// Flip escalates an answer whose two orders disagreed (a position swap's flip).
	Flip bool `msgpack:"flip,omitempty" json:"flip,omitempty"`
	// Disagreement escalates an answer whose trials did not all agree.
	Disagreement bool `msgpack:"disagreement,omitempty" json:"disagreement,omitempty"`
}

// K is the number of trials asked: at least 1.
func (r *Repeats) K() int {
	if r == nil || r.Trials < 1 {
		return 1
	}
	return r.Trials
}

// Rungs is the ladder's rungs, or one rung of "" (the job's own judges) without one.
func (r *Repeats) Rungs() []string {
	if r == nil || len(r.Ladder) == 0 {
		return []string{""}
	}
	return r.Ladder
}

// Validate refuses repeats no judge could follow, naming the field.
func (r *Repeats) Validate(field string) error {
	if r == nil {
		return nil
	}
	if r.Trials < 0 || r.Trials > MaxTrials {
		return invalid(field+".trials", fmt.Sprintf("want 1 to %d, got %d", MaxTrials, r.Trials))
	}
	if r.AtLeast < 0 || r.AtLeast > r.K() {
		return invalid(field+".at_least", fmt.Sprintf("want 1 to trials (%d), got %d", r.K(), r.AtLeast))
	}
	for i, m := range r.Ladder {
		if m == "" {
			return missing(field + ".ladder[" + strconv.Itoa(i) + "]")
		}
	}
	if len(r.Ladder) == 1 {
		return invalid(field+".ladder", "a ladder needs at least two rungs (cheap, then strong)")
	}
	if len(r.Ladder) > 0 && r.Escalate == nil {
		return missing(field + ".escalate_when")
	}
	if e := r.Escalate; e != nil {
		if len(r.Ladder) == 0 {
			return invalid(field+".escalate_when", "set without a ladder")
		}
		if e.Confidence != nil && (*e.Confidence < 0 || *e.Confidence > 1) {
			return invalid(field+".escalate_when.confidence", fmt.Sprintf("want a number in [0,1], got %v", *e.Confidence))
		}
		if e.Confidence == nil && !e.Flip && !e.Disagreement {
			return invalid(field+".escalate_when", "names no condition (confidence, flip, disagreement)")
		}
	}
	return nil
}

// TrialsResult is how a job's trials were reduced to its verdict (on IterationDecided),
// derived by the kind's rules from the answers on the verdict event.
type TrialsResult struct {
	// Reducer is "majority" (ab, equivalence) or "median" (critic scores).
	Reducer string `msgpack:"reducer" json:"reducer"`
	// Answers are each trial's answer as the reducer read it, in trial order.
	Answers []string `msgpack:"answers" json:"answers"`
	// Answer is the reduced answer; For the trials agreeing with it.
	Answer string `msgpack:"answer,omitempty" json:"answer,omitempty"`
	For    int    `msgpack:"for" json:"for"`
	// AtLeast is how many trials the answer needed.
	AtLeast int `msgpack:"at_least" json:"at_least"`
	// Agreement is For over the number of trials.
	Agreement float64 `msgpack:"agreement" json:"agreement"`
	// Unsure says why the trials decided nothing (the answer fell short of AtLeast).
	Unsure string `msgpack:"unsure,omitempty" json:"unsure,omitempty"`
}

// LadderResult is which rung of a judge ladder decided a job, and why it climbed.
type LadderResult struct {
	// Rungs are the ladder's models, cheapest first.
	Rungs []string `msgpack:"rungs" json:"rungs"`
	// Decided is the index of the rung whose answer is the verdict.
	Decided int `msgpack:"decided" json:"decided"`
	// Why is why each rung below Decided was not enough, in rung order.
	Why []string `msgpack:"why,omitempty" json:"why,omitempty"`
	// Answers are each asked rung's reduced answer, in rung order.
	Answers []string `msgpack:"answers" json:"answers"`
}
