package telemetry

import (
	"math"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// A labelled Prometheus metric has no series until its first observation, so on a fresh
// deployment most of the Grafana dashboard's panels said "No data" (a dead-letter count
// that never moved looked like a broken scrape). The Prime functions create, at start,
// the series each process will report, at zero: the labels a process knows before any
// event (its services, their input types, the tenants it serves, its provider and
// model, the judge kinds), never one a single event could choose. Each part of a
// process primes what it runs; a process primes nothing it does not run.
//
// Ratios measured over a batch (judge_slot_a_ratio, judge_flip_ratio,
// judge_panel_agreement_ratio, panel_alpha) start as NaN, not 0: before a batch there is
// no share to report, and a 0 would claim a judge that always picks slot B, never flips,
// or never agrees. Prometheus's max ignores NaN, so the first measured value shows.

// tenantLabels are the tenant label values of the configured tenants ("default" when
// none are: SetTenants).
func (m *Metrics) tenantLabels() []string {
	m.tenantsMu.RLock()
	defer m.tenantsMu.RUnlock()
	if len(m.tenants) == 0 {
		return []string{"default"}
	}
	return append([]string(nil), m.tenants...)
}

// PrimeService makes the delivery metrics of one service exist at zero: handled and
// failed deliveries of every input type for every configured tenant (call SetTenants
// first), its handler time, dead letters, and the refusals every router can make (an
// envelope its subject contradicts). inputs are the event types the service consumes,
// "dead_letter" for the aggregator's dead-letter input.
func PrimeService(service string, inputs []string) {
	m := Default()
	for _, typ := range inputs {
		for _, t := range m.tenantLabels() {
			m.EventsHandled.WithLabelValues(service, typ, t)
			m.EventsFailed.WithLabelValues(service, typ, t)
		}
	}
	m.HandlerSeconds.WithLabelValues(service)
	m.DeadLetters.WithLabelValues(service)
	for _, reason := range []string{events.OriginSubject, events.OriginTenant, events.OriginType} {
		m.Refusals.WithLabelValues(service, reason)
	}
}

// PrimeProvider makes the provider-call metrics of a process that calls provider's model
// exist at zero: durations of successful calls for each kind the process calls it for
// (the judge kinds, "runner"), calls of every configured tenant, retries by every reason
// and 429s.
func PrimeProvider(provider, model string, kinds []string) {
	m := Default()
	for _, k := range kinds {
		m.ProviderSeconds.WithLabelValues(provider, model, k, "ok")
	}
	for _, t := range m.tenantLabels() {
		m.ProviderCalls.WithLabelValues(provider, model, t, "ok")
	}
	for _, r := range []string{RetryRateLimited, RetryServerError, RetryTimeout, RetryNetwork, RetryEmpty} {
		m.ProviderRetries.WithLabelValues(provider, model, r)
	}
	m.ProviderRateLimited.WithLabelValues(provider, model)
	m.ProviderModeCalls.WithLabelValues(provider, model, ModeDirect, "ok")
}

// PrimeBatchMode makes the batch judge mode's calls exist at zero for its provider and
// model, in a judge that offers the mode (PrimeJudge primes its provider batches).
func PrimeBatchMode(provider, model string) {
	Default().ProviderModeCalls.WithLabelValues(provider, model, ModeBatch, "ok")
}

// providerBatchStatuses are the statuses tribunal_provider_batches_total counts.
var providerBatchStatuses = []string{"created", "completed", "expired", "cancelled", "failed", "submit_failed"}

// PrimeJudge makes the judge's metrics exist at zero for its provider and model: calls
// answered ok and cache hits of every kind, tokens both ways, and the model's
// judge-quality counts (decided answers by slot, swapped pairs, panel comparisons) and
// ratios (NaN, see above). The aggregator reports those for every model that answered; a
// judge knows its own model before any batch.
func PrimeJudge(provider, model string, kinds []string) {
	m := Default()
	for _, k := range kinds {
		m.JudgeCalls.WithLabelValues(provider, model, k, string(events.VoteOK))
		m.JudgeCacheHits.WithLabelValues(k, model)
	}
	for _, d := range []string{"prompt", "completion"} {
		m.JudgeTokens.WithLabelValues(provider, model, d)
	}
	// The trust figures' model label is bounded (ModelLabel); the judge's own model is
	// the first it knows.
	label := m.ModelLabel(provider, model)
	for _, t := range m.tenantLabels() {
		m.JudgeCost.WithLabelValues(provider, label, t)
	}
	m.JudgeUnpriced.WithLabelValues(provider, label)
	for _, slot := range []string{"A", "B"} {
		m.JudgeDecided.WithLabelValues(provider, label, slot)
	}
	for _, b := range []string{"true", "false"} {
		m.JudgeSwapPairs.WithLabelValues(provider, label, b)
		m.JudgePanelComparisons.WithLabelValues(provider, label, b)
	}
	// Every judge shows its provider batches, at zero while it judges directly: the
	// dashboard's panel is the same for a deployment in either mode.
	for _, st := range providerBatchStatuses {
		m.ProviderBatches.WithLabelValues(provider, st)
	}
	m.JudgeSlotA.WithLabelValues(provider, label).Set(math.NaN())
	m.JudgeFlips.WithLabelValues(provider, label).Set(math.NaN())
	m.JudgeAgreement.WithLabelValues(provider, label).Set(math.NaN())
}

// PrimeGater makes the gate-failure count exist at zero for every kind (under "blocked",
// the one gate every kind has: a render that could not be made).
func PrimeGater(kinds []string) {
	m := Default()
	for _, k := range kinds {
		m.GateFailures.WithLabelValues(k, "blocked")
	}
}

// PrimeAggregator makes the aggregator's metrics exist: judge disagreements of every kind
// at zero, and every configured tenant's panel alpha as NaN (see above).
func PrimeAggregator(kinds []string) {
	m := Default()
	for _, k := range kinds {
		m.JudgeDisagreements.WithLabelValues(k)
	}
	for _, t := range m.tenantLabels() {
		m.PanelAlpha.WithLabelValues(t).Set(math.NaN())
	}
}

// PrimeIngress makes the ingress's answer count exist at zero for every route it serves
// (under 200).
func PrimeIngress(routes []string) {
	m := Default()
	for _, r := range routes {
		m.IngressRequests.WithLabelValues(r, "200")
	}
}
