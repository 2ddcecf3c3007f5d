package rulebook_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/critic"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/views"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

const tenant, batch = "team-a", "b-1"

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func abSpec(id string) events.JobSpec {
	return events.JobSpec{Kind: events.KindAB, ACID: id, Criterion: "c", KindPart: &ab.Spec{
		Ours: events.Source{Name: "o.md", URL: "https://x/o"}, Reference: events.Source{Name: "r.md", URL: "https://x/r"}, Threshold: 0.75}}
}

func submit(spec events.JobSpec, index, size int) events.Event {
	e := events.New(&events.JobSubmitted{Spec: spec, Index: index, BatchSize: size}, tenant, batch, spec.ACID, 0, "", nil)
	e.Time = t0
	return e
}

func in(e events.Event) rulebook.Input {
	subj, _ := events.Subject(e.Tenant, e.Type)
	return rulebook.Input{Event: e, Link: e.ID + ":sha", Subject: subj}
}

func abVerdict(id, raw string, conf float64, attempt int) events.Event {
	v := &events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{{Judge: events.JudgeInfo{Provider: "scripted", Model: "m"},
		Order: "AB", Status: events.VoteOK, RawWinner: raw, Confidence: conf, BiggestGap: "gap"}}}
	e := events.NewAttempt(v, tenant, batch, id, 0, "", attempt, nil)
	e.Time = t0.Add(time.Second)
	return e
}

// pending applies a submission and returns the recorded job.
func pending(t *testing.T, spec events.JobSpec) *records.Job {
	t.Helper()
	res, err := rulebook.Apply(rulebook.State{Now: t0}, in(submit(spec, 0, 1)))
	if err != nil || res.Job == nil {
		t.Fatalf("submission: %+v, %v", res, err)
	}
	return res.Job
}

// TestSubmission: the first job.submitted records the job and asks for its first render
// (so no later stage can overtake the record); a repeated one changes nothing.
func TestSubmission(t *testing.T) {
	sub := submit(abSpec("AC-1"), 0, 3)
	res, err := rulebook.Apply(rulebook.State{}, in(sub))
	if err != nil {
		t.Fatal(err)
	}
	j := res.Job
	if !res.Created || j == nil || j.Status != events.StatusPending || j.Index != 0 || j.BatchSize != 3 || len(j.Inputs) != 1 {
		t.Fatalf("record %+v (created %v)", j, res.Created)
	}
	if res.Batch == nil || res.Batch.Size != 3 {
		t.Fatalf("batch header %+v", res.Batch)
	}
	if len(res.Publish) != 1 || res.Publish[0].Type != events.TypeRenderRequested || res.Publish[0].CausationID != sub.ID {
		t.Fatalf("publish %+v", res.Publish)
	}
	want := events.NewID(events.TypeRenderRequested, tenant, batch, "AC-1", 0, "")
	if res.Publish[0].ID != want {
		t.Errorf("render request id %s, want the deterministic %s", res.Publish[0].ID, want)
	}
	again, err := rulebook.Apply(rulebook.State{Job: j}, in(sub))
	if err != nil || again.Job != nil || len(again.Publish) != 1 || again.Publish[0].ID != want {
		t.Fatalf("a repeated submission of a pending job asks for the same render again: %+v %v", again, err)
	}
	final := j.Clone()
	final.Status = events.StatusCompared
	if again, _ := rulebook.Apply(rulebook.State{Job: final}, in(sub)); again.Job != nil || len(again.Publish) != 0 {
		t.Fatalf("a repeated submission of a final job: %+v", again)
	}
}

func TestRefused(t *testing.T) {
	sub := submit(abSpec("AC-1"), 0, 1)
	other := sub
	other.JobID = "AC-2"
	bad := submit(events.JobSpec{Kind: "nope", ACID: "AC-1"}, 0, 1)
	wrongSubject := in(abVerdict("AC-1", "A", 0.9, 0))
	wrongSubject.Subject = "tribunal.team-b.verdict.emitted"
	wrongType := in(abVerdict("AC-1", "A", 0.9, 0))
	wrongType.Subject = "tribunal.team-a.job.submitted"
	dl := in(abVerdict("AC-1", "A", 0.9, 0))
	dl.Subject = "tribunal.team-b.verdict.emitted"
	dl.DeadLetter = &rulebook.DeadLetter{Service: "judge", Reason: "r"}
	j := pending(t, abSpec("AC-1"))
	for name, c := range map[string]struct {
		st rulebook.State
		in rulebook.Input
	}{
		"spec names another job":             {rulebook.State{}, in(other)},
		"unknown kind":                       {rulebook.State{}, in(bad)},
		"another tenant's subject":           {rulebook.State{Job: j}, wrongSubject},
		"another type's subject":             {rulebook.State{Job: j}, wrongType},
		"dead letter from another's subject": {rulebook.State{Job: j}, dl},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := rulebook.Apply(c.st, c.in)
			if !errors.Is(err, rulebook.ErrRefused) || res.Job != nil || len(res.Publish) != 0 {
				t.Fatalf("want refused, got %+v, %v", res, err)
			}
		})
	}
}

func TestNotRecordedAndRejudge(t *testing.T) {
	res, err := rulebook.Apply(rulebook.State{}, in(abVerdict("AC-1", "A", 0.9, 0)))
	if err != nil || !res.NotRecorded {
		t.Fatalf("a verdict before its job: %+v, %v", res, err)
	}
	v := abVerdict("AC-1", "A", 0.9, 0)
	v.Rejudge = "other-model"
	res, err = rulebook.Apply(rulebook.State{Job: pending(t, abSpec("AC-1"))}, in(v))
	if err != nil || res.Job != nil || len(res.Publish) != 0 || res.Done {
		t.Fatalf("a rejudge's verdict changes no decision: %+v, %v", res, err)
	}
}

