package rulebook_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/views"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

var pageBlob = events.Blob{SHA256: strings.Repeat("c", 64), MediaType: "application/json", Size: 100}

// jobCancel is the aggregator's cancel of one job of a batch of size.
func jobCancel(id string, k events.Kind, index, size int) events.Event {
	e := events.New(&events.JobCancelRequested{Kind: k, Index: index, BatchSize: size, By: "alice"}, tenant, batch, id, 0, "", nil)
	e.Time = t0.Add(time.Hour)
	return e
}

// TestCancelJob: a cancel blocks every job without an outcome, submitted or not, with stage
// "cancel" and reason "cancelled by <who>", from the cancel alone; a job with its outcome
// keeps it and only announces it again under its own ids.
func TestCancelJob(t *testing.T) {
	compared, _ := rulebook.Apply(rulebook.State{Job: pending(t, abSpec("AC-1"))}, in(abVerdict("AC-1", "A", 0.9, 0)))
	gated, _ := rulebook.Apply(rulebook.State{Job: pending(t, abSpec("AC-1"))},
		in(events.New(&events.GatesFailed{Kind: events.KindAB, ACID: "AC-1", Blocked: "gone"}, tenant, batch, "AC-1", 0, "", nil)))
	awaiting := pending(t, viewSpec(events.ModeInteractive))
	awaiting.Status = events.StatusAwaitingSpotcheck
	deadLettered := in(jobCancel("AC-1", events.KindAB, 0, 1))
	deadLettered.DeadLetter = &rulebook.DeadLetter{Service: "aggregator", Reason: "kv unavailable"}

	for _, tc := range []struct {
		name   string
		job    *records.Job
		in     rulebook.Input
		cancel bool // the job ends cancelled; else it keeps its outcome
	}{
		{"pending job", pending(t, abSpec("AC-1")), in(jobCancel("AC-1", events.KindAB, 0, 1)), true},
		{"never submitted", nil, in(jobCancel("AC-1", events.KindAB, 0, 1)), true},
		{"view waiting for a spot-check", awaiting, in(jobCancel(awaiting.ACID, events.KindRubric, 0, 1)), true},
		{"dead-lettered cancel", pending(t, abSpec("AC-1")), deadLettered, true},
		{"compared job", compared.Job, in(jobCancel("AC-1", events.KindAB, 0, 1)), false},
		{"job blocked at render", gated.Job, in(jobCancel("AC-1", events.KindAB, 0, 1)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := rulebook.State{Job: tc.job}
			if tc.job != nil && tc.job.Spec.Kind == events.KindRubric {
				st.KindState = viewState(&views.Record{}, argus.DefaultRubric())
			}
			res, err := rulebook.Apply(st, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Done {
				t.Fatal("a cancelled or final job counts toward completion")
			}
			if !tc.cancel {
				if res.Job != nil || len(res.Publish) != 1 || res.Publish[0].ID != rulebook.Outputs(tc.job, nil)[0].ID {
					t.Fatalf("a final job keeps its outcome and announces it again: %+v", res)
				}
				if res.Publish[0].CausationID != tc.job.DecidedBy {
					t.Fatalf("announced again as caused by %s, not by the input that decided it (%s)", res.Publish[0].CausationID, tc.job.DecidedBy)
				}
				return
			}
			j, ev := res.Job, tc.in.Event
			if j == nil || j.Status != events.StatusBlocked || j.BlockStage != "cancel" || j.BlockReason != "cancelled by alice" {
				t.Fatalf("record %+v", j)
			}
			if res.Created != (tc.job == nil) || (tc.job == nil) != (res.Batch != nil) {
				t.Fatalf("created %v, header %+v", res.Created, res.Batch)
			}
			if j.DecidedBy != ev.ID || !j.DecidedAt.Equal(ev.Time) || !reflect.DeepEqual(j.Inputs, []string{tc.in.Link}) {
				t.Fatalf("the record rests on the cancel alone: %s %v %v", j.DecidedBy, j.DecidedAt, j.Inputs)
			}
			if j.Index != 0 || j.BatchSize != 1 || j.Spec.Kind != ev.Payload.(*events.JobCancelRequested).Kind || j.Spec.ACID != ev.JobID {
				t.Fatalf("the record names the job: %+v", j)
			}
			if len(res.Publish) != 1 || res.Publish[0].CausationID != ev.ID || res.Publish[0].CorrelationID != events.CorrelationFor(tenant, batch, ev.JobID) {
				t.Fatalf("publish %+v", res.Publish)
			}
			jb, ok := res.Publish[0].Payload.(*events.JobBlocked)
			if !ok || jb.Stage != "cancel" || jb.Reason != "cancelled by alice" {
				t.Fatalf("publish %+v", res.Publish[0].Payload)
			}
			if rulebook.Redrivable(j) != (j.Spec.Kind == events.KindAB) {
				t.Fatal("redrivable as any blocked job")
			}
		})
	}
}

// TestCancelDoesNotDependOnOrder: the aggregator may apply a cancel before or after a
// job's submission and its loop's first steps; the record and its outputs are the same.
func TestCancelDoesNotDependOnOrder(t *testing.T) {
	spec := viewSpec(events.ModeHeadless)
	c := in(jobCancel(spec.ACID, events.KindRubric, 0, 1))

	first, err := rulebook.Apply(rulebook.State{}, c)
	if err != nil {
		t.Fatal(err)
	}
	late, err := rulebook.Apply(rulebook.State{Job: first.Job}, in(submit(spec, 0, 1)))
	if err != nil || late.Job != nil || len(late.Publish) != 0 {
		t.Fatalf("a submission after its cancel changes nothing and asks for no render: %+v, %v", late, err)
	}

	step, err := rulebook.Apply(rulebook.State{Job: pending(t, spec), KindState: viewState(&views.Record{}, argus.DefaultRubric())}, in(rubricVote(t, spec.ACID, 0, true)))
	if err != nil || step.Job == nil || step.Job.Final() || len(step.Job.Loop) == 0 {
		t.Fatalf("a first loop step: %+v, %v", step.Job, err)
	}
	after, err := rulebook.Apply(rulebook.State{Job: step.Job, KindState: viewState(recordOf(step.KindState), argus.DefaultRubric())}, c)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first.Job, after.Job) {
		t.Fatalf("cancel first:\n%+v\ncancel after a loop step:\n%+v", first.Job, after.Job)
	}
	if first.Publish[0].ID != after.Publish[0].ID || after.KindState != nil {
		t.Fatal("the outcome depends on the order, or the cancel changed the view")
	}

	// ab: a cancelled comparison keeps its place in the manifest, blocked.
	ca, err := rulebook.Apply(rulebook.State{Job: pending(t, abSpec("AC-1"))}, in(jobCancel("AC-1", events.KindAB, 0, 1)))
	if err != nil {
		t.Fatal(err)
	}
	r, err := ab.ResultOf(ca.Job)
	if err != nil || r == nil || r.Comparison.Status != ab.StatusBlocked || r.Comparison.BlockedReason != "cancelled by alice" {
		t.Fatalf("cancelled comparison %+v, %v", r, err)
	}
}

