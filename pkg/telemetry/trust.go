package telemetry

import "strconv"

// MaxModelLabels bounds the model label of the judge trust metrics: the first models a
// process sees keep their names, any later one is OtherModel. A batch names its panel's
// models itself, so without the bound a team could grow the series without limit.
const MaxModelLabels = 32

// OtherModel is the model label of every model past MaxModelLabels.
const OtherModel = "other"

// ModelLabel is provider/model's model label under the bound (MaxModelLabels).
func (m *Metrics) ModelLabel(provider, model string) string {
	m.modelsMu.Lock()
	defer m.modelsMu.Unlock()
	key := provider + "/" + model
	if m.models[key] {
		return model
	}
	if len(m.models) >= MaxModelLabels {
		return OtherModel
	}
	if m.models == nil {
		m.models = map[string]bool{}
	}
	m.models[key] = true
	return model
}

// JudgeFigures are one judge model's trust figures over a completed batch, as package
// trust computes them (docs/judging.md).
type JudgeFigures struct {
	Provider, Model string
	// SlotA of Decided: how often the judge picked slot A among its decided answers.
	SlotA, Decided int
	// Flips of Pairs: its swapped pairs whose answers disagreed once un-swapped.
	Flips, Pairs int
	// Agreed of Compared: its answers compared with each other judge of the panel on the
	// same AC, and how many agreed.
	Agreed, Compared int
}

// BatchJudged exports the judge figures of a batch the aggregator completed: each
// model's ratios over the batch as gauges, the panel's alpha when it has one, and, when
// count is set (the batch's first completion, not a redrive's), the answers behind them
// as counters. A figure the batch did not measure leaves its gauge as it was.
func BatchJudged(tenant string, figures []JudgeFigures, alpha *float64, count bool) {
	m := Default()
	for _, f := range figures {
		model := m.ModelLabel(f.Provider, f.Model)
		if f.Decided > 0 {
			m.JudgeSlotA.WithLabelValues(f.Provider, model).Set(float64(f.SlotA) / float64(f.Decided))
		}
		if f.Pairs > 0 {
			m.JudgeFlips.WithLabelValues(f.Provider, model).Set(float64(f.Flips) / float64(f.Pairs))
		}
		if f.Compared > 0 {
			m.JudgeAgreement.WithLabelValues(f.Provider, model).Set(float64(f.Agreed) / float64(f.Compared))
		}
		if !count {
			continue
		}
		m.JudgeDecided.WithLabelValues(f.Provider, model, "A").Add(float64(f.SlotA))
		m.JudgeDecided.WithLabelValues(f.Provider, model, "B").Add(float64(f.Decided - f.SlotA))
		m.JudgeSwapPairs.WithLabelValues(f.Provider, model, strconv.FormatBool(true)).Add(float64(f.Flips))
		m.JudgeSwapPairs.WithLabelValues(f.Provider, model, strconv.FormatBool(false)).Add(float64(f.Pairs - f.Flips))
		m.JudgePanelComparisons.WithLabelValues(f.Provider, model, strconv.FormatBool(true)).Add(float64(f.Agreed))
		m.JudgePanelComparisons.WithLabelValues(f.Provider, model, strconv.FormatBool(false)).Add(float64(f.Compared - f.Agreed))
	}
	if alpha != nil {
		m.PanelAlpha.WithLabelValues(m.TenantLabel(tenant)).Set(*alpha)
	}
}
