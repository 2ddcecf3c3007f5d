package client

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// TestCheckKeepsThePlansInPlace: checking a batch whose every job.submitted can be
// published leaves its plans where they are: no copy of them (about 600 bytes a plan, so
// 600 MB for a 1,000,000-AC batch beside the plans themselves, at the submission's peak
// of memory). What check allocates beyond building and measuring each plan's event is
// held under a plan a plan, which a copy alone would take (the job ids' map of duplicates
// is most of it: about 160 bytes, half of a plan since a kind's batch keys left batch.AC).
func TestCheckKeepsThePlansInPlace(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"o.md": "# ours\n", "r.md": "# reference\n"})
	const n = 2000
	var doc strings.Builder
	doc.WriteString("version: 1\nacs:\n")
	for i := range n {
		fmt.Fprintf(&doc, "  - {id: AC-%d, criterion: c, ours: o.md, reference: r.md}\n", i)
	}
	b := parseBatch(t, dir, doc.String())
	s := &Submitter{Store: tempStore(t)}
	prep, err := s.Prepare(context.Background(), b, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(prep.kept.plans) != n {
		t.Fatalf("%d plans, want %d", len(prep.kept.plans), n)
	}
	first := &prep.kept.plans[0]
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	// What building and measuring each event costs, which check cannot do without.
	limit, maxPayload := s.eventLimit()
	events := allocated(func() {
		for k := range prep.kept.plans {
			pl := &prep.kept.plans[k]
			if p := s.eventProblem(pl, prep, prep.kept.uploads, n, limit, maxPayload); p != "" {
				t.Errorf("%s: %s", pl.JobID, p)
			}
		}
	})
	var err2 error
	c := s.newChecker(prep)
	all := allocated(func() { err2 = s.check(context.Background(), c, prep.kept, n) })
	if err2 != nil {
		t.Fatal(err2)
	}
	if len(prep.kept.plans) != n || &prep.kept.plans[0] != first {
		t.Fatalf("check replaced the %d plans with a copy of %d", n, len(prep.kept.plans))
	}
	size := uint64(unsafe.Sizeof(planned{}))
	extra := (max(all, events) - events) / n
	t.Logf("check allocated %d bytes a plan beside its events' %d; a plan is %d bytes", extra, events/n, size)
	if extra >= size {
		t.Fatalf("check allocated %d bytes a plan beyond building its events, want under a plan's %d", extra, size)
	}
}
