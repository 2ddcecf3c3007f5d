package ab

import (
	"fmt"
	"math"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// ab's wire schema: its part of a job spec and of a decision, and the checks each ab
// event passes on the way in. The parts travel under the key "ab", where they were
// fields of pkg/events before (events.Parts).
func init() {
	events.RegisterKind(events.KindAB, events.KindWire{
		Spec: func(s events.JobSpec) error { return SpecOf(s.KindPart).validate() },
		Gates: func(p *events.GatesDone) error {
			if len(p.Slots) != 2 || p.Slots[0].Name != "A" || p.Slots[1].Name != "B" {
				return events.Invalid("slots", "ab needs exactly slots A and B in that order")
			}
			return p.AutoSwap.Validate("auto_swap")
		},
		Verdict: validateVotes,
		Parts: events.Parts{
			JSON:    "AB",
			Spec:    func() any { return new(Spec) },
			Decided: func() any { return new(Decided) },
		},
	})
}

// Spec is the input of an `ab` job (events.JobSpec.KindPart).
type Spec struct {
	Ours      events.Source `msgpack:"ours"`
	Reference events.Source `msgpack:"reference"`
	Threshold float64       `msgpack:"threshold"`
	// Positions is "single" (the seed's one deterministic order), "swap" (judge both
	// orders to control position bias) or "auto" (swap only where it pays, see AutoSwap).
	Positions string `msgpack:"positions,omitempty"`
	// Judges lists the models of a panel; empty means the judge service's default model.
	Judges []string `msgpack:"judges,omitempty"`
	// AutoSwap sets when "auto" swaps; nil takes the defaults.
	AutoSwap *events.AutoSwap `msgpack:"auto_swap,omitempty"`
}

// SpecOf is ab's part of a job spec (its KindPart); nil when it has none.
func SpecOf(part any) *Spec {
	s, _ := part.(*Spec)
	return s
}

func (s *Spec) validate() error {
	if s == nil {
		return events.Missing("ab")
	}
	if err := s.Ours.Validate("ab.ours"); err != nil {
		return err
	}
	if err := s.Reference.Validate("ab.reference"); err != nil {
		return err
	}
	if math.IsNaN(s.Threshold) || s.Threshold < 0 || s.Threshold > 1 {
		return events.Invalid("ab.threshold", fmt.Sprintf("want a number in [0,1], got %v", s.Threshold))
	}
	switch s.Positions {
	case "", events.PositionsSingle, events.PositionsSwap, events.PositionsAuto:
	default:
		return events.Invalid("ab.positions", fmt.Sprintf("want single, swap or auto, got %q", s.Positions))
	}
	return s.AutoSwap.Validate("ab.auto_swap")
}

// Decided is the aggregator's derived outcome of an `ab` job (events.IterationDecided's
// KindPart).
type Decided struct {
	LabelAssignment string  `msgpack:"label_assignment"`
	RawWinner       string  `msgpack:"raw_winner,omitempty"`
	Winner          string  `msgpack:"winner,omitempty"`
	Confidence      float64 `msgpack:"confidence"`
	BiggestGap      string  `msgpack:"biggest_gap,omitempty"`
	Suggest         bool    `msgpack:"suggest"`
	Tag             string  `msgpack:"tag,omitempty"`
	Impact          string  `msgpack:"impact,omitempty"`
	Agreement       string  `msgpack:"agreement,omitempty"`
	Consistent      *bool   `msgpack:"consistent,omitempty"`
}

// DecidedOf is ab's part of a decision (its KindPart); nil when it has none.
func DecidedOf(part any) *Decided {
	d, _ := part.(*Decided)
	return d
}

// validateVotes checks an ab verdict's votes, one per call: a judge, an order and a
// status each.
func validateVotes(p *events.VerdictEmitted) error {
	if len(p.Votes) == 0 {
		return events.Missing("votes")
	}
	for i, v := range p.Votes {
		f := fmt.Sprintf("votes[%d]", i)
		if v.Judge.Provider == "" {
			return events.Missing(f + ".judge.provider")
		}
		switch v.Order {
		case "AB", "BA":
		default:
			return events.Invalid(f+".order", fmt.Sprintf("want AB or BA, got %q", v.Order))
		}
		if err := events.ValidStatus(f+".status", v.Status); err != nil {
			return err
		}
	}
	return nil
}
