package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/index"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/registry"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// The tamper cases of issue 12 (each audited clean before digest chains, artifact
// read-back, refused inputs and the header comparison), on streams written with the
// services' own stages: every job is rendered (Kind.Render) and gated (Kind.Gate) by its
// kind's code over artifacts in a real file blob store, and each stage's output carries
// the digest chain the bus gives it.

// stage publishes what a pipeline stage derives from the recorded event cause, with the
// chain the bus sets on it (bus.RouterConfig.Chain).
func (f *fixture) stage(cause audit.Recorded, p events.Payload) audit.Recorded {
	f.t.Helper()
	ev := events.New(p, cause.Event.Tenant, cause.Event.BatchID, cause.Event.JobID, cause.Event.Iteration, "", &cause.Event.Envelope)
	ev.Chain = events.ChainOf(cause.Event.Envelope, cause.SHA256)
	return f.publish(ev)
}

// upload stores an artifact as `tribunal submit` does and returns it as a source.
func (f *fixture) upload(name, content, mediaType string) events.Source {
	f.t.Helper()
	a, err := blob.PutBytes(context.Background(), f.store, f.tenant, []byte(content), mediaType)
	if err != nil {
		f.t.Fatal(err)
	}
	return events.Source{Name: name, Blob: &events.Blob{SHA256: a.Ref.SHA256, MediaType: a.MediaType, Size: a.Size}}
}

// stagedJob runs an ab job through every stage: uploaded, submitted, rendered, gated and
// judged (raw winner raw), the aggregator deciding.
func (f *fixture) stagedJob(id string, index, size int, raw string, confidence float64) {
	f.t.Helper()
	ctx := context.Background()
	spec := events.JobSpec{Kind: events.KindAB, ACID: id, Criterion: "the notes are clear", KindPart: &ab.Spec{
		Ours:      f.upload("ours/"+id+".md", "# Notes\nOur build of "+id+".\n", "text/markdown"),
		Reference: f.upload("ref/"+id+".md", "# Notes\nThe target of "+id+".\n", "text/markdown"), Threshold: 0.75}}
	sub := events.New(&events.JobSubmitted{Spec: spec, Index: index, BatchSize: size, BatchSource: "batch.yaml"}, f.tenant, f.batch, id, 0, "", nil)
	f.in(sub)
	req := f.recs[f.find(events.TypeRenderRequested, id)]
	k, err := registry.Lookup(events.KindAB)
	if err != nil {
		f.t.Fatal(err)
	}
	done, err := k.Render(ctx, &stage.RenderEnv{Store: f.store}, req.Event, spec)
	if err != nil || done.Blocked != "" {
		f.t.Fatalf("render %s: %v %s", id, err, done.Blocked)
	}
	rd := f.stage(req, done)
	gated, err := k.Gate(ctx, &stage.GateEnv{Store: f.store}, rd.Event, done)
	if err != nil {
		f.t.Fatal(err)
	}
	gd := f.stage(rd, gated)
	votes := []events.Vote{{Judge: events.JudgeInfo{Provider: "scripted", Model: "m", Call: f.keepCall(id, raw)}, Order: "AB", Status: "ok",
		RawWinner: raw, Confidence: confidence, BiggestGap: "the headings"}}
	v := events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: votes}, f.tenant, f.batch, id, 0, "", &gd.Event.Envelope)
	v.Chain = events.ChainOf(gd.Event.Envelope, gd.SHA256)
	f.in(v)
}

// staged is an honest two-job batch that went through every stage.
func staged(t *testing.T) *fixture {
	f := newFixture(t)
	f.stagedJob("AC-1", 0, 2, ab.Assign("AC-1", 0).Label(ab.WinnerReference), 0.9)
	f.stagedJob("AC-2", 1, 2, "tie", 0.4)
	return f
}

// drop deletes recorded event i from the stream.
func (f *fixture) drop(i int) { f.recs = append(f.recs[:i], f.recs[i+1:]...) }

// blobPath is where the file store keeps an object of the fixture's tenant.
func (f *fixture) blobPath(sha string) string {
	return filepath.Join(f.dir, f.tenant, "sha256", sha[:2], sha)
}

// header is the batch header the aggregator would have written for the fixture's batch.
func (f *fixture) header() *records.Batch {
	h := f.agg.Header(f.tenant, f.batch)
	h.Completion = f.completion
	return h
}