func TestCancelRefused(t *testing.T) {
	j := pending(t, abSpec("AC-1"))
	noJob := jobCancel("AC-1", events.KindAB, 0, 1)
	noJob.JobID = ""
	for name, c := range map[string]struct {
		job *records.Job
		in  rulebook.Input
	}{
		"another kind":  {j, in(jobCancel("AC-1", events.KindCritic, 0, 1))},
		"another index": {j, in(jobCancel("AC-1", events.KindAB, 1, 2))},
		"names no job":  {nil, in(noJob)},
		"another's subject": {j, func() rulebook.Input {
			i := in(jobCancel("AC-1", events.KindAB, 0, 1))
			i.Subject = "tribunal.team-b.job.cancel.requested"
			return i
		}()},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := rulebook.Apply(rulebook.State{Job: c.job}, c.in)
			if !errors.Is(err, rulebook.ErrRefused) || res.Job != nil || len(res.Publish) != 0 {
				t.Fatalf("want refused, got %+v, %v", res, err)
			}
		})
	}
}

func opened(size int) events.Event {
	pages := make([]events.Blob, events.PlanPages(size))
	for i := range pages {
		pages[i] = pageBlob
		pages[i].Size = int64(i + 1)
	}
	e := events.New(&events.BatchOpened{Size: size, Source: "b.yaml", Digest: strings.Repeat("d", 64), Pages: pages}, tenant, batch, "", 0, "", nil)
	e.Time = t0
	return e
}