// TestDecisionIsFinalOnce: a pending job becomes final once; a redelivered input
// re-announces the same outcome under the same ids and counts toward completion again.
func TestDecisionIsFinalOnce(t *testing.T) {
	j := pending(t, abSpec("AC-7")) // AC-7 at iteration 0 puts ours in slot A
	v := abVerdict("AC-7", "A", 0.9, 0)
	res, err := rulebook.Apply(rulebook.State{Job: j}, in(v))
	if err != nil {
		t.Fatal(err)
	}
	d := res.Job
	if !res.Done || d.Status != events.StatusCompared || d.DecidedBy != v.ID || !d.DecidedAt.Equal(v.Time) || len(d.Inputs) != 2 {
		t.Fatalf("decided %+v", d)
	}
	if len(res.Publish) != 1 || res.Publish[0].Type != events.TypeIterationDecided || res.Publish[0].CorrelationID != j.CorrelationID {
		t.Fatalf("publish %+v", res.Publish)
	}
	if got := ab.DecidedOf(res.Publish[0].Payload.(*events.IterationDecided).KindPart).Winner; got != "ours" {
		t.Fatalf("winner %q, want ours", got)
	}
	again, err := rulebook.Apply(rulebook.State{Job: d}, in(abVerdict("AC-7", "B", 0.9, 0)))
	if err != nil || again.Job != nil || !again.Done || len(again.Publish) != 1 || again.Publish[0].ID != res.Publish[0].ID {
		t.Fatalf("a second verdict for a final job: %+v, %v", again, err)
	}
	if ab.DecidedOf(again.Publish[0].Payload.(*events.IterationDecided).KindPart).Winner != "ours" {
		t.Fatal("a final job took a second outcome")
	}
}

func TestBlocked(t *testing.T) {
	gates := []events.Gate{{Name: "artifact_readable:ours", Status: events.GateFail, Detail: "not in blob storage"}, {Name: "artifact_readable:reference", Status: events.GatePass}}
	for _, tc := range []struct {
		name, stage, reason string
		in                  func(*records.Job) rulebook.Input
	}{
		{"blocked render", "render", "ours artifact: diff", func(j *records.Job) rulebook.Input {
			return in(events.New(&events.GatesFailed{Kind: events.KindAB, ACID: j.ACID, Blocked: "ours artifact: diff"}, tenant, batch, j.ACID, 0, "", nil))
		}},
		{"red gate", "gate", "gates failed: artifact_readable:ours (not in blob storage)", func(j *records.Job) rulebook.Input {
			return in(events.New(&events.GatesFailed{Kind: events.KindAB, ACID: j.ACID, Gates: gates}, tenant, batch, j.ACID, 0, "", nil))
		}},
		{"dead letter", "renderer", "renderer gave up on render.requested: sensor crashed", func(j *records.Job) rulebook.Input {
			req := events.New(&events.RenderRequested{Spec: j.Spec}, tenant, batch, j.ACID, 0, "", nil)
			i := in(req)
			i.DeadLetter = &rulebook.DeadLetter{Service: "renderer", Reason: "sensor crashed"}
			return i
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := pending(t, abSpec("AC-1"))
			res, err := rulebook.Apply(rulebook.State{Job: j}, tc.in(j))
			if err != nil {
				t.Fatal(err)
			}
			b := res.Job
			if b.Status != events.StatusBlocked || b.BlockStage != tc.stage || b.BlockReason != tc.reason || !res.Done {
				t.Fatalf("record %s/%s/%q", b.Status, b.BlockStage, b.BlockReason)
			}
			if len(res.Publish) != 1 {
				t.Fatalf("publish %+v", res.Publish)
			}
			jb, ok := res.Publish[0].Payload.(*events.JobBlocked)
			if !ok || jb.Reason != tc.reason || jb.Stage != tc.stage {
				t.Fatalf("publish %+v", res.Publish[0].Payload)
			}
			// ab keeps a blocked comparison in its manifest.
			r, err := ab.ResultOf(b)
			if err != nil || r == nil || r.Comparison.Status != ab.StatusBlocked || r.Comparison.BlockedReason != tc.reason {
				t.Fatalf("ab result %+v, %v", r, err)
			}
			if rulebook.Outcome(b) != kind.OutcomeBlocked || !rulebook.Redrivable(b) {
				t.Fatal("a blocked job is blocked and redrivable")
			}
		})
	}
}

func TestDeadLetters(t *testing.T) {
	sub := submit(abSpec("AC-1"), 0, 1)
	dl := in(sub)
	dl.DeadLetter = &rulebook.DeadLetter{Service: "aggregator", Reason: "gave up"}
	res, err := rulebook.Apply(rulebook.State{}, dl)
	if err != nil || !res.Created || res.Job.Status != events.StatusBlocked || !res.Done || len(res.Publish) != 1 {
		t.Fatalf("a dead-lettered submission is recorded blocked: %+v, %v", res, err)
	}
	v := in(abVerdict("AC-2", "A", 1, 0))
	v.DeadLetter = &rulebook.DeadLetter{Service: "judge", Reason: "r"}
	if res, err := rulebook.Apply(rulebook.State{}, v); err != nil || !res.NotRecorded {
		t.Fatalf("a dead letter of a job never submitted acts on nothing: %+v, %v", res, err)
	}
}

// TestRedrive: a blocked job takes a higher attempt's input, which resets its outcome;
// then the lower attempt's inputs are stale. A higher attempt never reopens another outcome.
func TestRedrive(t *testing.T) {
	j := pending(t, abSpec("AC-7"))
	blockedRes, _ := rulebook.Apply(rulebook.State{Job: j}, in(events.New(&events.GatesFailed{Kind: events.KindAB, ACID: "AC-7", Blocked: "x"}, tenant, batch, "AC-7", 0, "", nil)))
	blocked := blockedRes.Job
	res, err := rulebook.Apply(rulebook.State{Job: blocked}, in(abVerdict("AC-7", "A", 0.9, 1)))
	if err != nil || res.Job == nil || res.Job.Attempt != 1 || res.Job.Status != events.StatusCompared || res.Job.BlockReason != "" || !res.Done {
		t.Fatalf("redrive: %+v, %v", res.Job, err)
	}
	if len(res.Job.Inputs) != 3 {
		t.Fatalf("the redrive extends the chain: %v", res.Job.Inputs)
	}
	if stale, _ := rulebook.Apply(rulebook.State{Job: res.Job}, in(abVerdict("AC-7", "B", 0.9, 0))); stale.Job != nil || len(stale.Publish) != 0 || stale.Done {
		t.Fatalf("a stale attempt-0 input: %+v", stale)
	}
	if other, _ := rulebook.Apply(rulebook.State{Job: res.Job}, in(abVerdict("AC-7", "B", 0.9, 2))); other.Job != nil || len(other.Publish) != 0 {
		t.Fatalf("a higher attempt for a compared job: %+v", other)
	}
}