func TestAuditStagedBatchIsClean(t *testing.T) {
	f := staged(t)
	rep := f.audit()
	audit.CheckState(&rep, f.header(), f.agg.Jobs(f.tenant, f.batch))
	if !rep.OK() || len(rep.Unverified) != 0 {
		t.Fatalf("honest staged batch:%s", dump(rep))
	}
	// Every job's record chains its submission, the three stages and its verdict.
	for _, j := range f.agg.Jobs(f.tenant, f.batch) {
		if len(j.Inputs) != 5 {
			t.Fatalf("job %s chains %d events, want 5: %v", j.ACID, len(j.Inputs), j.Inputs)
		}
	}
}

// TestAuditDeletedStage: deleting render.done or gates.done, the record of what the judge
// saw, leaves the later stages' chains naming an event the stream no longer holds.
func TestAuditDeletedStage(t *testing.T) {
	for _, typ := range []events.Type{events.TypeRenderDone, events.TypeGatesDone} {
		t.Run(string(typ), func(t *testing.T) {
			f := staged(t)
			i := f.find(typ, "AC-1")
			gone := f.recs[i].Event
			f.drop(i)
			rep := f.audit()
			if !has(rep, func(m audit.Mismatch) bool {
				return m.Kind == audit.KindMissing && m.Job == "AC-1" && m.FromID == gone.ID && m.FromType == typ &&
					strings.HasPrefix(m.Field, "envelope.chain[") && strings.Contains(m.Detail, "is not on the stream")
			}) {
				t.Fatalf("deleted %s not reported:%s", typ, dump(rep))
			}
		})
	}
}

// TestAuditAlteredStage: a render.done rewritten after the gates and the judge used it no
// longer hashes to the link their chains recorded.
func TestAuditAlteredStage(t *testing.T) {
	f := staged(t)
	i := f.find(events.TypeRenderDone, "AC-2")
	f.rewrite(i, func(ev *events.Event) {
		p := *ev.Payload.(*events.RenderDone)
		p.Spec.Criterion = "anything goes"
		ev.Payload = &p
	})
	rep := f.audit()
	if !has(rep, func(m audit.Mismatch) bool {
		return m.Kind == audit.KindMismatch && m.Job == "AC-2" && m.FromID == f.recs[i].Event.ID && m.FromType == events.TypeRenderDone &&
			m.Recorded == f.recs[i].SHA256 && strings.HasPrefix(m.Field, "envelope.chain[")
	}) {
		t.Fatalf("altered render.done not reported:%s", dump(rep))
	}
}

// TestAuditEditedOrDeletedArtifact: every blob a render and its gates recorded is read
// back: an edited one no longer hashes to its address, a deleted one is gone; each is
// named by where the event records it.
func TestAuditEditedOrDeletedArtifact(t *testing.T) {
	f := staged(t)
	rd := f.recs[f.find(events.TypeRenderDone, "AC-1")]
	arts := rd.Event.Payload.(*events.RenderDone).Artifacts
	edited, deleted := arts["ours"].Blob.SHA256, arts["reference"].Blob.SHA256
	if err := os.WriteFile(f.blobPath(edited), []byte("# Notes\nSomething else entirely.\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(f.blobPath(deleted)); err != nil {
		t.Fatal(err)
	}
	rep := f.audit()
	for _, c := range []struct{ sha, field, detail string }{
		{edited, "artifacts.ours.blob", "digest mismatch"},
		{deleted, "artifacts.reference.blob", "not found"},
	} {
		if !has(rep, func(m audit.Mismatch) bool {
			return m.Kind == audit.KindUnreadable && m.Job == "AC-1" && m.EventType == events.TypeRenderDone && m.Recorded == c.sha &&
				m.Field == c.field && strings.Contains(m.Detail, c.detail)
		}) {
			t.Fatalf("artifact %s (%s) not reported:%s", c.sha, c.detail, dump(rep))
		}
		if !has(rep, func(m audit.Mismatch) bool {
			return m.Kind == audit.KindUnreadable && m.EventType == events.TypeGatesDone && m.Recorded == c.sha && strings.HasPrefix(m.Field, "slots[")
		}) {
			t.Fatalf("artifact %s not reported at the gates:%s", c.sha, dump(rep))
		}
	}
}

// TestAuditEditedMediaType: the file driver keeps a media type in the object's .meta
// file; one edited there is no longer the media type the submission recorded.
func TestAuditEditedMediaType(t *testing.T) {
	f := staged(t)
	ours := ab.SpecOf(f.recs[f.find(events.TypeRenderDone, "AC-2")].Event.Payload.(*events.RenderDone).Spec.KindPart).Ours.Blob
	path := f.blobPath(ours.SHA256) + ".meta"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), "text/markdown", "text/html", 1)), 0o640); err != nil {
		t.Fatal(err)
	}
	rep := f.audit()
	if !has(rep, func(m audit.Mismatch) bool {
		return m.Kind == audit.KindMismatch && m.Job == "AC-2" && m.EventType == events.TypeRenderDone &&
			m.Field == "spec.ab.ours.blob.media_type" && m.Recorded == "text/html" && m.Derived == "text/markdown"
	}) {
		t.Fatalf("edited media type not reported:%s", dump(rep))
	}
}

