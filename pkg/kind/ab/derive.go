package ab

import (
	"fmt"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// Decision is what the aggregator derives for one `ab` job iteration.
type Decision struct {
	// Blocked is set when a judge could not answer (provider unavailable): the job is
	// blocked with this reason, never passed.
	Blocked    string
	Comparison Comparison
	Decided    *events.IterationDecided
}

// PairOf returns the ours/reference names the submitter gave, for the manifest.
func PairOf(spec events.JobSpec) Pair {
	if SpecOf(spec.KindPart) == nil {
		return Pair{}
	}
	return Pair{Ours: SpecOf(spec.KindPart).Ours.Name, Reference: SpecOf(spec.KindPart).Reference.Name}
}

// Derive un-shuffles and combines the votes of one job iteration. Single order: the
// vote's raw winner under the seed's assignment. Swap: both orders combined (consistent
// pairs keep their winner, inconsistent ones tie). Several models: each model's result is
// one panel vote and the majority wins.
//
// With repeated trials or a judge ladder (spec.Repeats, or votes recorded as later trials
// or rungs) each trial is derived so and the trials reduced (DeriveRepeated).
func Derive(spec events.JobSpec, iteration int, votes []events.Vote) Decision {
	if repeated(spec, votes) {
		return DeriveRepeated(spec, iteration, votes)
	}
	return deriveOnce(spec, iteration, votes)
}

// deriveOnce derives one trial of one rung: the votes of a single asking.
func deriveOnce(spec events.JobSpec, iteration int, votes []events.Vote) Decision {
	assign := Assign(spec.ACID, iteration)
	pair := PairOf(spec)
	threshold := SpecOf(spec.KindPart).Threshold
	var judges []string
	seen := map[string]bool{}
	for _, v := range votes {
		name := v.Judge.Provider + "/" + v.Judge.Model
		if !seen[name] {
			seen[name] = true
			judges = append(judges, name)
		}
	}
	decided := &events.IterationDecided{Kind: events.KindAB, ACID: spec.ACID, Final: true, Judges: judges}
	for _, v := range votes {
		if v.Status == events.VoteUnavailable {
			return Decision{Blocked: fmt.Sprintf("judge unavailable (%s/%s): %s", v.Judge.Provider, v.Judge.Model, v.Error),
				Comparison: Blocked(spec.ACID, pair, assign, "judge unavailable: "+v.Error)}
		}
	}
	if len(votes) == 0 {
		return Decision{Blocked: "no judge votes", Comparison: Blocked(spec.ACID, pair, assign, "no judge votes")}
	}
	for _, v := range votes {
		problem := v.Error
		if v.Status == events.VoteOK {
			// Never trust the judge service's "ok": re-validate what it claims.
			if err := raw(v).Validate(); err != nil {
				problem = err.Error()
				decided.Disagreements++
			} else {
				continue
			}
		}
		{
			c := SchemaViolation(spec.ACID, pair, assign, fmt.Errorf("%s (%s/%s)", problem, v.Judge.Provider, v.Judge.Model))
			c.Tribunal = &ComparisonExtras{Judge: judgeInfo(v), Answer: v.Raw}
			decided.Status = events.StatusSchemaViolation
			decided.KindPart = &Decided{LabelAssignment: assign.String()}
			return Decision{Comparison: c, Decided: decided}
		}
	}

	// Group by model, keeping order of first appearance.
	type modelVotes struct {
		name   string
		ab, ba *events.Vote
	}
	var groups []*modelVotes
	byName := map[string]*modelVotes{}
	for i := range votes {
		v := &votes[i]
		name := v.Judge.Provider + "/" + v.Judge.Model
		g := byName[name]
		if g == nil {
			g = &modelVotes{name: name}
			byName[name] = g
			groups = append(groups, g)
		}
		if v.Order == "BA" {
			g.ba = v
		} else {
			g.ab = v
		}
	}
	extras := &ComparisonExtras{}
	var panelVotes []Vote
	var gap string
	var consistent *bool
	for _, g := range groups {
		if g.ab == nil {
			// A BA vote alone is judged under the swapped assignment.
			w := Unshuffle(g.ba.RawWinner, assign.Swapped())
			panelVotes = append(panelVotes, Vote{Judge: g.name, Winner: w, Confidence: g.ba.Confidence, Sampling: g.ba.Judge.Sampling})
			gap = firstNonEmpty(gap, g.ba.BiggestGap)
			continue
		}
		first := raw(*g.ab)
		if g.ba == nil {
			panelVotes = append(panelVotes, Vote{Judge: g.name, Winner: Unshuffle(first.RawWinner, assign), Confidence: first.Confidence, Sampling: g.ab.Judge.Sampling})
			gap = firstNonEmpty(gap, first.BiggestGap)
			continue
		}
		second := raw(*g.ba)
		w, c, ok := CombineSwap(first, second, assign)
		consistent = &ok
		extras.Swap = &SwapRecord{First: first, FirstAssignment: assign, Second: second, SecondAssignment: assign.Swapped(), Consistent: ok}
		panelVotes = append(panelVotes, Vote{Judge: g.name, Winner: w, Confidence: c, Sampling: g.ab.Judge.Sampling})
		gap = firstNonEmpty(gap, first.BiggestGap)
	}
	winner, confidence := panelVotes[0].Winner, panelVotes[0].Confidence
	agreement := ""
	if len(panelVotes) > 1 {
		p := Panel(panelVotes)
		winner, confidence, agreement = p.Winner, p.Confidence, p.Agreement
		extras.Panel = &p
		extras.Swap = nil // per-model swap evidence lives in the votes of the verdict event
	}
	extras.Judge = judgeInfo(votes[0])
	if len(groups) > 1 {
		extras.Judge = &JudgeInfo{Provider: "panel", Model: strings.Join(judges, ","), PromptVersion: votes[0].Judge.PromptHash}
	}
	for _, v := range votes {
		extras.Unpinned = extras.Unpinned || v.Judge.Sampling != nil && !v.Judge.Sampling.Pinned()
	}
	c := Compared(spec.ACID, pair, assign, RawVerdict{RawWinner: assign.Label(winner), Confidence: confidence, BiggestGap: gap})
	c.Tribunal = extras
	suggest, tag, impact := Route(winner, confidence, threshold)
	decided.Status = events.StatusCompared
	decided.KindPart = &Decided{
		LabelAssignment: assign.String(), RawWinner: c.RawWinner, Winner: string(winner), Confidence: confidence,
		BiggestGap: gap, Suggest: suggest, Agreement: agreement, Consistent: consistent,
	}
	if suggest {
		DecidedOf(decided.KindPart).Tag, DecidedOf(decided.KindPart).Impact = string(tag), string(impact)
	}
	return Decision{Comparison: c, Decided: decided}
}

func raw(v events.Vote) RawVerdict {
	return RawVerdict{RawWinner: v.RawWinner, Confidence: v.Confidence, BiggestGap: v.BiggestGap}
}

func judgeInfo(v events.Vote) *JudgeInfo {
	return &JudgeInfo{Provider: v.Judge.Provider, Model: v.Judge.Model, PromptVersion: v.Judge.PromptHash, Sampling: v.Judge.Sampling}
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