func TestCriticThroughTheRules(t *testing.T) {
	spec := events.JobSpec{Kind: events.KindCritic, ACID: "C-1", KindPart: &critic.Spec{Task: "t", Output: events.Source{Name: "o", URL: "https://x"}}}
	j := pending(t, spec)
	q := 9
	v := &events.VerdictEmitted{Kind: events.KindCritic, KindPart: &critic.Vote{Judge: events.JudgeInfo{Provider: "p", Model: "m"}, Status: events.VoteOK,
		Correctness: 8, Slop: 1, Scope: 9, Rationale: "r", ClaimedVerdict: "pass", ClaimedQuality: &q}}
	res, err := rulebook.Apply(rulebook.State{Job: j}, in(events.New(v, tenant, batch, "C-1", 0, "", nil)))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := critic.ResultOf(res.Job)
	if r == nil || r.Quality != 8 || r.Verdict != critic.VerdictPass || r.Disagreements != 1 {
		t.Fatalf("critic result %+v: quality is derived, the claim counted", r)
	}
	if rulebook.Outcome(res.Job) != kind.OutcomeClean {
		t.Fatal("a pass is clean")
	}
}

func TestOutcome(t *testing.T) {
	for status, want := range map[events.Status]kind.Outcome{
		events.StatusBlocked:           kind.OutcomeBlocked,
		events.StatusSchemaViolation:   kind.OutcomeSchemaViolation,
		events.StatusPending:           kind.OutcomeSchemaViolation,
		events.StatusAwaitingSpotcheck: kind.OutcomeSchemaViolation,
		"":                             kind.OutcomeSchemaViolation,
	} {
		if got := rulebook.Outcome(&records.Job{Status: status, Spec: abSpec("AC-1")}); got != want {
			t.Errorf("%q: %s, want %s", status, got, want)
		}
	}
	viewSpec := events.JobSpec{Kind: events.KindRubric, KindPart: &rubricwire.Spec{}}
	for status, want := range map[events.Status]kind.Outcome{
		events.StatusSignedOff:       kind.OutcomeClean,
		events.StatusNeedsFixes:      kind.OutcomeFinding,
		events.StatusBudgetExhausted: kind.OutcomeBlocked,
		events.StatusNeedsContext:    kind.OutcomeBlocked,
		events.StatusReported:        kind.OutcomeFinding,
	} {
		if got := rulebook.Outcome(&records.Job{Status: status, Spec: viewSpec}); got != want {
			t.Errorf("rubric %q: %s, want %s", status, got, want)
		}
	}
}