// TestAuditReplacedBatchHeader: the batch header in the key-value state is what
// `tribunal results` and the console believe; each field that no longer says what the
// events decided is reported, a header without its completion first of all.
func TestAuditReplacedBatchHeader(t *testing.T) {
	f := staged(t)
	cases := []struct {
		name   string
		change func(h *records.Batch, jobs []*records.Job) []*records.Job
		kind   audit.MismatchKind
		field  string
	}{
		{"completion removed", func(h *records.Batch, jobs []*records.Job) []*records.Job { h.Completion = nil; return jobs }, audit.KindMissing, "completion"},
		{"size", func(h *records.Batch, jobs []*records.Job) []*records.Job { h.Size = 3; return jobs }, audit.KindMismatch, "size"},
		{"source", func(h *records.Batch, jobs []*records.Job) []*records.Job { h.Source = "other.yaml"; return jobs }, audit.KindMismatch, "source"},
		{"summary", func(h *records.Batch, jobs []*records.Job) []*records.Job {
			c := *h.Completion
			c.Summary.Suggestions = 0
			h.Completion = &c
			return jobs
		}, audit.KindMismatch, "completion.summary.suggestions"},
		{"digest", func(h *records.Batch, jobs []*records.Job) []*records.Job {
			c := *h.Completion
			c.Digest = strings.Repeat("0", 64)
			h.Completion = &c
			return jobs
		}, audit.KindMismatch, "completion.digest"},
		{"attempt", func(h *records.Batch, jobs []*records.Job) []*records.Job {
			c := *h.Completion
			c.Attempt = 1
			h.Completion = &c
			return jobs
		}, audit.KindMismatch, "completion.attempt"},
		{"manifests", func(h *records.Batch, jobs []*records.Job) []*records.Job {
			c := *h.Completion
			c.Manifests = map[events.Kind]events.Blob{events.KindAB: {SHA256: strings.Repeat("1", 64), MediaType: "application/json", Size: 2}}
			h.Completion = &c
			return jobs
		}, audit.KindMismatch, "completion.manifests.ab.sha256"},
		{"kinds", func(h *records.Batch, jobs []*records.Job) []*records.Job {
			c := *h.Completion
			c.Kinds = map[events.Kind]int{events.KindAB: 3}
			h.Completion = &c
			return jobs
		}, audit.KindMismatch, "completion.kinds.ab"},
		{"judges", func(h *records.Batch, jobs []*records.Job) []*records.Job {
			c := *h.Completion
			c.Judges = []string{"scripted/m", "openai/gpt-x"}
			h.Completion = &c
			return jobs
		}, audit.KindMismatch, "completion.judges"},
		{"index gone", func(h *records.Batch, jobs []*records.Job) []*records.Job {
			c := *h.Completion
			c.Index = &events.Blob{SHA256: strings.Repeat("2", 64), MediaType: index.MediaType, Size: 10}
			h.Completion = &c
			return jobs
		}, audit.KindUnreadable, "completion.index"},
		{"plan", func(h *records.Batch, jobs []*records.Job) []*records.Job {
			h.Plan = &records.Plan{Digest: strings.Repeat("3", 64)}
			return jobs
		}, audit.KindMismatch, "plan"},
		{"cancel", func(h *records.Batch, jobs []*records.Job) []*records.Job {
			h.Cancel = &records.Cancel{By: "mallory", Event: "x"}
			return jobs
		}, audit.KindMismatch, "cancel"},
		{"redrive", func(h *records.Batch, jobs []*records.Job) []*records.Job {
			h.Redrive = &records.Redrive{Attempt: 1, Pending: []string{"AC-2"}}
			return jobs
		}, audit.KindMismatch, "redrive"},
		{"header deleted", func(h *records.Batch, jobs []*records.Job) []*records.Job { *h = records.Batch{}; return jobs }, audit.KindMissing, "header"},
		{"job record deleted", func(h *records.Batch, jobs []*records.Job) []*records.Job { return jobs[:1] }, audit.KindMissing, "record"},
		{"job record rewritten", func(h *records.Batch, jobs []*records.Job) []*records.Job {
			jobs[1].BlockReason = "blocked after all"
			return jobs
		}, audit.KindMismatch, "block_reason"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := f.audit()
			h := f.header()
			jobs := c.change(h, f.agg.Jobs(f.tenant, f.batch))
			if h.Batch == "" {
				h = nil
			}
			audit.CheckState(&rep, h, jobs)
			if !has(rep, func(m audit.Mismatch) bool {
				return m.Kind == c.kind && m.Batch == f.batch && m.Field == c.field &&
					(m.EventType == "batch header" || m.EventType == "job record")
			}) {
				t.Fatalf("no %s %s finding:%s", c.kind, c.field, dump(rep))
			}
		})
	}
}

