// Package telemetry is tribunal's observability: Prometheus metrics on a registry of its
// own, OpenTelemetry spans carried from service to service in event metadata, and slog
// attributes that tie a log line to its tenant, batch and job.
//
// The services record through package-level functions (JudgeCall, GateFailures, ...) on
// a process-wide default, so a metric costs one line where the fact is known and no
// service needs a telemetry dependency injected. Tests swap the default with Reset.
package telemetry

import (
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is one process's set of tribunal metrics on its own registry. It is not the
// Prometheus global registry so that a test can start from zero and read exactly what
// its batch moved, whatever other tests or libraries registered.
type Metrics struct {
	// Registry holds every metric below plus the Go runtime and process collectors.
	Registry *prometheus.Registry

	// EventsHandled counts deliveries a service's handler finished without error, by
	// service, event type ("dead_letter" for the aggregator's dead-letter input) and
	// tenant (see TenantLabel).
	EventsHandled *prometheus.CounterVec
	// EventsFailed counts deliveries whose handler still failed after the in-process
	// retries; the message goes back to JetStream or to dead letters.
	EventsFailed *prometheus.CounterVec
	// HandlerSeconds is the time from a delivery reaching the router to the handler's
	// return, in-process retries included, so it is what a message costs a service slot.
	HandlerSeconds *prometheus.HistogramVec
	// JudgeCalls counts judging calls to a provider (a repair re-ask is part of its call;
	// cached answers and refused inputs are not calls).
	JudgeCalls *prometheus.CounterVec
	// JudgeTokens counts the provider-reported tokens of those calls.
	JudgeTokens *prometheus.CounterVec
	// JudgeCacheHits counts answers served from the shared judge-call cache, by judge
	// kind and model.
	JudgeCacheHits *prometheus.CounterVec
	// GateFailures counts red gates (and render blocks) that kept a job from the judges.
	GateFailures *prometheus.CounterVec
	// JudgeDisagreements counts self-reported judge aggregates the aggregator corrected.
	JudgeDisagreements *prometheus.CounterVec
	// DeadLetters counts messages a service's router gave up on and sent to dead letters.
	DeadLetters *prometheus.CounterVec
	// Refusals counts inputs a service refused to act on, by service and reason (a fixed
	// word: subject_tenant, subject_type, not_submitted, ...): someone's envelope
	// contradicted where it came from.
	Refusals *prometheus.CounterVec
	// IngressRequests counts the ingress's answers by route and status code.
	IngressRequests *prometheus.CounterVec
	// ProviderSeconds is the wall time of every call to an LLM provider (judge verdicts,
	// repair re-asks and the renderer's equivalence runner alike), the provider's own
	// retries and waits included, by provider, model, judge kind and outcome.
	ProviderSeconds *prometheus.HistogramVec
	// ProviderCalls counts those calls by provider, model, tenant and outcome: what each
	// team costs the provider account.
	ProviderCalls *prometheus.CounterVec
	// JudgeCost adds up what provider calls cost at the price table's prices, in USD, by
	// provider, model (bounded like the trust figures', ModelLabel) and tenant
	// (TenantLabel); JudgeUnpriced counts the calls of a model the table has no price
	// for, which JudgeCost cannot count and which are never shown as free.
	JudgeCost     *prometheus.CounterVec
	JudgeUnpriced *prometheus.CounterVec
	// ProviderRetries counts the attempts a provider repeated, by provider, model and
	// reason (rate_limited, server_error, timeout, network, empty).
	ProviderRetries *prometheus.CounterVec
	// ProviderRateLimited counts HTTP 429 answers, retried or final, by provider and model.
	ProviderRateLimited *prometheus.CounterVec
	// ProviderModeCalls counts provider calls by provider, model, judge mode ("direct"
	// or "batch": through the provider's batch API) and outcome.
	ProviderModeCalls *prometheus.CounterVec
	// ProviderBatches counts the batch judge mode's provider batches by provider and how
	// far they got: "created", then the status they ended in (completed, expired,
	// cancelled, failed), or "submit_failed" when none could be created.
	ProviderBatches *prometheus.CounterVec

	// JudgeSlotA, JudgeFlips and JudgeAgreement are each judge model's position bias
	// (share of its decided answers that picked slot A), flip rate (share of its swapped
	// pairs that flipped) and agreement with the other judges of a panel, over the last
	// batch the aggregator completed (BatchJudged); PanelAlpha is that batch's
	// Krippendorff's alpha by tenant.
	JudgeSlotA     *prometheus.GaugeVec
	JudgeFlips     *prometheus.GaugeVec
	JudgeAgreement *prometheus.GaugeVec
	PanelAlpha     *prometheus.GaugeVec
	// JudgeDecided, JudgeSwapPairs and JudgePanelComparisons count the same answers over
	// every batch, so a rate over any window can be computed from them.
	JudgeDecided          *prometheus.CounterVec
	JudgeSwapPairs        *prometheus.CounterVec
	JudgePanelComparisons *prometheus.CounterVec

	pending *pendingCollector

	tenantsMu sync.RWMutex
	tenants   []string

	modelsMu sync.Mutex
	models   map[string]bool
}

// handlerBuckets span a KV update (milliseconds) to a slow LLM call with a repair
// re-ask (minutes).
var handlerBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// providerBuckets span a scripted answer (microseconds) to a slow vision model behind
// retries and a 429 pause (minutes).
var providerBuckets = []float64{.001, .01, .05, .1, .25, .5, 1, 2, 4, 8, 15, 30, 60, 120, 300}

// version is the tribunal version tribunal_build_info reports (SetVersion).
var version atomic.Pointer[string]

// SetVersion sets the version tribunal_build_info and the trace resource report: the
// command's build-time version.
func SetVersion(v string) { version.Store(&v) }

// Version is the version set by SetVersion, "dev" before.
func Version() string {
	if v := version.Load(); v != nil {
		return *v
	}
	return "dev"
}

// OtherTenant is the tenant label of every tenant outside the configured list.
const OtherTenant = "other"

// New builds a fresh metric set on a new registry.
func New() *Metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "tribunal", Name: name, Help: help}, labels)
	}
	m := &Metrics{
		Registry:       prometheus.NewRegistry(),
		EventsHandled:  counter("events_handled_total", "Deliveries handled without error, by service, event type and tenant.", "service", "type", "tenant"),
		EventsFailed:   counter("events_failed_total", "Deliveries whose handler failed after in-process retries, by service, event type and tenant.", "service", "type", "tenant"),
		HandlerSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "tribunal", Name: "handler_seconds", Help: "Time spent handling one delivery, in-process retries included.", Buckets: handlerBuckets}, []string{"service"}),
		JudgeCalls:     counter("judge_calls_total", "Judging calls to a provider, by provider, model, judge kind and answer status.", "provider", "model", "kind", "status"),
		JudgeTokens:    counter("judge_tokens_total", "Provider-reported tokens of judging calls, by direction (prompt or completion).", "provider", "model", "direction"),
		JudgeCacheHits: counter("judge_cache_hits_total", "Judge answers served from the shared judge-call cache instead of a provider call, by judge kind and model.", "kind", "model"),
		GateFailures:   counter("gate_failures_total", "Failed gates that kept a job from the judges, by judge kind and gate.", "kind", "gate"),
		JudgeDisagreements: counter("judge_disagreements_total",
			"Self-reported judge aggregates the aggregator re-derived differently, by judge kind.", "kind"),
		DeadLetters:     counter("dead_letters_total", "Messages sent to dead letters, by the service that gave up on them.", "service"),
		IngressRequests: counter("ingress_requests_total", "Answers of the ingress, by route and HTTP status code.", "route", "code"),
		Refusals:        counter("refusals_total", "Inputs a service refused to act on (an envelope its subject contradicts, a dead letter of no submitted job, ...), by service and reason.", "service", "reason"),
		ProviderSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "tribunal", Name: "provider_call_duration_seconds",
			Help:    "Wall time of calls to an LLM provider, its retries and waits included, by provider, model, judge kind and outcome.",
			Buckets: providerBuckets}, []string{"provider", "model", "kind", "outcome"}),
		ProviderCalls:       counter("provider_calls_total", "Calls to an LLM provider by provider, model, tenant and outcome.", "provider", "model", "tenant", "outcome"),
		JudgeCost:           counter("judge_cost_total", "What provider calls cost at the price table's prices, in USD, by provider, model and tenant (unpriced calls are counted in tribunal_judge_unpriced_calls_total instead).", "provider", "model", "tenant"),
		JudgeUnpriced:       counter("judge_unpriced_calls_total", "Provider calls of a model the price table has no price for, by provider and model.", "provider", "model"),
		ProviderRetries:     counter("provider_retries_total", "Provider attempts that were repeated, by provider, model and reason.", "provider", "model", "reason"),
		ProviderRateLimited: counter("provider_rate_limited_total", "HTTP 429 answers from a provider, retried or final, by provider and model.", "provider", "model"),
		ProviderModeCalls:   counter("provider_mode_calls_total", "Calls to an LLM provider by provider, model, judge mode (direct, or batch through the provider's batch API) and outcome.", "provider", "model", "mode", "outcome"),
		ProviderBatches:     counter("provider_batches_total", "Provider batches of the batch judge mode, created and ended, by provider and status (created, completed, expired, cancelled, failed, submit_failed).", "provider", "status"),
		pending:             newPendingCollector(),
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "tribunal", Name: name, Help: help}, labels)
	}
	m.JudgeSlotA = gauge("judge_slot_a_ratio", "Share of a judge model's decided ab answers that picked slot A, over the last completed batch (0.5 is unbiased).", "provider", "model")
	m.JudgeFlips = gauge("judge_flip_ratio", "Share of a judge model's swapped ab pairs whose answers disagreed once un-swapped, over the last completed batch.", "provider", "model")
	m.JudgeAgreement = gauge("judge_panel_agreement_ratio", "Share of a judge model's answers that agreed with each other judge of its panel, AC by AC, over the last completed batch.", "provider", "model")
	m.PanelAlpha = gauge("panel_alpha", "Krippendorff's alpha (nominal) of the judge panel over the last completed batch with a panel, by tenant.", "tenant")
	m.JudgeDecided = counter("judge_decided_answers_total", "Decided ab answers of a judge model by the slot it picked (A or B), counted at batch completion.", "provider", "model", "slot")
	m.JudgeSwapPairs = counter("judge_swap_pairs_total", "Swapped ab pairs of a judge model by whether they flipped, counted at batch completion.", "provider", "model", "flipped")
	m.JudgePanelComparisons = counter("judge_panel_comparisons_total", "A judge model's answers compared with another panel judge's on the same AC, by whether they agreed, counted at batch completion.", "provider", "model", "agreed")
	buildInfo := buildInfoCollector{desc: prometheus.NewDesc("tribunal_build_info",
		"Always 1; the labels say which tribunal version and Go release this process runs.", []string{"version", "goversion"}, nil)}
	m.Registry.MustRegister(m.EventsHandled, m.EventsFailed, m.HandlerSeconds, m.JudgeCalls, m.JudgeTokens,
		m.JudgeCacheHits, m.JudgeCost, m.JudgeUnpriced, m.GateFailures, m.JudgeDisagreements, m.DeadLetters, m.Refusals, m.IngressRequests, m.ProviderSeconds, m.ProviderCalls,
		m.ProviderRetries, m.ProviderRateLimited, m.ProviderModeCalls, m.ProviderBatches, m.pending, buildInfo,
		m.JudgeSlotA, m.JudgeFlips, m.JudgeAgreement, m.PanelAlpha, m.JudgeDecided, m.JudgeSwapPairs, m.JudgePanelComparisons,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// buildInfoCollector reports the version at scrape time, so a version set after the
// default metric set was built (at package init) still shows.
type buildInfoCollector struct{ desc *prometheus.Desc }

func (b buildInfoCollector) Describe(ch chan<- *prometheus.Desc) { ch <- b.desc }

func (b buildInfoCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(b.desc, prometheus.GaugeValue, 1, Version(), runtime.Version())
}

// SetTenants bounds the tenant label: a tenant in tenants is its own label value, any
// other becomes OtherTenant. A process serving no configured tenants (one shared durable
// per service) keeps "default", the tenant of batches that name none. Without the bound,
// any team that can submit could grow every tenant-labelled series without limit.
func (m *Metrics) SetTenants(tenants []string) {
	m.tenantsMu.Lock()
	defer m.tenantsMu.Unlock()
	m.tenants = slices.Clone(tenants)
}

// TenantLabel is tenant as a label value under the bound set by SetTenants.
func (m *Metrics) TenantLabel(tenant string) string {
	m.tenantsMu.RLock()
	defer m.tenantsMu.RUnlock()
	if len(m.tenants) == 0 {
		if tenant == "default" {
			return tenant
		}
		return OtherTenant
	}
	if slices.Contains(m.tenants, tenant) {
		return tenant
	}
	return OtherTenant
}

// Handler serves this set in the Prometheus text (or negotiated) format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

var current atomic.Pointer[Metrics]

func init() { current.Store(New()) }

// Default is the process's metric set, the one the package-level recording functions
// and Handler use.
func Default() *Metrics { return current.Load() }

// Reset replaces the default with a fresh set and returns it, so a test reads only what
// it caused. Anything registered on the previous set (consumer pending sources) stays
// with it: reset before starting services.
func Reset() *Metrics {
	m := New()
	current.Store(m)
	return m
}

// Handler serves the default set, resolved at every scrape so a Reset is followed.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Default().Handler().ServeHTTP(w, r)
	})
}

