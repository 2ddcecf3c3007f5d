package telemetry_test

import (
	"math"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// TestPrimeMakesEveryFamilyExistAtZero: the Prime functions of the four services, a
// provider and the ingress together make every tribunal metric family exist before any
// event, counters and histograms at zero and the batch ratios at NaN, for the configured
// tenants only. Not parallel: it replaces the default metric set.
func TestPrimeMakesEveryFamilyExistAtZero(t *testing.T) {
	m := telemetry.Reset()
	m.SetTenants([]string{"team-a", "team-b"})
	kinds := []string{"ab", "critic"}
	telemetry.PrimeService("judge", []string{"gates.done"})
	telemetry.PrimeService("aggregator", []string{"job.submitted", "dead_letter"})
	telemetry.PrimeGater(kinds)
	telemetry.PrimeAggregator(kinds)
	telemetry.PrimeJudge("openai", "gpt-x", kinds)
	telemetry.PrimeProvider("openai", "gpt-x", append(kinds, "runner"))
	telemetry.PrimeBatchMode("openai", "gpt-x")
	telemetry.PrimeIngress([]string{"POST /v1/events"})
	m.WatchPending("judge", nil, func() bool { return false }) // reported only when elected

	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	ratios := map[string]bool{"tribunal_judge_slot_a_ratio": true, "tribunal_judge_flip_ratio": true,
		"tribunal_judge_panel_agreement_ratio": true, "tribunal_panel_alpha": true}
	for _, f := range fams {
		seen[f.GetName()] = true
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "tenant" && l.GetValue() != "team-a" && l.GetValue() != "team-b" {
					t.Errorf("%s primed for tenant %q", f.GetName(), l.GetValue())
				}
			}
			var v float64
			switch {
			case s.Counter != nil:
				v = s.GetCounter().GetValue()
			case s.Gauge != nil:
				v = s.GetGauge().GetValue()
			case s.Histogram != nil:
				v = float64(s.GetHistogram().GetSampleCount())
			}
			switch name := f.GetName(); {
			case ratios[name]:
				if !math.IsNaN(v) {
					t.Errorf("%s = %v, want NaN before any batch", name, v)
				}
			case name == "tribunal_build_info" || len(name) < 9 || name[:9] != "tribunal_":
			default:
				if v != 0 {
					t.Errorf("%s = %v, want 0", name, v)
				}
			}
		}
	}
	for name := range telemetry.MetricLabels() {
		if !seen[name] && name != "tribunal_consumer_pending" {
			t.Errorf("%s does not exist after priming", name)
		}
	}
	if got := m.Value("tribunal_events_handled_total", "service=aggregator", "type=dead_letter", "tenant=team-b"); got != 0 {
		t.Errorf("handled %v", got)
	}
}