func batchCancel(page int) events.Event {
	e := events.New(&events.BatchCancelRequested{By: "alice", Page: page}, tenant, batch, "", 0, events.CancelStep(page), nil)
	e.Time = t0.Add(time.Hour)
	return e
}

// planPage lists jobs AC-<first+1>... of a batch of size.
func planPage(page, size int) *records.PlanPage {
	p := &records.PlanPage{First: page * events.PlanPageSize}
	for i := p.First; i < size && i < p.First+events.PlanPageSize; i++ {
		p.Jobs = append(p.Jobs, records.PlannedJob{ID: fmt.Sprintf("AC-%d", i+1), Kind: events.KindAB})
	}
	return p
}

// TestBatchOpened: the header takes the batch's size and plan once; a repeat changes
// nothing, another job set under the same id is refused.
func TestBatchOpened(t *testing.T) {
	res, err := rulebook.ApplyBatch(rulebook.BatchState{}, in(opened(3)))
	if err != nil || res.Header == nil || res.Header.Size != 3 || res.Header.Plan == nil || len(res.Header.Plan.Pages) != 1 ||
		res.Header.Source != "b.yaml" || !res.Header.CreatedAt.Equal(t0) || len(res.Publish) != 0 {
		t.Fatalf("opened: %+v, %v", res.Header, err)
	}
	// A job's submission may have created the header first.
	sub, _ := rulebook.Apply(rulebook.State{}, in(submit(abSpec("AC-1"), 0, 3)))
	res2, err := rulebook.ApplyBatch(rulebook.BatchState{Header: sub.Batch}, in(opened(3)))
	if err != nil || res2.Header == nil || res2.Header.Plan == nil {
		t.Fatalf("opened after a submission: %+v, %v", res2.Header, err)
	}
	if again, err := rulebook.ApplyBatch(rulebook.BatchState{Header: res.Header}, in(opened(3))); err != nil || again.Header != nil {
		t.Fatalf("a repeated batch.opened: %+v, %v", again, err)
	}
	other := opened(3)
	other.Payload.(*events.BatchOpened).Digest = strings.Repeat("e", 64)
	for name, ev := range map[string]events.Event{"another size": opened(4), "another plan": other} {
		if _, err := rulebook.ApplyBatch(rulebook.BatchState{Header: res.Header}, in(ev)); !errors.Is(err, rulebook.ErrRefused) {
			t.Errorf("%s: %v, want refused", name, err)
		}
	}
}

