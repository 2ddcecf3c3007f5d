package audit_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestAuditOneJobNotInStream pins the audit of a job its batch never had (RunJob): it
// reads the batch's opening and every other job's events, none of its own, and fails
// naming the tenant, the batch and the job, whatever its id is a prefix of and whatever
// window its caller gives; it was a clean report of 0 jobs ("ok: every decision of job
// ... re-derives"). A record of such a job is a finding (CheckJobState); without one the
// state says so (records.ErrNotRecorded). A job of the batch still audits clean, its
// mismatches [] in JSON as a batch's are, not null.
func TestAuditOneJobNotInStream(t *testing.T) {
	f := newFixture(t)
	f.open("AC-1", "AC-2")
	for i, id := range []string{"AC-1", "AC-2"} {
		s := f.submission(id, i, 2)
		f.in(s)
		f.in(f.verdict(s))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	js := f.stream(ctx)
	filter := audit.Filter{Tenant: f.tenant, BatchID: f.batch}
	st := records.New(natstest.Buckets(t, bus.Config{Memory: true}))
	var ac1 *records.Job
	for _, j := range f.agg.Jobs(f.tenant, f.batch) {
		if _, err := st.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		if j.ACID == "AC-1" {
			ac1 = j
		}
	}

	rep, err := audit.RunJob(ctx, js, filter, "AC-1", f.store)
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.CheckJobState(ctx, &rep, st, f.tenant, f.batch, "AC-1"); err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Jobs != 1 || rep.Decisions == 0 {
		t.Fatalf("AC-1: want a clean audit of one job, got jobs %d, decisions %d: %s", rep.Jobs, rep.Decisions, dump(rep))
	}
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"mismatches":[]`) {
		t.Fatalf("AC-1 as JSON: want \"mismatches\":[], got %s", data)
	}

	for _, c := range []struct {
		name   string
		filter audit.Filter
		job    string
		w      audit.Window
	}{
		{"never submitted", filter, "NOPE-1", audit.Window{}},
		{"a prefix of the batch's ids", filter, "AC-", audit.Window{}},
		{"any tenant", audit.Filter{BatchID: f.batch}, "NOPE-1", audit.Window{}},
		{"a window after every event", filter, "NOPE-1", audit.Window{From: time.Now().Add(time.Hour), To: time.Now().Add(2 * time.Hour)}},
	} {
		rep, err := audit.RunJobIn(ctx, js, c.filter, c.job, f.store, c.w)
		if !errors.Is(err, audit.ErrJobNotInStream) {
			t.Fatalf("%s: want ErrJobNotInStream, got %v: %s", c.name, err, dump(rep))
		}
		for _, want := range []string{"job " + c.job + " ", "batch " + f.batch, "tenant " + f.tenant} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: the error does not say %q: %v", c.name, want, err)
			}
		}
		if rep.Jobs != 0 || rep.Read < len(f.recs) {
			t.Fatalf("%s: want 0 jobs over the whole stream (%d messages), got %d jobs, %d read", c.name, len(f.recs), rep.Jobs, rep.Read)
		}
	}

	// A job the events submit whose record the state lacks: a finding, as a batch's
	// comparison makes it (it was listed as not compared).
	bare := records.New(natstest.Buckets(t, bus.Config{Memory: true}))
	rep, err = audit.RunJob(ctx, js, filter, "AC-2", f.store)
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.CheckJobState(ctx, &rep, bare, f.tenant, f.batch, "AC-2"); err != nil {
		t.Fatalf("AC-2 without its record: %v", err)
	}
	if rep.OK() || !has(rep, func(m audit.Mismatch) bool {
		return m.Kind == audit.KindMissing && m.Job == "AC-2" && m.Field == "record"
	}) {
		t.Fatalf("AC-2 without its record: want the missing record named: %s", dump(rep))
	}

	rep, err = audit.RunJob(ctx, js, filter, "NOPE-1", f.store)
	if !errors.Is(err, audit.ErrJobNotInStream) {
		t.Fatalf("NOPE-1: %v", err)
	}
	if err := audit.CheckJobState(ctx, &rep, st, f.tenant, f.batch, "NOPE-1"); !errors.Is(err, records.ErrNotRecorded) {
		t.Fatalf("NOPE-1 has no record: want records.ErrNotRecorded, got %v: %s", err, dump(rep))
	}
	// A record the stream holds no event of: readers believe it, nothing proves it.
	forged := *ac1
	forged.ACID = "NOPE-1"
	if _, err := st.CreateJob(ctx, &forged); err != nil {
		t.Fatal(err)
	}
	if err := audit.CheckJobState(ctx, &rep, st, f.tenant, f.batch, "NOPE-1"); err != nil {
		t.Fatal(err)
	}
	if rep.OK() || len(rep.Mismatches) != 1 || !has(rep, func(m audit.Mismatch) bool {
		return m.Kind == audit.KindMissing && m.Job == "NOPE-1" && m.Batch == f.batch && m.Tenant == f.tenant &&
			strings.Contains(m.Detail, "the stream holds no event of it")
	}) {
		t.Fatalf("a record of NOPE-1 without events: want one finding naming it: %s", dump(rep))
	}
}
