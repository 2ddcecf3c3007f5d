package telemetry

import (
	"strconv"
	"strings"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// The recording functions below are called once where a service learns the fact. Like
// every counter in an at-least-once system they count executions: a redelivered message
// (a crash before its ack) or a compare-and-set retried on a conflict counts again.

// Handled records one finished delivery of a service's handler: handled or failed by
// event type and tenant (bounded, see Metrics.SetTenants), and the time it took.
func Handled(service, eventType, tenant string, d time.Duration, err error) {
	m := Default()
	t := m.TenantLabel(tenant)
	if err != nil {
		m.EventsFailed.WithLabelValues(service, eventType, t).Inc()
	} else {
		m.EventsHandled.WithLabelValues(service, eventType, t).Inc()
	}
	m.HandlerSeconds.WithLabelValues(service).Observe(d.Seconds())
}

// JudgeCall records one judge answer of kind as recorded on the verdict: an answer from
// the cache is a cache hit, not a call; an input refused before any call ("blocked") is
// neither; anything else is a call with its status and token usage.
func JudgeCall(kind events.Kind, j events.JudgeInfo, status events.VoteStatus) {
	m := Default()
	switch {
	case j.Cached:
		m.JudgeCacheHits.WithLabelValues(string(kind), j.Model).Inc()
	case status == events.VoteBlocked:
	default:
		m.JudgeCalls.WithLabelValues(j.Provider, j.Model, string(kind), string(status)).Inc()
		if j.PromptTokens > 0 {
			m.JudgeTokens.WithLabelValues(j.Provider, j.Model, "prompt").Add(float64(j.PromptTokens))
		}
		if j.CompletionTokens > 0 {
			m.JudgeTokens.WithLabelValues(j.Provider, j.Model, "completion").Add(float64(j.CompletionTokens))
		}
	}
}

// GateFailures records why the gater kept a job from the judges, when p is a
// gates.failed payload (any other payload records nothing, so the call can sit on the
// gater's single output path). Each failing gate counts once under its name without
// the per-role or per-case suffix ("artifact_readable:ours" counts as
// "artifact_readable"), keeping the label set bounded; a render that was blocked counts
// as "blocked" and a missing rubric reference as "needs_context".
func GateFailures(p events.Payload) {
	gf, ok := p.(*events.GatesFailed)
	if !ok {
		return
	}
	c := Default().GateFailures
	switch {
	case gf.Blocked != "":
		c.WithLabelValues(string(gf.Kind), "blocked").Inc()
		return
	case gf.NeedsContext != "":
		c.WithLabelValues(string(gf.Kind), "needs_context").Inc()
		return
	}
	for _, g := range gf.Gates {
		if g.Status.Failed() {
			name, _, _ := strings.Cut(g.Name, ":")
			c.WithLabelValues(string(gf.Kind), name).Inc()
		}
	}
}

// JudgeDisagreements records the disagreements of a decision the aggregator just made
// (nil and zero record nothing).
func JudgeDisagreements(kind events.Kind, d *events.IterationDecided) {
	if d == nil || d.Disagreements <= 0 {
		return
	}
	Default().JudgeDisagreements.WithLabelValues(string(kind)).Add(float64(d.Disagreements))
}

// Refused records an input service refused to act on: an event whose subject
// contradicts its envelope, a dead letter that names no submitted job, an input the rules
// never apply. reason is one of the caller's fixed words (events.Origin*,
// rulebook.Refused*), never error text, so the label stays bounded.
func Refused(service, reason string) {
	Default().Refusals.WithLabelValues(service, reason).Inc()
}

// IngressRequest records one answer of the ingress, by its route (the API's pattern, a
// bounded set) and status code.
func IngressRequest(route string, code int) {
	Default().IngressRequests.WithLabelValues(route, strconv.Itoa(code)).Inc()
}

// DeadLettered records n messages service sent to dead letters.
func DeadLettered(service string, n int) {
	Default().DeadLetters.WithLabelValues(service).Add(float64(n))
}