// TestCompletion: the fold counts every kind's jobs into one summary and exit code, one
// manifest per kind present, and a digest over every job's inputs in batch order, in
// whatever order the jobs are folded.
func TestCompletion(t *testing.T) {
	mk := func(id string, index int, raw string, blocked bool) *records.Job {
		j := pending(t, abSpec(id))
		j.Index, j.BatchSize = index, 3
		var res rulebook.Result
		if blocked {
			res, _ = rulebook.Apply(rulebook.State{Job: j}, in(events.New(&events.GatesFailed{Kind: events.KindAB, ACID: id, Blocked: "gone"}, tenant, batch, id, 0, "", nil)))
		} else {
			res, _ = rulebook.Apply(rulebook.State{Job: j}, in(abVerdict(id, raw, 0.9, 0)))
		}
		return res.Job
	}
	jobs := []*records.Job{mk("AC-7", 0, "A", false), mk("AC-1", 1, "A", false), mk("AC-3", 2, "", true)}
	forward, backward := rulebook.NewFold(tenant, batch), rulebook.NewFold(tenant, batch)
	for i := range jobs {
		forward.Add(jobs[i])
		backward.Add(jobs[len(jobs)-1-i])
	}
	// The fold decodes each job's result once (records.Job.Memoize) and leaves no trace of
	// it on the record.
	for _, j := range jobs {
		if !reflect.DeepEqual(j, j.Clone()) {
			t.Fatalf("job %s after the fold differs from its copy: a memo was left on it", j.ACID)
		}
	}
	a, err := forward.Complete("AC-3", 0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := backward.Complete("AC-3", 0)
	if a.Completion.Digest != b.Completion.Digest || string(a.Manifests[events.KindAB]) != string(b.Manifests[events.KindAB]) {
		t.Fatal("the completion depends on the order jobs are folded in")
	}
	sum := a.Completion.Summary
	// AC-7: ours in A, clean; AC-1: reference in A, raw A = reference wins, a finding;
	// AC-3 blocked. Exit 1: findings and a partly blocked batch.
	if sum.Total != 3 || sum.Compared != 2 || sum.Blocked != 1 || sum.Suggestions != 1 || sum.ExitCode != kind.ExitFindings {
		t.Fatalf("summary %+v", sum)
	}
	if len(a.Manifests) != 1 || a.Completion.ManifestRef == nil || len(sum.Manifests) != 1 {
		t.Fatalf("manifests %v", a.Completion.Manifests)
	}
	latest := jobs[0].DecidedAt
	for _, j := range jobs {
		if j.DecidedAt.After(latest) {
			latest = j.DecidedAt
		}
	}
	var m ab.Manifest
	if err := json.Unmarshal(a.Manifests[events.KindAB], &m); err != nil || len(m.Comparisons) != 3 || !m.GeneratedAt.Equal(latest) {
		t.Fatalf("ab manifest %+v, %v", m, err)
	}
	evs := rulebook.CompletionEvents(tenant, batch, &a.Completion)
	if len(evs) != 2 || evs[0].Type != events.TypeManifestEmitted || evs[1].Type != events.TypeBatchCompleted {
		t.Fatalf("announcements %+v", evs)
	}
	if evs[1].ID != events.NewID(events.TypeBatchCompleted, tenant, batch, "", 0, "") {
		t.Error("the completion's id is not its deterministic one")
	}
	redrive := rulebook.CompletionEvents(tenant, batch, &records.Completion{Attempt: 1, Summary: sum})
	if redrive[0].ID == evs[1].ID {
		t.Error("a redrive's completion must have ids of its own")
	}
}

func TestRedriveDone(t *testing.T) {
	h := &records.Batch{Redrive: &records.Redrive{Attempt: 2, Pending: []string{"AC-1", "AC-2"}}, Completion: &records.Completion{Attempt: 1}}
	next, last := rulebook.RedriveDone(h, "AC-1", 2)
	if next == nil || last || len(next.Redrive.Pending) != 1 || len(h.Redrive.Pending) != 2 {
		t.Fatalf("first of two: %+v %v (the input header must not change)", next, last)
	}
	next, last = rulebook.RedriveDone(next, "AC-2", 2)
	if next == nil || !last {
		t.Fatal("the last job of a redrive completes it")
	}
	if n, _ := rulebook.RedriveDone(next, "AC-2", 2); n != nil {
		t.Fatal("a job counted twice")
	}
	if n, _ := rulebook.RedriveDone(h, "AC-1", 1); n != nil {
		t.Fatal("a job of another attempt counted")
	}
}

// view is a rubric view's spec, in the given mode.
func viewSpec(mode string) events.JobSpec {
	blob := events.Blob{SHA256: strings.Repeat("a", 64), MediaType: "application/json", Size: 1}
	return events.JobSpec{Kind: events.KindRubric, ACID: "F--t--s--a", KindPart: &rubricwire.Spec{
		Feature: "f", Target: "t", State: "s", Appearance: "a", Route: "https://x", Adapter: "web", Mode: mode,
		ReferenceStatus: "present", ReferenceSource: "human", SpecJSON: blob, SpecText: blob, Tokens: blob, Rubric: blob}}
}

func rubricVote(t *testing.T, id string, iteration int, pass bool) events.Event {
	t.Helper()
	r := argus.DefaultRubric()
	dims := map[string]argus.DimensionScore{}
	for _, d := range r.DimensionNames() {
		score := 1.0
		if !pass && d == r.DimensionNames()[0] {
			score = 0
		}
		dims[d] = argus.DimensionScore{Score: score, Anchor: r.Dimensions[d].Anchor, Evidence: "e"}
	}
	failed := []string{}
	if !pass {
		failed = append(failed, r.DimensionNames()[0])
	}
	data, _ := json.Marshal(argus.Verdict{Iteration: iteration + 1, Feature: "f", Target: "t", State: "s", Appearance: "a", ReferenceSource: "human",
		Dimensions: dims, AllPass: pass, FailedDimensions: failed})
	render := events.Blob{SHA256: strings.Repeat("b", 64), MediaType: "image/png", Size: 1}
	e := events.New(&events.VerdictEmitted{Kind: events.KindRubric, KindPart: &rubricwire.Vote{Judge: events.JudgeInfo{Provider: "p", Model: "m"},
		Status: events.VoteOK, Verdict: string(data), Render: render}}, tenant, batch, id, iteration, "", nil)
	e.Time = t0.Add(time.Duration(iteration) * time.Minute)
	return e
}

// TestRubricLoop runs a view through the rules: an all-pass verdict asks for a
// confirmation render (no streak yet), a second pass signs it off; in interactive mode the
// first sign-off of the batch waits for a person, claimed through the caller.
func TestRubricLoop(t *testing.T) {
	for _, mode := range []string{events.ModeHeadless, events.ModeInteractive} {
		t.Run(mode, func(t *testing.T) {
			spec := viewSpec(mode)
			j := pending(t, spec)
			view := &views.Record{}
			st := rulebook.State{Job: j, KindState: viewState(view, argus.DefaultRubric())}
			res, err := rulebook.Apply(st, in(rubricVote(t, spec.ACID, 0, true)))
			if err != nil {
				t.Fatal(err)
			}
			if res.Job.Status != events.StatusPending || res.Done || res.KindState == nil || len(res.Publish) != 2 {
				t.Fatalf("first pass: %s, %d events", res.Job.Status, len(res.Publish))
			}
			confirm, ok := res.Publish[1].Payload.(*events.RenderRequested)
			if !ok || !rubricwire.SpecOf(confirm.Spec.KindPart).Confirm || res.Publish[1].Iteration != 1 {
				t.Fatalf("a confirmation render of iteration 1 is asked for: %+v", res.Publish[1])
			}
			// Redelivered: the same announcements, nothing counted twice.
			replay, err := rulebook.Apply(rulebook.State{Job: res.Job, KindState: viewState(recordOf(res.KindState), argus.DefaultRubric())}, in(rubricVote(t, spec.ACID, 0, true)))
			if err != nil || replay.Job != nil || len(replay.Publish) != 2 || replay.Publish[0].ID != res.Publish[0].ID {
				t.Fatalf("replay: %+v, %v", replay, err)
			}
			st = rulebook.State{Job: res.Job, KindState: viewState(recordOf(res.KindState), argus.DefaultRubric())}
			second := in(rubricVote(t, spec.ACID, 1, true))
			res, err = rulebook.Apply(st, second)
			if err != nil {
				t.Fatal(err)
			}
			if mode == events.ModeInteractive {
				if !res.WantsClaim || res.Job != nil {
					t.Fatalf("an interactive sign-off asks for the claim first: %+v", res)
				}
				st.Claim = spec.ACID
				if res, err = rulebook.Apply(st, second); err != nil {
					t.Fatal(err)
				}
				if res.Job.Status != events.StatusAwaitingSpotcheck || res.Done {
					t.Fatalf("the claimed sign-off waits for a person: %s", res.Job.Status)
				}
				sc := events.New(&events.SpotcheckRecorded{ACID: spec.ACID, Approved: true, By: "me"}, tenant, batch, spec.ACID, 0, "approve", nil)
				res, err = rulebook.Apply(rulebook.State{Job: res.Job, KindState: viewState(recordOf(res.KindState), argus.DefaultRubric())}, in(sc))
				if err != nil {
					t.Fatal(err)
				}
			}
			if res.Job.Status != events.StatusSignedOff || !res.Done {
				t.Fatalf("signed off: %s", res.Job.Status)
			}
			s, _ := rubric.StateOf(res.Job)
			if s == nil || s.SignOff == nil || !s.SignOff.SignedOffAt.Equal(second.Event.Time) {
				t.Fatalf("the sign-off carries the deciding event's time: %+v", s)
			}
		})
	}
}

func TestRubricNeedsContextAndBudget(t *testing.T) {
	spec := viewSpec(events.ModeHeadless)
	j := pending(t, spec)
	nc := events.New(&events.GatesFailed{Kind: events.KindRubric, ACID: spec.ACID, NeedsContext: "no reference"}, tenant, batch, spec.ACID, 0, "", nil)
	res, err := rulebook.Apply(rulebook.State{Job: j, KindState: viewState(&views.Record{}, argus.DefaultRubric())}, in(nc))
	if err != nil || res.Job.Status != events.StatusNeedsContext || !res.Done || rulebook.Redrivable(res.Job) {
		t.Fatalf("needs context: %+v, %v", res.Job, err)
	}
	rubricwire.SpecOf(spec.KindPart).MaxIterations = 1
	j = pending(t, spec)
	res, err = rulebook.Apply(rulebook.State{Job: j, KindState: viewState(&views.Record{}, argus.DefaultRubric())}, in(rubricVote(t, spec.ACID, 0, false)))
	if err != nil || res.Job.Status != events.StatusBudgetExhausted || res.Job.BlockStage != "loop" {
		t.Fatalf("budget of one spent on a failing verdict: %+v, %v", res.Job, err)
	}
}

// TestMemory runs a batch through the in-memory aggregator: completion happens once, with
// every job, when the last one is final.
func TestMemory(t *testing.T) {
	m := &rulebook.Memory{}
	var done []*rulebook.Completion
	for i, id := range []string{"AC-1", "AC-2"} {
		if _, err := m.Apply(in(submit(abSpec(id), i, 2))); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"AC-1", "AC-2", "AC-1"} {
		res, err := m.Apply(in(abVerdict(id, "A", 0.9, 0)))
		if err != nil {
			t.Fatal(err)
		}
		if res.Complete != nil {
			done = append(done, res.Complete)
		}
	}
	if len(done) != 1 || done[0].Fold().Summary().Total != 2 || done[0].By.ACID != "AC-2" {
		t.Fatalf("completions %+v", done)
	}
}

// viewJob is a pending rubric job of a batch of its own, for loops across runs.
func viewJob(t *testing.T, spec events.JobSpec, batchID string) *records.Job {
	t.Helper()
	e := events.New(&events.JobSubmitted{Spec: spec, Index: 0, BatchSize: 1}, tenant, batchID, spec.ACID, 0, "", nil)
	e.Time = t0
	res, err := rulebook.Apply(rulebook.State{Now: t0}, in(e))
	if err != nil || res.Job == nil {
		t.Fatalf("submission: %+v, %v", res, err)
	}
	return res.Job
}

// inBatch moves an event to another batch (a later run of the same view).
func inBatch(e events.Event, batchID string) events.Event {
	e.BatchID = batchID
	e.ID = events.NewID(e.Type, e.Tenant, batchID, e.JobID, e.Iteration, "")
	return e
}

// TestRubricFrozenOnlyFailures pins the seed's loop when every failing dimension is
// frozen. loop_state.py `record`: "state["consecutive_passes"] = 0" for any verdict that is
// not all_pass, then "fix_dimensions = [d for d in failed_dimensions if d not in
// frozen]"; the workflow hands the implementer "decision.fix_dimensions" and goes on
// ("SENSE", "GATES", "JUDGE ... dispatched fresh every iteration") until "if
// decision.budget_exhausted: stop this view; record it unsigned". So a view whose frozen
// dimension keeps failing is rendered and judged again without the builder (outcome
// recheck, a render request that is not a confirmation) and ends BLOCKED at its budget,
// never signed off.
func TestRubricFrozenOnlyFailures(t *testing.T) {
	spec := viewSpec(events.ModeHeadless)
	rubricwire.SpecOf(spec.KindPart).MaxIterations = 6
	r := argus.DefaultRubric()
	dim := r.DimensionNames()[0]
	view := &views.Record{}
	type want struct {
		outcome string
		status  events.Status
		fix     []string
		frozen  bool
	}
	// Runs 1 and 2: the builder is asked to fix the dimension; run 3 freezes it and
	// rechecks within the run until the budget of 6 is spent.
	runs := []struct {
		batch string
		steps []want
	}{
		{"run-1", []want{{"fix", events.StatusNeedsFixes, []string{dim}, false}}},
		{"run-2", []want{{"fix", events.StatusNeedsFixes, []string{dim}, false}}},
		{"run-3", []want{
			{"recheck", events.StatusPending, nil, true},
			{"recheck", events.StatusPending, nil, true},
			{"recheck", events.StatusPending, nil, true},
			{"budget_exhausted", events.StatusBudgetExhausted, nil, true},
		}},
	}
	for _, run := range runs {
		j := viewJob(t, spec, run.batch)
		for it, w := range run.steps {
			res, err := rulebook.Apply(rulebook.State{Job: j, KindState: viewState(view, r)}, in(inBatch(rubricVote(t, spec.ACID, it, false), run.batch)))
			if err != nil {
				t.Fatal(err)
			}
			if res.KindState != nil {
				view = recordOf(res.KindState)
			}
			j = res.Job
			s, _ := rubric.StateOf(j)
			d := s.Decision
			if d.Outcome != w.outcome || j.Status != w.status || !reflect.DeepEqual(d.FixDimensions, w.fix) || (len(d.Frozen) == 1) != w.frozen {
				t.Fatalf("%s step %d: outcome %s, status %s, fix %v, frozen %v; want %+v", run.batch, it, d.Outcome, j.Status, d.FixDimensions, d.Frozen, w)
			}
			if w.outcome == "recheck" {
				// Rendered again and judged: not a confirmation, which an unchanged render
				// would confirm without a judge.
				last := res.Publish[len(res.Publish)-1]
				rr, ok := last.Payload.(*events.RenderRequested)
				if !ok || rubricwire.SpecOf(rr.Spec.KindPart).Confirm || last.Iteration != it+1 {
					t.Fatalf("%s step %d: a recheck asks for a render of the next iteration that is not a confirmation: %+v", run.batch, it, last)
				}
			}
			if view.SignOff != nil || s.SignOff != nil {
				t.Fatalf("%s step %d: signed off with a failing frozen dimension", run.batch, it)
			}
		}
	}
	if view.Loop.Iteration != 6 {
		t.Fatalf("the view ends at its budget: %+v", view.Loop)
	}
}

// TestRubricReportOnlySpendsNothing: a report-only run (the seed's "one dry iteration, no
// edits, no commits") reports its verdict and decides nothing durable: the view is not
// stored, so two report-only runs leave the loop at the iteration it was.
func TestRubricReportOnlySpendsNothing(t *testing.T) {
	spec := viewSpec(events.ModeReportOnly)
	view := &views.Record{}
	for _, b := range []string{"dry-1", "dry-2"} {
		j := viewJob(t, spec, b)
		res, err := rulebook.Apply(rulebook.State{Job: j, KindState: viewState(view, argus.DefaultRubric())}, in(inBatch(rubricVote(t, spec.ACID, 0, false), b)))
		if err != nil {
			t.Fatal(err)
		}
		s, _ := rubric.StateOf(res.Job)
		if res.KindState != nil || res.Job.Status != events.StatusReported || s.Decision.LoopIteration != 1 || s.LastVerdict == nil || s.LastVerdict.AllPass {
			t.Fatalf("%s: view stored %v, status %s, decision %+v", b, res.KindState != nil, res.Job.Status, s.Decision)
		}
	}
	if view.Loop.Iteration != 0 || len(view.Loop.Attempts) != 0 {
		t.Fatalf("report-only runs spent the loop: %+v", view.Loop)
	}
}

// TestViewReset pins the way out of a spent budget: an operator's view.reset of the
// view's current loop starts a new loop (the job it names keeps its outcome); the next
// run's first step is iteration 1 of loop 1 with a fresh budget. A reset of a loop the
// view has replaced changes nothing, and one of a job with no view, or one the
// aggregator gave up on, is refused.
func TestViewReset(t *testing.T) {
	spec := viewSpec(events.ModeHeadless)
	rubricwire.SpecOf(spec.KindPart).MaxIterations = 1
	view := &views.Record{}
	j := viewJob(t, spec, "run-1")
	res, err := rulebook.Apply(rulebook.State{Job: j, KindState: viewState(view, argus.DefaultRubric())}, in(inBatch(rubricVote(t, spec.ACID, 0, false), "run-1")))
	if err != nil || res.Job.Status != events.StatusBudgetExhausted {
		t.Fatalf("setup: %+v %v", res.Job, err)
	}
	exhausted, view := res.Job, recordOf(res.KindState)
	reset := func(loop int) rulebook.Input {
		e := events.New(&events.ViewReset{ACID: spec.ACID, Loop: loop, By: "ops", Reason: "rubric fixed"}, tenant, "run-1", spec.ACID, 0, events.ResetStep(loop), nil)
		e.Time = t0.Add(time.Hour)
		return in(e)
	}
	deadLetter := reset(0)
	deadLetter.DeadLetter = &rulebook.DeadLetter{Service: "aggregator", Reason: "kv down"}
	abJob := pending(t, abSpec("AC-1"))
	abReset := in(events.New(&events.ViewReset{ACID: "AC-1"}, tenant, batch, "AC-1", 0, events.ResetStep(0), nil))
	for name, c := range map[string]struct {
		st      rulebook.State
		in      rulebook.Input
		refused bool
		loop    int // the view's loop afterwards; -1: not stored
	}{
		"current loop":          {rulebook.State{Job: exhausted, KindState: viewState(view, nil)}, reset(0), false, 1},
		"a replaced loop":       {rulebook.State{Job: exhausted, KindState: viewState(view, nil)}, reset(1), false, -1},
		"no view":               {rulebook.State{Job: abJob}, abReset, true, -1},
		"given up by a service": {rulebook.State{Job: exhausted, KindState: viewState(view, nil)}, deadLetter, true, -1},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := rulebook.Apply(c.st, c.in)
			if errors.Is(err, rulebook.ErrRefused) != c.refused || (!c.refused && err != nil) {
				t.Fatalf("err %v, refused want %v", err, c.refused)
			}
			if res.Job != nil || len(res.Publish) != 0 || res.Done {
				t.Fatalf("a reset changes no job and announces nothing: %+v", res)
			}
			if (res.KindState != nil) != (c.loop >= 0) {
				t.Fatalf("view stored %v, want loop %d", res.KindState != nil, c.loop)
			}
			if res.KindState != nil && (recordOf(res.KindState).Generation != c.loop || recordOf(res.KindState).Loop.Iteration != 0 || recordOf(res.KindState).Reset == nil || recordOf(res.KindState).Reset.By != "ops") {
				t.Fatalf("view after the reset %+v", res.KindState)
			}
		})
	}
	res, _ = rulebook.Apply(rulebook.State{Job: exhausted, KindState: viewState(view, nil)}, reset(0))
	view = recordOf(res.KindState)
	rubricwire.SpecOf(spec.KindPart).MaxIterations = 2
	j = viewJob(t, spec, "run-2")
	res, err = rulebook.Apply(rulebook.State{Job: j, KindState: viewState(view, argus.DefaultRubric())}, in(inBatch(rubricVote(t, spec.ACID, 0, true), "run-2")))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := rubric.StateOf(res.Job)
	if res.Job.Status != events.StatusPending || s.Decision.Outcome != "confirm" || s.Decision.LoopIteration != 1 || s.Decision.Loop != 1 ||
		!reflect.DeepEqual(s.Decision.NewLoop, []string{views.ResetBegan}) {
		t.Fatalf("the next run after the reset: %s, %+v", res.Job.Status, s.Decision)
	}
}

