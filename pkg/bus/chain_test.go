package bus_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// stored returns the last message on subject, its event decoded and its link.
func stored(t *testing.T, e *routerEnv, subject string) (events.Event, string, bool) {
	t.Helper()
	st, err := e.js.Stream(ctxT(t), "TRIBUNAL")
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctxT(t), subject)
	if err != nil {
		return events.Event{}, "", false
	}
	ev, err := events.Decode(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(m.Data)
	return ev, events.Link(ev.ID, hex.EncodeToString(sum[:])), true
}

// TestOutputsCarryTheInputChain: a router with Chain set gives its outputs the input's
// chain and then the input's link over the exact bytes stored, so two stages give
// gates.done [render.requested, render.done]; a router without it (the aggregator's)
// starts no chain.
func TestOutputsCarryTheInputChain(t *testing.T) {
	e := newRouterEnv(t, bus.Config{AckWait: 5 * time.Second, MaxDeliver: 3})
	e.run(t, bus.Renderer, bus.RouterConfig{Chain: true}, func(_ context.Context, ev events.Event) ([]events.Event, error) {
		return []events.Event{renderDoneFor(ev, 8)}, nil
	})
	e.run(t, bus.Gater, bus.RouterConfig{Chain: true}, func(_ context.Context, ev events.Event) ([]events.Event, error) {
		p := &events.GatesFailed{Kind: events.KindAB, ACID: ev.JobID, Blocked: "missing artifact"}
		return []events.Event{events.New(p, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)}, nil
	})
	// The aggregator is told where its input and the input's chain are.
	type position struct {
		seq   uint64
		chain []uint64
	}
	seen := make(chan position, 1)
	e.run(t, bus.Aggregator, bus.RouterConfig{}, func(ctx context.Context, ev events.Event) ([]events.Event, error) {
		seq, chain := bus.Position(ctx)
		select {
		case seen <- position{seq, chain}:
		default:
		}
		p := &events.JobBlocked{Kind: events.KindAB, ACID: ev.JobID, Stage: "render", Reason: "missing artifact"}
		return []events.Event{events.New(p, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)}, nil
	})
	if err := e.pub.PublishEvents(renderEvent("AC-1")); err != nil {
		t.Fatal(err)
	}
	subject := func(typ events.Type) string { s, _ := events.Subject(testTenant, typ); return s }
	var blocked events.Event
	poll.Until(t, 20*time.Second, "job.blocked", func() (bool, string) {
		var ok bool
		blocked, _, ok = stored(t, e, subject(events.TypeJobBlocked))
		return ok, "none yet"
	})
	_, requested, _ := stored(t, e, subject(events.TypeRenderRequested))
	done, rendered, _ := stored(t, e, subject(events.TypeRenderDone))
	failed, _, _ := stored(t, e, subject(events.TypeGatesFailed))
	if got := strings.Join(done.Chain, ","); got != requested {
		t.Errorf("render.done chain %q, want render.requested's link %q", got, requested)
	}
	if got, want := strings.Join(failed.Chain, ","), requested+","+rendered; got != want {
		t.Errorf("gates.failed chain %q, want %q", got, want)
	}
	if len(blocked.Chain) != 0 {
		t.Errorf("the aggregator's job.blocked carries a chain: %v", blocked.Chain)
	}
	seqOf := func(typ events.Type) uint64 {
		st, err := e.js.Stream(ctxT(t), "TRIBUNAL")
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.GetLastMsgForSubject(ctxT(t), subject(typ))
		if err != nil {
			t.Fatal(err)
		}
		return m.Sequence
	}
	got := <-seen
	want := position{seqOf(events.TypeGatesFailed), []uint64{seqOf(events.TypeRenderRequested), seqOf(events.TypeRenderDone)}}
	if got.seq != want.seq || fmt.Sprint(got.chain) != fmt.Sprint(want.chain) {
		t.Errorf("the aggregator was told its input is at %d, its chain at %v; want %d, %v", got.seq, got.chain, want.seq, want.chain)
	}
}

// TestChainSeqsHeader: a header that does not fit its chain says nothing.
func TestChainSeqsHeader(t *testing.T) {
	if got := bus.ParseChainSeqs(bus.FormatChainSeqs([]uint64{3, 17}), 2); fmt.Sprint(got) != "[3 17]" {
		t.Errorf("round trip: %v", got)
	}
	for _, h := range []string{"3,17", "3", "3,x,4", "0,1,2", ""} {
		if got := bus.ParseChainSeqs(h, 3); got != nil {
			t.Errorf("%q for a chain of 3: %v, want nothing", h, got)
		}
	}
}