// forgedDeadLetter publishes ev as the aggregator's dead letter of an event another team
// published on subject (its own): the router refuses an envelope that contradicts its
// subject and dead-letters it, keeping the original subject. vulnerable makes the
// aggregator act on it anyway, as it did before the rules checked a dead letter's origin,
// and publishes what it derived.
func (f *fixture) forgedDeadLetter(ev events.Event, subject string, vulnerable bool) audit.Recorded {
	f.t.Helper()
	r := f.publishOn(events.DeadLetterSubject("aggregator"), ev, "dlq-aggregator-"+ev.ID, "event claims another tenant")
	r.OriginalSubject = subject
	f.recs[len(f.recs)-1] = r
	if vulnerable {
		f.apply(r, rulebook.Input{Event: ev, Link: link(r), DeadLetter: &rulebook.DeadLetter{Service: "aggregator", Reason: r.Reason}})
	}
	return r
}

// TestAuditForgedBlock: team-x publishes, on its own subject, a verdict naming team-a's
// pending AC; its dead letter must not block the AC. The audit names the refused input
// and who sent it, without a finding against team-a's batch (a failed attack leaves the
// victim's audit clean); had the aggregator acted on it, the outcome it derived is a
// finding naming the refused input.
func TestAuditForgedBlock(t *testing.T) {
	forgedVariants(t, func(t *testing.T, vulnerable bool) {
		f := newFixture(t)
		f.stagedJob("AC-1", 0, 2, "tie", 0.4)
		forged := events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{{Judge: events.JudgeInfo{Provider: "x", Model: "x"},
			Order: "AB", Status: "ok", RawWinner: "A", Confidence: 1, BiggestGap: "x"}}}, f.tenant, f.batch, "AC-2", 0, "forged", nil)
		f.in(events.New(&events.JobSubmitted{Spec: abSpec("AC-2"), Index: 1, BatchSize: 2}, f.tenant, f.batch, "AC-2", 0, "", nil))
		dl := f.forgedDeadLetter(forged, "tribunal.team-x.verdict.emitted", vulnerable)
		if !vulnerable {
			f.abJobVerdict("AC-2", "A", 0.9)
		}
		rep := f.audit()
		if !refused(rep, func(r audit.Refused) bool {
			return r.Job == "AC-2" && r.Seq == dl.Seq && r.Subject == "tribunal.team-x.verdict.emitted" && r.From == "team-x" &&
				r.DeadLetter == "aggregator" && r.Reason == events.OriginTenant
		}) {
			t.Fatalf("forged dead letter not reported:%s", dump(rep))
		}
		if !vulnerable && !rep.OK() {
			t.Fatalf("a refused dead letter is a finding against the batch it names:%s", dump(rep))
		}
		if vulnerable && !has(rep, func(m audit.Mismatch) bool {
			return m.Kind == audit.KindUnexplained && m.Job == "AC-2" && m.EventType == events.TypeJobBlocked && m.FromID == forged.ID
		}) {
			t.Fatalf("the block derived from the forged dead letter not reported:%s", dump(rep))
		}
	})
}

// forgedVariants runs test with a forged dead letter the aggregator refuses, as the rules
// do now, and with one it acted on, as it did before.
func forgedVariants(t *testing.T, test func(t *testing.T, vulnerable bool)) {
	t.Run("refused", func(t *testing.T) { test(t, false) })
	t.Run("acted on", func(t *testing.T) { test(t, true) })
}

// abJobVerdict records the judge's answer for a submitted ab job (no stages).
func (f *fixture) abJobVerdict(id, raw string, confidence float64) {
	votes := []events.Vote{{Judge: events.JudgeInfo{Provider: "scripted", Model: "m"}, Order: "AB", Status: "ok", RawWinner: raw, Confidence: confidence, BiggestGap: "the headings"}}
	f.in(events.New(&events.VerdictEmitted{Kind: events.KindAB, Votes: votes}, f.tenant, f.batch, id, 0, "", nil))
}

