package telemetry

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// PendingFunc reports how many messages wait on each of a service's durable consumers
// (by consumer name): not yet delivered plus delivered but not yet acked. It is called at
// scrape time.
type PendingFunc func(ctx context.Context) (map[string]uint64, error)

// pendingCollector asks JetStream at scrape time rather than keeping a gauge updated,
// because the backlog of a shared durable consumer is the server's number: a gauge
// maintained by one instance would only see its own deliveries.
//
// Every instance of a service sees the same number, so if each exported it a sum over
// instances would count the backlog once per instance. Only the instance whose
// reporting func says so (the holder of the service's lease, see bus.Elect) exports
// it: tribunal_consumer_pending has one series per consumer across the whole
// deployment, and sums over instances, services or tenants are right.
type pendingCollector struct {
	desc    *prometheus.Desc
	timeout time.Duration
	mu      sync.Mutex
	next    uint64
	sources map[string]pendingSource
}

type pendingSource struct {
	id        uint64
	f         PendingFunc
	reporting func() bool
}

func newPendingCollector() *pendingCollector {
	return &pendingCollector{
		desc: prometheus.NewDesc("tribunal_consumer_pending",
			"Messages waiting on a durable consumer: pending delivery plus delivered and not yet acked. Exported by one instance per service, so sums are right.",
			[]string{"service", "consumer"}, nil),
		timeout: 2 * time.Second,
		sources: map[string]pendingSource{},
	}
}

// WatchPending makes service's consumer backlogs part of every scrape in which
// reporting (nil: always) returns true; stop removes them. A later registration for the
// same service replaces an earlier one (several instances in one process share the
// durables, so they report the same numbers), and an earlier stop then leaves the later
// one in place.
func (m *Metrics) WatchPending(service string, f PendingFunc, reporting func() bool) (stop func()) {
	p := m.pending
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	id := p.next
	p.sources[service] = pendingSource{id: id, f: f, reporting: reporting}
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if s, ok := p.sources[service]; ok && s.id == id {
			delete(p.sources, service)
		}
	}
}

func (p *pendingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }

// Collect asks every source at once; a source that fails or is slower than the timeout
// is left out of this scrape rather than reported as an empty backlog.
func (p *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	srcs := make(map[string]PendingFunc, len(p.sources))
	for svc, s := range p.sources {
		if s.reporting == nil || s.reporting() {
			srcs[svc] = s.f
		}
	}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	var wg sync.WaitGroup
	for svc, f := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			byConsumer, err := f(ctx)
			if err != nil {
				return
			}
			for consumer, n := range byConsumer {
				ch <- prometheus.MustNewConstMetric(p.desc, prometheus.GaugeValue, float64(n), svc, consumer)
			}
		}()
	}
	wg.Wait()
}
