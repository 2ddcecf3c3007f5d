package audit

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
)

// scanHeap feeds a cancel scan the submission, render request and verdict of n jobs,
// one message at a time as the first read does, and returns the heap it holds then.
func scanHeap(t *testing.T, n int) float64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := newCancelScan("b-1")
	seq := uint64(0)
	add := func(ev events.Event) {
		data, err := events.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		subject, err := events.Subject(ev.Tenant, ev.Type)
		if err != nil {
			t.Fatal(err)
		}
		seq++
		r := NewRecorded(seq, subject, time.Unix(0, 0), data, ev.ID, "")
		s.add(&r)
	}
	for i := range n {
		id := fmt.Sprintf("AC-%d", i)
		spec := events.JobSpec{Kind: events.KindAB, ACID: id, Criterion: "the notes are clear", KindPart: &ab.Spec{
			Ours: events.Source{Name: "ours.md", URL: "https://example.test/ours"}, Reference: events.Source{Name: "ref.md", URL: "https://example.test/ref"}, Threshold: 0.75}}
		sub := events.New(&events.JobSubmitted{Spec: spec, Index: i, BatchSize: n}, "team-a", "b-1", id, 0, "", nil)
		add(sub)
		req := events.New(&events.RenderRequested{Spec: spec}, "team-a", "b-1", id, 0, "", &sub.Envelope)
		add(req)
		add(events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{{Judge: events.JudgeInfo{Provider: "scripted", Model: "m"},
			Order: "AB", Status: "ok", RawWinner: "A", Confidence: 0.9, BiggestGap: "the headings"}}}, "team-a", "b-1", id, 0, "", &req.Envelope))
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	s.log.close()
	return float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
}

// TestCancelScanHeapIsBounded: what the cancels' scan holds while the first read goes on
// does not grow with the messages read (its log is written out past a buffer): at most
// a few bytes a message between 20,000 and 100,000 jobs. Its maps by input id and by job
// held about 90 bytes a message (60 MB at 2.5 minutes of a 1,000,000-AC audit).
func TestCancelScanHeapIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("scans 360,000 messages")
	}
	const small, large = 20000, 100000
	hs, hl := scanHeap(t, small), scanHeap(t, large)
	perMsg := (hl - hs) / (3 * (large - small))
	t.Logf("%.1f MB at %d jobs, %.1f MB at %d: %.1f bytes a message", hs/1e6, small, hl/1e6, large, perMsg)
	if perMsg > 4 {
		t.Errorf("the cancels' scan holds %.1f bytes more a message read, over 4", perMsg)
	}
}
