package ab

import (
	"fmt"
	"sort"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/trials"
)

// repeated reports whether a job was asked more than once: trials or a ladder on its
// spec, or votes recorded as later trials or rungs (which a spec without them must not
// hide from the derivation).
func repeated(spec events.JobSpec, votes []events.Vote) bool {
	if r := spec.Repeats; r != nil && (r.K() > 1 || len(r.Ladder) > 0) {
		return true
	}
	for _, v := range votes {
		if v.Trial > 0 || v.Rung > 0 {
			return true
		}
	}
	return false
}

// rung is one ladder rung's derivation over its trials.
type rung struct {
	d Decision
	// winner is the reduced winner ("" when the rung failed: blocked or invalid).
	winner string
	// failed marks an outage or a schema violation: nothing to escalate on.
	failed  bool
	signals trials.Signals
}

// deriveRung derives each trial of one rung's votes (deriveOnce: swap and panel as for a
// single asking) and reduces the trials' winners by majority (trials.Majority, with
// at_least). The verdict's confidence is the mean over the trials agreeing with the
// winner, as a panel's is. Trials falling short of at_least leave the rung blocked with
// the reason, its trials recorded.
func deriveRung(spec events.JobSpec, iteration int, votes []events.Vote) rung {
	k, atLeast := spec.Repeats.K(), 0
	if spec.Repeats != nil {
		atLeast = spec.Repeats.AtLeast
	}
	byTrial := map[int][]events.Vote{}
	for _, v := range votes {
		byTrial[v.Trial] = append(byTrial[v.Trial], v)
		k = max(k, v.Trial+1)
	}
	if k == 1 {
		d := deriveOnce(spec, iteration, votes)
		if d.Blocked != "" || d.Decided.Status != events.StatusCompared {
			return rung{d: d, failed: true}
		}
		a := DecidedOf(d.Decided.KindPart)
		return rung{d: d, winner: a.Winner, signals: trials.Signals{Confidence: a.Confidence, HasConfidence: true, Flip: a.Consistent != nil && !*a.Consistent}}
	}
	ds := make([]Decision, k)
	answers := make([]string, k)
	flip := false
	for t := range k {
		vs := byTrial[t]
		if len(vs) == 0 {
			reason := fmt.Sprintf("trial %d of %d has no recorded answer", t+1, k)
			return rung{d: blockedDecision(spec, iteration, reason), failed: true}
		}
		d := deriveOnce(spec, iteration, vs)
		if d.Blocked != "" || d.Decided.Status != events.StatusCompared {
			if d.Blocked != "" {
				d.Blocked = fmt.Sprintf("trial %d of %d: %s", t+1, k, d.Blocked)
			}
			return rung{d: d, failed: true}
		}
		ds[t], answers[t] = d, DecidedOf(d.Decided.KindPart).Winner
		flip = flip || DecidedOf(d.Decided.KindPart).Consistent != nil && !*DecidedOf(d.Decided.KindPart).Consistent
	}
	red := trials.Majority(answers, atLeast)
	first := -1
	var agreeing []float64
	for t, a := range answers {
		if a == red.Answer {
			if first < 0 {
				first = t
			}
			agreeing = append(agreeing, DecidedOf(ds[t].Decided.KindPart).Confidence)
		}
	}
	// Sum in sorted order, so the mean is the same bit for bit whatever the trials' order.
	sort.Float64s(agreeing)
	var sum float64
	for _, c := range agreeing {
		sum += c
	}
	conf := sum / float64(len(agreeing))
	sig := trials.Signals{Confidence: conf, HasConfidence: true, Flip: flip, Trials: &red}
	if red.Unsure != "" {
		d := blockedDecision(spec, iteration, red.Unsure)
		d.Decided = &events.IterationDecided{Kind: events.KindAB, ACID: spec.ACID, Status: events.StatusBlocked, Final: true, Judges: ds[0].Decided.Judges, Trials: &red}
		return rung{d: d, winner: red.Answer, signals: sig}
	}
	rep := ds[first]
	decided := *rep.Decided
	res := *DecidedOf(decided.KindPart)
	res.Confidence = conf
	res.Suggest, res.Tag, res.Impact = false, "", ""
	suggest, tag, impact := Route(Winner(red.Answer), conf, SpecOf(spec.KindPart).Threshold)
	res.Suggest = suggest
	if suggest {
		res.Tag, res.Impact = string(tag), string(impact)
	}
	decided.KindPart, decided.Trials = &res, &red
	c := rep.Comparison
	c.Confidence = &conf
	extras := ComparisonExtras{}
	if c.Tribunal != nil {
		extras = *c.Tribunal
	}
	extras.Trials = &red
	c.Tribunal = &extras
	return rung{d: Decision{Comparison: c, Decided: &decided}, winner: red.Answer, signals: sig}
}

