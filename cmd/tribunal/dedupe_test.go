package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
)

// TestStateFolderKeepsItsIDsAcrossARestart: the state folder's stream takes the
// all-in-one's short window (here 1 s), and a process that opens the folder again after
// the window has passed hands the stream's tail to its services' publisher, so the
// events a redelivered handler publishes again are not stored twice although the server
// has forgotten their ids.
func TestStateFolderKeepsItsIDsAcrossARestart(t *testing.T) {
	const n = 10
	window := localDuplicateWindow
	localDuplicateWindow = time.Second
	t.Cleanup(func() { localDuplicateWindow = window })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	// Render requests, as an aggregator's handler in flight at the stop had published
	// them: the renderer, not running here, leaves them pending, so the folder is not
	// settled and its tail is read.
	requests := func() []events.Event {
		var out []events.Event
		for i := range n {
			ac := fmt.Sprintf("AC-%d", i)
			spec := events.JobSpec{Kind: events.KindAB, ACID: ac, Criterion: "c", KindPart: &ab.Spec{
				Ours:      events.Source{Name: "o.md", Error: "missing artifact: o.md"},
				Reference: events.Source{Name: "r.md", Error: "missing artifact: r.md"},
				Threshold: 0.75,
			}}
			out = append(out, events.New(&events.RenderRequested{Spec: spec}, "default", "batch-1", ac, 0, "", nil))
		}
		return out
	}
	stored := func(e *embedded) (uint64, time.Duration) {
		st, err := e.Running.JS.Stream(ctx, localStream)
		if err != nil {
			t.Fatal(err)
		}
		info := st.CachedInfo()
		return info.State.Msgs, info.Config.Duplicates
	}

	e, err := openState(ctx, dir, "", bus.Aggregator)
	if err != nil {
		t.Fatal(err)
	}
	// Every service's durable, as the run that made the folder provisioned them.
	if err := bus.Provision(ctx, e.Running.JS, localBus()); err != nil {
		t.Fatal(err)
	}
	if err := e.Running.Pub.PublishEvents(requests()...); err != nil {
		t.Fatal(err)
	}
	if msgs, win := stored(e); msgs != n || win != time.Second {
		t.Fatalf("%d messages under a %s window, want %d under 1s", msgs, win, n)
	}
	e.Close()
	time.Sleep(localDuplicateWindow + 500*time.Millisecond)

	e, err = openState(ctx, dir, "", bus.Aggregator)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Running.Pub.PublishEvents(requests()...); err != nil {
		t.Fatal(err)
	}
	if msgs, _ := stored(e); msgs != n {
		t.Fatalf("%d messages after the republish, want %d: no copy", msgs, n)
	}
}