// TestBatchCancel: a cancel step reads its plan page and asks every job on it to be
// cancelled, then the next page; the header records the first cancel. What it publishes
// depends on the plan alone.
func TestBatchCancel(t *testing.T) {
	size := events.PlanPageSize + 2
	open, _ := rulebook.ApplyBatch(rulebook.BatchState{}, in(opened(size)))
	h := open.Header

	if res, err := rulebook.ApplyBatch(rulebook.BatchState{}, in(batchCancel(0))); err != nil || !res.NotRecorded {
		t.Fatalf("a cancel before its batch.opened waits for it: %+v, %v", res, err)
	}
	need, err := rulebook.ApplyBatch(rulebook.BatchState{Header: h}, in(batchCancel(0)))
	if err != nil || need.NeedPage == nil || *need.NeedPage != h.Plan.Pages[0] || need.Header != nil || len(need.Publish) != 0 {
		t.Fatalf("the first step asks for page 0: %+v, %v", need, err)
	}
	c := in(batchCancel(0))
	res, err := rulebook.ApplyBatch(rulebook.BatchState{Header: h, Page: planPage(0, size)}, c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Header == nil || res.Header.Cancel == nil || res.Header.Cancel.By != "alice" || res.Header.Cancel.Event != c.Event.ID || !res.Header.Cancel.At.Equal(c.Event.Time) {
		t.Fatalf("header %+v", res.Header)
	}
	if len(res.Publish) != events.PlanPageSize+1 {
		t.Fatalf("%d events, want one per job of the page and the next page", len(res.Publish))
	}
	for i, e := range res.Publish[:events.PlanPageSize] {
		p, ok := e.Payload.(*events.JobCancelRequested)
		if !ok || e.JobID != fmt.Sprintf("AC-%d", i+1) || p.Index != i || p.BatchSize != size || p.By != "alice" || e.CausationID != c.Event.ID ||
			e.CorrelationID != events.CorrelationFor(tenant, batch, e.JobID) || e.ID != events.NewID(events.TypeJobCancelRequested, tenant, batch, e.JobID, 0, "") {
			t.Fatalf("event %d: %+v %+v", i, e.Envelope, e.Payload)
		}
	}
	next := res.Publish[events.PlanPageSize]
	if p, ok := next.Payload.(*events.BatchCancelRequested); !ok || p.Page != 1 || next.ID != events.NewID(events.TypeBatchCancelRequested, tenant, batch, "", 0, "page-1") {
		t.Fatalf("next page %+v", next)
	}
	last, err := rulebook.ApplyBatch(rulebook.BatchState{Header: res.Header, Page: planPage(1, size)}, in(next))
	if err != nil || last.Header != nil || len(last.Publish) != 2 || last.Publish[1].Payload.(*events.JobCancelRequested).Index != size-1 {
		t.Fatalf("the last page: %+v, %v (the first cancel stays recorded)", last, err)
	}
	for name, st := range map[string]rulebook.BatchState{
		"page past the plan":   {Header: h},
		"page of another size": {Header: h, Page: planPage(0, 3)},
	} {
		ev := batchCancel(0)
		if name == "page past the plan" {
			ev = batchCancel(2)
		}
		if _, err := rulebook.ApplyBatch(st, in(ev)); !errors.Is(err, rulebook.ErrRefused) {
			t.Errorf("%s: %v, want refused", name, err)
		}
	}
}

// TestMemoryCancel: a half-submitted batch cancelled in memory completes once, every
// job counted, the one never submitted blocked as cancelled by id.
func TestMemoryCancel(t *testing.T) {
	m := &rulebook.Memory{LoadPlan: func(string, events.Blob) (*records.PlanPage, error) { return planPage(0, 3), nil }}
	for _, ev := range []events.Event{opened(3), submit(abSpec("AC-1"), 0, 3), submit(abSpec("AC-2"), 1, 3), abVerdict("AC-1", "A", 0.9, 0)} {
		if _, err := m.Apply(in(ev)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := m.Apply(in(batchCancel(0)))
	if err != nil || len(res.Publish) != 3 || m.Header(tenant, batch).Cancel == nil {
		t.Fatalf("cancel step: %+v, %v", res, err)
	}
	var done []*rulebook.Completion
	for _, e := range res.Publish {
		a, err := m.Apply(in(e))
		if err != nil {
			t.Fatal(err)
		}
		if a.Complete != nil {
			done = append(done, a.Complete)
		}
	}
	if len(done) != 1 {
		t.Fatalf("completions %+v", done)
	}
	want := map[string]events.Status{"AC-1": events.StatusCompared, "AC-2": events.StatusBlocked, "AC-3": events.StatusBlocked}
	for id, status := range want {
		if j := m.Job(tenant, batch, id); j == nil || j.Status != status || (j.Status == events.StatusBlocked && j.BlockReason != "cancelled by alice") {
			t.Errorf("%s: %+v", id, j)
		}
	}
	if sum := done[0].Fold().Summary(); sum.Total != 3 || sum.Blocked != 2 || sum.Compared != 1 {
		t.Fatalf("summary %+v", sum)
	}
}
