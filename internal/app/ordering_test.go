package app_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/bus/natsserver"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/judge/scripted"
)

// errorSink is a slog handler that keeps every record carrying an error value and
// counts the handled events per service: the router logs each failed handler attempt
// (which its in-process retry then repeats after a backoff) with the error.
type errorSink struct {
	mu      *sync.Mutex
	errs    *[]string
	handled map[string]int
	attrs   []slog.Attr
}

func newErrorSink() *errorSink {
	return &errorSink{mu: &sync.Mutex{}, errs: &[]string{}, handled: map[string]int{}}
}

func (s *errorSink) Enabled(context.Context, slog.Level) bool { return true }

func (s *errorSink) Handle(_ context.Context, r slog.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	service := ""
	var errText []string
	visit := func(a slog.Attr) bool {
		v := a.Value.Resolve()
		if err, ok := v.Any().(error); ok && v.Kind() == slog.KindAny && err != nil {
			errText = append(errText, a.Key+"="+err.Error())
		}
		if a.Key == "service" {
			service = v.String()
		}
		return true
	}
	for _, a := range s.attrs {
		visit(a)
	}
	r.Attrs(visit)
	for _, e := range errText {
		*s.errs = append(*s.errs, r.Message+": "+e)
	}
	if r.Message == "event handled" {
		s.handled[service]++
	}
	return nil
}

func (s *errorSink) WithAttrs(as []slog.Attr) slog.Handler {
	c := *s
	c.attrs = append(append([]slog.Attr(nil), s.attrs...), as...)
	return &c
}

func (s *errorSink) WithGroup(string) slog.Handler { return s }

// TestSingleACNeverRetries: a one-AC batch through the all-in-one mode (embedded server,
// in-process connection, all four services) never takes the aggregator's "job not
// recorded yet" retry, or any other handler retry, run after run. Every stage after the
// submission is asked for by an event the aggregator publishes only once the job is
// recorded, so no event can overtake its job's record; a retry would cost the AC the
// router's backoff (100 ms and more) on top of a pipeline of a few milliseconds. The
// router logs every failed attempt with its error, which is what this test watches.
func TestSingleACNeverRetries(t *testing.T) {
	sink := newErrorSink()
	ns, err := natsserver.Start(natsserver.Options{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := natsserver.InProcessConn(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	store, err := fileblob.New(t.TempDir(), fileblob.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := scripted.New(scripted.Options{Fixtures: map[string]string{"ab": "A"}, Named: "ab"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := app.Start(context.Background(), nc, app.Options{Concurrency: 64, Store: store,
		Provider: p, Instance: "all-in-one", CloseTimeout: 10 * time.Second, Logger: slog.New(sink)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	sub := &client.Submitter{Pub: r.Pub, Store: store}
	const runs = 50
	for i := range runs {
		b := e2e.WriteBatch(t, e2e.TextBatch(1, ""))
		s, err := sub.Submit(context.Background(), b, tenant, client.NewBatchID(b))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		comp, err := client.Watch(ctx, r.Buckets, s.Tenant, s.BatchID, 5*time.Millisecond, func(client.Progress) {})
		cancel()
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if comp.Summary.Total != 1 {
			t.Fatalf("run %d: %d results, want 1", i, comp.Summary.Total)
		}
	}
	r.Close()

	sink.mu.Lock()
	defer sink.mu.Unlock()
	// The sink sees the services' debug lines: without them, no failure could show either.
	for _, svc := range bus.Services {
		if sink.handled[svc] < runs {
			t.Errorf("%s logged %d handled events, want at least %d", svc, sink.handled[svc], runs)
		}
	}
	for _, e := range *sink.errs {
		t.Errorf("a handler failed in the single-AC flow: %s", e)
	}
}