// TestViewResetThroughMemory: the in-memory aggregator (the audit's) applies a reset that
// names a job whose run ended, which is the usual case: it loads the view for it.
func TestViewResetThroughMemory(t *testing.T) {
	spec := viewSpec(events.ModeHeadless)
	rubricwire.SpecOf(spec.KindPart).MaxIterations = 1
	m := &rulebook.Memory{Documents: func(string, events.Blob) ([]byte, error) { return argus.DefaultRubricJSON(), nil }}
	if _, err := m.Apply(in(submit(spec, 0, 1))); err != nil {
		t.Fatal(err)
	}
	if res, err := m.Apply(in(rubricVote(t, spec.ACID, 0, false))); err != nil || res.Job.Status != events.StatusBudgetExhausted {
		t.Fatalf("%+v %v", res.Job, err)
	}
	key := views.Key(tenant, rubricwire.SpecOf(spec.KindPart))
	e := events.New(&events.ViewReset{ACID: spec.ACID, Loop: 0}, tenant, batch, spec.ACID, 0, events.ResetStep(0), nil)
	if _, err := m.Apply(in(e)); err != nil {
		t.Fatal(err)
	}
	if v := storedView(t, m.State(key)); v.Generation != 1 || v.Loop.Iteration != 0 {
		t.Fatalf("view after the reset %+v", v)
	}
}

