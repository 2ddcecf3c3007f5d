package bus_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	e.run(t, bus.Aggregator, bus.RouterConfig{}, func(_ context.Context, ev events.Event) ([]events.Event, error) {
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
}