func blockedDecision(spec events.JobSpec, iteration int, reason string) Decision {
	return Decision{Blocked: reason, Comparison: Blocked(spec.ACID, PairOf(spec), Assign(spec.ACID, iteration), reason)}
}

// DeriveRepeated derives a job asked several times: each rung of its ladder (one rung
// without a ladder) over its trials (deriveRung), climbing while the rung's answer meets
// the ladder's escalate_when (trials.Escalate). The verdict is the first rung that did not
// escalate, or the last; it records which rung decided and why each rung below climbed.
// A rung that was due and has no recorded answer blocks the job: the judge did not ask
// whom the rule required.
func DeriveRepeated(spec events.JobSpec, iteration int, votes []events.Vote) Decision {
	rungs := spec.Repeats.Rungs()
	byRung := map[int][]events.Vote{}
	for _, v := range votes {
		byRung[v.Rung] = append(byRung[v.Rung], v)
	}
	var lad *events.LadderResult
	if len(rungs) > 1 {
		lad = &events.LadderResult{Rungs: append([]string(nil), rungs...)}
	}
	var rule *events.Escalate
	if spec.Repeats != nil {
		rule = spec.Repeats.Escalate
	}
	for r := range rungs {
		vs := byRung[r]
		if len(vs) == 0 {
			reason := "no judge votes"
			if r > 0 {
				reason = fmt.Sprintf("ladder: rung %d (%s) was due (%s) and gave no answer", r+1, rungs[r], lad.Why[r-1])
			}
			d := blockedDecision(spec, iteration, reason)
			return withLadder(d, lad, r)
		}
		o := deriveRung(spec, iteration, vs)
		if lad != nil {
			lad.Answers = append(lad.Answers, o.winner)
		}
		if r == len(rungs)-1 || o.failed {
			return withLadder(o.d, lad, r)
		}
		up, why := trials.Escalate(rule, o.signals)
		if !up {
			return withLadder(o.d, lad, r)
		}
		lad.Why = append(lad.Why, why)
	}
	return blockedDecision(spec, iteration, "no judge votes")
}

func withLadder(d Decision, lad *events.LadderResult, decided int) Decision {
	if lad == nil {
		return d
	}
	lad.Decided = decided
	if d.Decided != nil {
		dec := *d.Decided
		dec.Ladder = lad
		d.Decided = &dec
	}
	extras := ComparisonExtras{}
	if d.Comparison.Tribunal != nil {
		extras = *d.Comparison.Tribunal
	}
	extras.Ladder = lad
	d.Comparison.Tribunal = &extras
	return d
}

// Escalates is the judge stage's question after asking a ladder's rung: do these votes
// (the rung's, over its trials) send the job to the next rung, and why. It is the rule the
// aggregator derives the verdict by (DeriveRepeated), asked of the same answers.
func Escalates(acID string, iteration int, rep *events.Repeats, votes []events.Vote) (bool, string) {
	if rep == nil {
		return false, ""
	}
	spec := events.JobSpec{Kind: events.KindAB, ACID: acID, KindPart: &Spec{Threshold: DefaultThreshold}, Repeats: rep}
	o := deriveRung(spec, iteration, votes)
	if o.failed {
		return false, ""
	}
	return trials.Escalate(rep.Escalate, o.signals)
}