// TestSpotcheckDimensionMustBeTheRubrics: the seed's human "names the dimension the judge
// got wrong so you can tune rubric.json", so the aggregator's own rules refuse a rejection
// naming anything but one of the view's rubric dimensions, whoever published it: the
// sign-off keeps waiting for an answer, and the refusal's dead letter is refused again
// rather than blocking the view.
func TestSpotcheckDimensionMustBeTheRubrics(t *testing.T) {
	spec := viewSpec(events.ModeInteractive)
	r := argus.DefaultRubric()
	st := rulebook.State{Job: pending(t, spec), KindState: viewState(&views.Record{}, r)}
	for it := 0; it < 2; it++ {
		res, err := rulebook.Apply(st, in(rubricVote(t, spec.ACID, it, true)))
		if res.WantsClaim {
			st.Claim = spec.ACID
			res, err = rulebook.Apply(st, in(rubricVote(t, spec.ACID, it, true)))
		}
		if err != nil {
			t.Fatal(err)
		}
		st.Job, st.KindState = res.Job, res.KindState
	}
	if st.Job.Status != events.StatusAwaitingSpotcheck {
		t.Fatalf("setup: %s", st.Job.Status)
	}
	spot := func(dim string) rulebook.Input {
		return in(events.New(&events.SpotcheckRecorded{ACID: spec.ACID, Dimension: dim}, tenant, batch, spec.ACID, 0, "reject-"+dim, nil))
	}
	dead := spot("tone")
	dead.DeadLetter = &rulebook.DeadLetter{Service: "aggregator", Reason: "input refused"}
	for name, c := range map[string]struct {
		in     rulebook.Input
		status events.Status
	}{
		"not a dimension":           {spot("tone"), ""},
		"another case":              {spot("Typography"), ""},
		"its dead letter":           {dead, ""},
		"a dimension of the rubric": {spot("typography"), events.StatusSignedOff},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := rulebook.Apply(st, c.in)
			if c.status == "" {
				if !errors.Is(err, rulebook.ErrRefused) || res.Job != nil || res.KindState != nil || !strings.Contains(err.Error(), "typography") {
					t.Fatalf("want refused naming the dimensions, got %+v, %v", res, err)
				}
				return
			}
			if err != nil || res.Job.Status != c.status || res.KindState == nil || recordOf(res.KindState).SignOff.HumanSpotcheck != "typography" {
				t.Fatalf("%+v, %v", res, err)
			}
		})
	}
}

