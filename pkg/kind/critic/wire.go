package critic

import (
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// critic's wire schema: its part of a job spec, of a verdict and of a decision, and the
// checks each critic event passes on the way in. The parts travel under the key
// "critic", where they were fields of pkg/events before (events.Parts).
func init() {
	events.RegisterKind(events.KindCritic, events.KindWire{
		Spec: func(s events.JobSpec) error { return SpecOf(s.KindPart).validate() },
		Gates: func(p *events.GatesDone) error {
			if len(p.Slots) != 1 || p.Slots[0].Name != "output" {
				return events.Invalid("slots", "critic needs exactly one slot named output")
			}
			return nil
		},
		Verdict: func(p *events.VerdictEmitted) error {
			v := VoteOf(p.KindPart)
			if v == nil {
				return events.Missing("critic")
			}
			for i, t := range TrialsOf(p.KindTrials) {
				if err := events.ValidStatus(fmt.Sprintf("critic_trials[%d].status", i), t.Status); err != nil {
					return err
				}
			}
			return events.ValidStatus("critic.status", v.Status)
		},
		Parts: events.Parts{
			JSON:    "Critic",
			Spec:    func() any { return new(Spec) },
			Verdict: func() any { return new(Vote) },
			// The answers of a verdict's later trials (2 to k), beside the first.
			VerdictTrials: func() any { return new([]Vote) },
			Decided:       func() any { return new(Decided) },
		},
	})
}

// Spec is the input of a `critic` job: a task and the output produced for it
// (events.JobSpec.KindPart).
type Spec struct {
	// Task is the task description, inline.
	Task string `msgpack:"task"`
	// Output is the produced output: inline text the client stored as a blob, or an
	// artifact file. Its Error says "missing input" when there is none.
	Output events.Source `msgpack:"output"`
}

// SpecOf is critic's part of a job spec (its KindPart); nil when it has none.
func SpecOf(part any) *Spec {
	s, _ := part.(*Spec)
	return s
}

func (s *Spec) validate() error {
	if s == nil {
		return events.Missing("critic")
	}
	if s.Output.Blob == nil && s.Output.URL == "" && s.Output.Error == "" {
		return events.Missing("critic.output")
	}
	return s.Output.Validate("critic.output")
}

// Vote is a critic judge's answer (events.VerdictEmitted.KindPart).
type Vote struct {
	Judge       events.JudgeInfo  `msgpack:"judge"`
	Status      events.VoteStatus `msgpack:"status"`
	Error       string            `msgpack:"error,omitempty"`
	Raw         string            `msgpack:"raw,omitempty"`
	Correctness int               `msgpack:"correctness"`
	Slop        int               `msgpack:"slop"`
	Scope       int               `msgpack:"scope"`
	Rationale   string            `msgpack:"rationale,omitempty"`
	// ClaimedVerdict and ClaimedQuality are what the judge said; the aggregator derives
	// its own and counts the disagreements.
	ClaimedVerdict string `msgpack:"claimed_verdict,omitempty"`
	ClaimedQuality *int   `msgpack:"claimed_quality,omitempty"`
}

// VoteOf is critic's part of a verdict (its KindPart); nil when it has none.
func VoteOf(part any) *Vote {
	v, _ := part.(*Vote)
	return v
}

// TrialsOf is the answers of a critic verdict's later trials (its KindTrials), in
// order; nil when it was judged once.
func TrialsOf(part any) []Vote {
	t, _ := part.([]Vote)
	return t
}

// Decided is the aggregator's derived outcome of a critic job
// (events.IterationDecided.KindPart).
type Decided struct {
	Correctness   int    `msgpack:"correctness"`
	Slop          int    `msgpack:"slop"`
	Scope         int    `msgpack:"scope"`
	Quality       int    `msgpack:"quality"`
	Verdict       string `msgpack:"verdict"`
	Rationale     string `msgpack:"rationale,omitempty"`
	Disagreements int    `msgpack:"disagreements"`
}

// DecidedOf is critic's part of a decision (its KindPart); nil when it has none.
func DecidedOf(part any) *Decided {
	d, _ := part.(*Decided)
	return d
}
