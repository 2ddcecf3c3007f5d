package telemetry_test

import (
	"fmt"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// TestBatchJudged: a completed batch's figures become per-model gauges and, on its first
// completion only, counters; a figure the batch did not measure leaves its gauge alone;
// the model label is bounded.
func TestBatchJudged(t *testing.T) {
	m := telemetry.Reset()
	alpha := 0.41
	telemetry.BatchJudged("default", []telemetry.JudgeFigures{
		{Provider: "openai", Model: "biased", SlotA: 70, Decided: 100, Flips: 29, Pairs: 50},
		{Provider: "openai", Model: "steady", SlotA: 52, Decided: 100, Agreed: 90, Compared: 100},
	}, &alpha, true)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"tribunal_judge_slot_a_ratio", []string{"model=biased"}, 0.7},
		{"tribunal_judge_flip_ratio", []string{"model=biased"}, 0.58},
		{"tribunal_judge_panel_agreement_ratio", []string{"model=steady"}, 0.9},
		{"tribunal_panel_alpha", []string{"tenant=default"}, 0.41},
		{"tribunal_judge_decided_answers_total", []string{"model=biased", "slot=A"}, 70},
		{"tribunal_judge_decided_answers_total", []string{"model=biased", "slot=B"}, 30},
		{"tribunal_judge_swap_pairs_total", []string{"model=biased", "flipped=true"}, 29},
		{"tribunal_judge_panel_comparisons_total", []string{"model=steady", "agreed=false"}, 10},
	} {
		if got := m.Value(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// A redrive completes the batch again: gauges follow, counters do not count twice;
	// the steady model was not swapped, so its flip gauge never appears.
	telemetry.BatchJudged("default", []telemetry.JudgeFigures{{Provider: "openai", Model: "biased", SlotA: 60, Decided: 100}}, nil, false)
	if got := m.Value("tribunal_judge_slot_a_ratio", "model=biased"); got != 0.6 {
		t.Errorf("gauge after the redrive %v", got)
	}
	if got := m.Value("tribunal_judge_decided_answers_total", "model=biased"); got != 100 {
		t.Errorf("counters after the redrive %v, want 100", got)
	}
	if got := m.Value("tribunal_judge_flip_ratio", "model=steady"); got != 0 {
		t.Errorf("unmeasured flip gauge %v", got)
	}
	for i := range telemetry.MaxModelLabels + 10 {
		telemetry.BatchJudged("default", []telemetry.JudgeFigures{{Provider: "openai", Model: fmt.Sprintf("m%d", i), SlotA: 1, Decided: 1}}, nil, false)
	}
	if got := m.Value("tribunal_judge_slot_a_ratio", "model=other"); got != 1 {
		t.Errorf("models past the bound: %v, want them under model=other", got)
	}
	if got := m.Value("tribunal_judge_slot_a_ratio", fmt.Sprintf("model=m%d", telemetry.MaxModelLabels+5)); got != 0 {
		t.Error("a model past the bound has its own series")
	}
}