// TestSpotcheckOnlyOfAWaitingSignoff: a spot-check of a view still in its loop was applied
// on de157a3 and signed the view off without its two passes (a team can publish one
// through the ingress, which checks only that the job exists). The rules refuse it.
func TestSpotcheckOnlyOfAWaitingSignoff(t *testing.T) {
	spec := viewSpec(events.ModeInteractive)
	st := rulebook.State{Job: pending(t, spec), KindState: viewState(&views.Record{}, argus.DefaultRubric())}
	res, err := rulebook.Apply(st, in(events.New(&events.SpotcheckRecorded{ACID: spec.ACID, Approved: true}, tenant, batch, spec.ACID, 0, "approve", nil)))
	if !errors.Is(err, rulebook.ErrRefused) || res.Job != nil || !strings.Contains(err.Error(), "not waiting for a spot-check") {
		t.Fatalf("a spot-check of a pending view: %+v, %v", res, err)
	}
}

// TestCallsRecorded: a verdict's calls land on the job record, whatever the kind: who
// answered, the cost, the cache and the call record; a redelivered verdict of a final
// job adds nothing.
func TestCallsRecorded(t *testing.T) {
	rec := &events.Blob{SHA256: strings.Repeat("c", 64), MediaType: "application/json", Size: 10}
	for _, tc := range []struct {
		name string
		v    *events.VerdictEmitted
		want []records.Call
	}{
		{"ab swap", &events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{
			{Judge: events.JudgeInfo{Provider: "openai", Model: "m", PromptTokens: 900, CompletionTokens: 40, LatencyMillis: 1200, Call: rec}, Order: "AB", Status: events.VoteOK},
			{Judge: events.JudgeInfo{Provider: "openai", Model: "m", Cached: true, Call: rec}, Order: "BA", Status: events.VoteOK}}},
			[]records.Call{{Judge: "openai/m", Label: "AB", Status: events.VoteOK, PromptTokens: 900, CompletionTokens: 40, LatencyMillis: 1200, Record: rec},
				{Judge: "openai/m", Label: "BA", Status: events.VoteOK, Cached: true, Record: rec}}},
		{"critic", &events.VerdictEmitted{Kind: events.KindCritic, KindPart: &critic.Vote{Judge: events.JudgeInfo{Provider: "p", Model: "c"}, Status: events.VoteUnavailable}},
			[]records.Call{{Judge: "p/c", Status: events.VoteUnavailable}}},
		{"equivalence", &events.VerdictEmitted{Kind: events.KindEquivalence, Cases: []events.CaseVote{{CaseID: "c-1", Judge: events.JudgeInfo{Provider: "p", Model: "e"}, Status: events.VoteOK}}},
			[]records.Call{{Judge: "p/e", Label: "c-1", Status: events.VoteOK}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := rulebook.CallsOf(tc.v)
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(tc.want)
			if string(a) != string(b) {
				t.Fatalf("calls\n got %s\nwant %s", a, b)
			}
		})
	}
	j := pending(t, abSpec("AC-1"))
	v := abVerdict("AC-1", "A", 0.9, 0)
	res, err := rulebook.Apply(rulebook.State{Job: j, Now: t0}, in(v))
	if err != nil || len(res.Job.Calls) != 1 || res.Job.Calls[0].Judge != "scripted/m" || res.Job.Calls[0].Label != "AB" {
		t.Fatalf("after the verdict: %+v %v", res.Job, err)
	}
	again, err := rulebook.Apply(rulebook.State{Job: res.Job, Now: t0}, in(v))
	if err != nil || again.Job != nil {
		t.Fatalf("a redelivered verdict changed the final job: %+v %v", again.Job, err)
	}
}