// Value sums the current value of every series of the metric family name whose labels
// include labels ("key=value" pairs): a counter's or gauge's value, a histogram's sample
// count. It lets a test read what it caused without scraping; an unknown name is 0.
func (m *Metrics) Value(name string, labels ...string) float64 {
	fams, err := m.Registry.Gather()
	if err != nil {
		return 0
	}
	var total float64
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, s := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range s.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for _, kv := range labels {
				k, v, _ := strings.Cut(kv, "=")
				if have[k] != v {
					continue series
				}
			}
			switch {
			case s.Counter != nil:
				total += s.GetCounter().GetValue()
			case s.Gauge != nil:
				total += s.GetGauge().GetValue()
			case s.Histogram != nil:
				total += float64(s.GetHistogram().GetSampleCount())
			}
		}
	}
	return total
}

// MetricLabels lists every tribunal_* metric family a process exports with its label
// names, for tools that must only name real metrics and labels (the Grafana dashboard's
// check in deploy/). A test holds the list to the registry.
func MetricLabels() map[string][]string {
	return map[string][]string{
		"tribunal_events_handled_total":           {"service", "type", "tenant"},
		"tribunal_events_failed_total":            {"service", "type", "tenant"},
		"tribunal_handler_seconds":                {"service"},
		"tribunal_judge_calls_total":              {"provider", "model", "kind", "status"},
		"tribunal_judge_tokens_total":             {"provider", "model", "direction"},
		"tribunal_judge_cost_total":               {"provider", "model", "tenant"},
		"tribunal_judge_unpriced_calls_total":     {"provider", "model"},
		"tribunal_judge_cache_hits_total":         {"kind", "model"},
		"tribunal_gate_failures_total":            {"kind", "gate"},
		"tribunal_judge_disagreements_total":      {"kind"},
		"tribunal_dead_letters_total":             {"service"},
		"tribunal_refusals_total":                 {"service", "reason"},
		"tribunal_ingress_requests_total":         {"route", "code"},
		"tribunal_provider_call_duration_seconds": {"provider", "model", "kind", "outcome"},
		"tribunal_provider_calls_total":           {"provider", "model", "tenant", "outcome"},
		"tribunal_provider_retries_total":         {"provider", "model", "reason"},
		"tribunal_provider_rate_limited_total":    {"provider", "model"},
		"tribunal_provider_mode_calls_total":      {"provider", "model", "mode", "outcome"},
		"tribunal_provider_batches_total":         {"provider", "status"},
		"tribunal_consumer_pending":               {"service", "consumer"},
		"tribunal_judge_slot_a_ratio":             {"provider", "model"},
		"tribunal_judge_flip_ratio":               {"provider", "model"},
		"tribunal_judge_panel_agreement_ratio":    {"provider", "model"},
		"tribunal_panel_alpha":                    {"tenant"},
		"tribunal_judge_decided_answers_total":    {"provider", "model", "slot"},
		"tribunal_judge_swap_pairs_total":         {"provider", "model", "flipped"},
		"tribunal_judge_panel_comparisons_total":  {"provider", "model", "agreed"},
		"tribunal_build_info":                     {"version", "goversion"},
	}
}