// TestAuditForgedBatch: team-x publishes, on its own subject, a job.submitted naming a
// batch of team-a's; its dead letter must not create the batch. The audit of that batch
// names the refused submission (no finding: nothing was created), and, had the
// aggregator acted on it, reports every record and announcement of the fake batch.
func TestAuditForgedBatch(t *testing.T) {
	forgedVariants(t, func(t *testing.T, vulnerable bool) {
		f := newFixture(t)
		f.batch = "forged-1"
		sub := events.New(&events.JobSubmitted{Spec: abSpec("AC-1"), Index: 0, BatchSize: 1}, f.tenant, f.batch, "AC-1", 0, "", nil)
		dl := f.forgedDeadLetter(sub, "tribunal.team-x.job.submitted", vulnerable)
		rep := f.audit()
		if !refused(rep, func(r audit.Refused) bool {
			return r.Batch == "forged-1" && r.Seq == dl.Seq && r.Subject == "tribunal.team-x.job.submitted" && r.From == "team-x" &&
				strings.Contains(r.String(), "tribunal.team-x.job.submitted")
		}) {
			t.Fatalf("forged submission not reported:%s", dump(rep))
		}
		if !vulnerable {
			if !rep.OK() {
				t.Fatalf("a refused dead letter is a finding against the batch it names:%s", dump(rep))
			}
			return
		}
		for _, typ := range []events.Type{events.TypeJobBlocked, events.TypeManifestEmitted, events.TypeBatchCompleted} {
			if !has(rep, func(m audit.Mismatch) bool { return m.Kind == audit.KindUnexplained && m.EventType == typ }) {
				t.Fatalf("the fake batch's %s not reported:%s", typ, dump(rep))
			}
		}
		if !has(rep, func(m audit.Mismatch) bool { return m.EventType == events.TypeJobBlocked && m.FromID == sub.ID }) {
			t.Fatalf("the fake block does not name the refused submission:%s", dump(rep))
		}
	})
}

// TestAuditChainWithoutItsCause: a chain must end with the event its holder was derived
// from.
func TestAuditChainWithoutItsCause(t *testing.T) {
	f := staged(t)
	i := f.find(events.TypeGatesDone, "AC-2")
	f.rewrite(i, func(ev *events.Event) { ev.Chain = ev.Chain[:1] })
	rep := f.audit()
	if !has(rep, func(m audit.Mismatch) bool {
		return m.Kind == audit.KindMismatch && m.Job == "AC-2" && m.EventType == events.TypeGatesDone && m.Field == "envelope.chain"
	}) {
		t.Fatalf("a chain cut short not reported:%s", dump(rep))
	}
}

// TestAuditReportJSONNamesRefusals: the report's JSON form names the refused inputs.
func TestAuditReportJSONNamesRefusals(t *testing.T) {
	f := newFixture(t)
	f.batch = "forged-2"
	f.forgedDeadLetter(events.New(&events.JobSubmitted{Spec: abSpec("AC-1"), Index: 0, BatchSize: 1}, f.tenant, f.batch, "AC-1", 0, "", nil),
		"tribunal.team-x.job.submitted", false)
	rep := f.audit()
	data, err := json.Marshal(rep)
	if err != nil || !strings.Contains(string(data), `"refused":[{`) || !strings.Contains(string(data), `"from":"team-x"`) {
		t.Fatalf("%s, %v", data, err)
	}
}

func refused(rep audit.Report, pred func(audit.Refused) bool) bool {
	for _, r := range rep.Refused {
		if pred(r) {
			return true
		}
	}
	return false
}

// TestAuditGatedTwice: a pass gated twice, once passed and once failed, is a duplicate
// naming both decisions and where the first is (what the audit keeps of each pass's
// first gating decision is one word: its place and whether it failed).
func TestAuditGatedTwice(t *testing.T) {
	f := staged(t)
	i := f.find(events.TypeGatesDone, "AC-1")
	first := f.recs[i]
	rd := f.recs[f.find(events.TypeRenderDone, "AC-1")]
	second := f.stage(rd, &events.GatesFailed{Kind: events.KindAB, ACID: "AC-1", Blocked: "the page did not load"})
	rep := f.audit()
	want := fmt.Sprintf("the gater decided this iteration twice: %s (seq %d) and %s", events.TypeGatesDone, first.Seq, events.TypeGatesFailed)
	if !has(rep, func(m audit.Mismatch) bool {
		return m.Kind == audit.KindDuplicate && m.Seq == second.Seq && m.Detail == want
	}) {
		t.Fatalf("the second gating decision (seq %d) is not reported as %q:%s", second.Seq, want, dump(rep))
	}
}