// TestMemorySpill: a Memory that keeps its final records in a spill file (SpillDir)
// decides as one that holds them all: the same records, the same completions, also for a
// final record stored again (a redrive decides a blocked job anew); the file is gone from
// its folder at once, and a folder it cannot write keeps the records in memory. Keys
// whose hashes collide (the index keeps no key) are told apart, spilled or held, and so
// are records in flight written out of a log too small for them and read back.
func TestMemorySpill(t *testing.T) {
	const n = 40
	run := func(m *rulebook.Memory) (jobs []string, digests []string) {
		t.Helper()
		add := func(e events.Event) {
			t.Helper()
			res, err := m.Apply(in(e))
			if err != nil {
				t.Fatal(err)
			}
			if res.Complete != nil {
				comp, err := res.Complete.Fold().Complete(res.Complete.By.ACID, res.Complete.Attempt)
				if err != nil {
					t.Fatal(err)
				}
				digests = append(digests, comp.Completion.Digest)
			}
		}
		for i := range n {
			add(submit(abSpec(fmt.Sprintf("AC-%d", i)), i, n))
		}
		for i := range n {
			id := fmt.Sprintf("AC-%d", i)
			if i == 3 {
				add(events.New(&events.GatesFailed{Kind: events.KindAB, ACID: id, Blocked: "gone"}, tenant, batch, id, 0, "", nil))
				continue
			}
			add(abVerdict(id, "A", 0.9, 0))
		}
		m.StartRedrive(tenant, batch, 1, []string{"AC-3"})
		add(abVerdict("AC-3", "B", 0.9, 1))
		for i := range n {
			jobs = append(jobs, string(m.JobJSON(tenant, batch, fmt.Sprintf("AC-%d", i))))
		}
		return jobs, digests
	}
	held, heldDigests := run(&rulebook.Memory{})
	if len(heldDigests) != 2 {
		t.Fatalf("%d completions, want the first pass's and the redrive's", len(heldDigests))
	}
	dir := t.TempDir()
	for _, c := range []struct {
		what, dir string
		spilled   int
		collide   bool
		budget    int
	}{
		{"spilled", dir, n, false, 0},
		{"a folder that is not there", filepath.Join(dir, "gone"), 0, false, 0},
		{"spilled, every key's hash alike", dir, n, true, 0},
		{"held, every key's hash alike", "", 0, true, 0},
		// Room for a few records in flight: most are written out and read back.
		{"in flight written out", dir, n, false, 8 << 10},
		{"in flight written out, every key's hash alike", dir, n, true, 8 << 10},
	} {
		m := &rulebook.Memory{SpillDir: c.dir}
		if c.budget > 0 {
			rulebook.SetHeldBudget(m, c.budget)
		}
		if c.collide {
			rulebook.CollideKeys(m)
		}
		jobs, digests := run(m)
		if got := rulebook.Spilled(m); got != c.spilled {
			t.Errorf("%s: %d records spilled, want %d", c.what, got, c.spilled)
		}
		if ev := rulebook.Evicted(m); (c.budget > 0) != (ev > 0) {
			t.Errorf("%s: %d records in flight written out", c.what, ev)
		}
		if !slices.Equal(digests, heldDigests) {
			t.Errorf("%s: completions %v, held in memory %v", c.what, digests, heldDigests)
		}
		for i := range jobs {
			if jobs[i] != held[i] {
				t.Fatalf("%s: AC-%d reads back\n%s\nheld in memory:\n%s", c.what, i, jobs[i], held[i])
			}
		}
		if !strings.Contains(held[3], `"attempt":1`) {
			t.Fatalf("AC-3 was not redriven: %s", held[3])
		}
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) != 0 {
		t.Fatalf("the spill folder holds %v (%v): the file was not removed", left, err)
	}
}
