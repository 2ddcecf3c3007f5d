package ab

import (
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// TestAutoSwapRule: when positions auto asks for the swapped order. The flip-rate
// boundary is computed by hand: with no flip in n pairs the Wilson upper bound is
// z²/(n+z²), 3.8415/38.8415 = 0.0989 for 35 pairs (at most 0.1: trusted) and
// 3.8415/37.8415 = 0.1015 for 34 (not shown: swap).
func TestAutoSwapRule(t *testing.T) {
	t.Parallel()
	rule := events.AutoSwap{Confidence: 0.8, FlipRate: 0.1}
	ok := func(conf float64) events.Vote {
		return events.Vote{Status: events.VoteOK, RawWinner: "A", Confidence: conf}
	}
	tests := []struct {
		name    string
		first   events.Vote
		history FlipCount
		swap    bool
		why     string
	}{
		{"never measured: swap", ok(0.95), FlipCount{}, true, "flip rate 0/0"},
		{"34 consistent pairs are not enough", ok(0.95), FlipCount{Pairs: 34}, true, "upper bound 0.102 above 0.1"},
		{"35 consistent pairs are", ok(0.95), FlipCount{Pairs: 35}, false, "shown to be at most 0.1"},
		{"a flipping judge: swap", ok(0.99), FlipCount{Pairs: 400, Flips: 60}, true, "flip rate 60/400"},
		{"a trusted judge unsure of this AC: swap", ok(0.79), FlipCount{Pairs: 200, Flips: 2}, true, "confidence 0.79 below 0.8"},
		{"a trusted judge at the threshold: one order", ok(0.8), FlipCount{Pairs: 200, Flips: 2}, false, ""},
		{"no answer: nothing to check", events.Vote{Status: events.VoteUnavailable}, FlipCount{}, false, "no answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			swap, why := DecideSwap(tt.first, tt.history, rule)
			if swap != tt.swap || !strings.Contains(why, tt.why) {
				t.Errorf("swap %v (%s), want %v (%q)", swap, why, tt.swap, tt.why)
			}
		})
	}
}

// TestFlipHistory: a batch recorded twice counts once, an empty batch is not kept, and
// only the most recent batches count.
func TestFlipHistory(t *testing.T) {
	t.Parallel()
	var h FlipHistory
	if !h.Record("b1", map[string]FlipCount{"openai/m": {Pairs: 10, Flips: 1}, "openai/n": {}}) {
		t.Fatal("first record changed nothing")
	}
	if h.Record("b1", map[string]FlipCount{"openai/m": {Pairs: 10, Flips: 1}}) {
		t.Error("recording the same batch again changed the history")
	}
	if h.Record("empty", map[string]FlipCount{"openai/m": {}}) {
		t.Error("a batch without pairs was kept")
	}
	h.Record("b2", map[string]FlipCount{"openai/m": {Pairs: 5, Flips: 3}})
	if c := h.Count("openai/m"); c != (FlipCount{Pairs: 15, Flips: 4}) {
		t.Errorf("count %+v", c)
	}
	// A redrive completed b1 again with other counts: they replace the first ones.
	h.Record("b1", map[string]FlipCount{"openai/m": {Pairs: 12, Flips: 1}})
	if c := h.Count("openai/m"); c != (FlipCount{Pairs: 17, Flips: 4}) || h.Batches[len(h.Batches)-1].Batch != "b1" {
		t.Errorf("after the redrive %+v %+v", c, h.Batches)
	}
	for i := range MaxFlipBatches + 5 {
		h.Record("x"+string(rune('a'+i%26))+string(rune('a'+i/26)), map[string]FlipCount{"openai/m": {Pairs: 1}})
	}
	if len(h.Batches) != MaxFlipBatches || h.Count("openai/m").Flips != 0 {
		t.Errorf("%d batches kept, flips %d: the oldest should be gone", len(h.Batches), h.Count("openai/m").Flips)
	}
	if h.Count("openai/other") != (FlipCount{}) {
		t.Error("an unknown judge has counts")
	}
}

// TestEstimateAuto: auto costs one call per model at least and two at most.
func TestEstimateAuto(t *testing.T) {
	t.Parallel()
	sp := spec("AC-1", 0.75)
	SpecOf(sp.KindPart).Positions, SpecOf(sp.KindPart).Judges = events.PositionsAuto, []string{"a", "b"}
	e := Kind{}.Estimate(sp)
	if e.JudgeCalls != 2 || e.MaxJudgeCalls != 4 || e.Positions != "auto" {
		t.Errorf("estimate %+v", e)
	}
	SpecOf(sp.KindPart).Positions = events.PositionsSwap
	if e := (Kind{}).Estimate(sp); e.JudgeCalls != 4 || e.MaxJudgeCalls != 4 {
		t.Errorf("swap estimate %+v", e)
	}
}
