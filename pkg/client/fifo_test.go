//go:build unix

package client

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/critic"
	"github.com/tribunal-dev/tribunal/pkg/kind/equivalence"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/fifotest"
	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// TestSubmitRefusesFIFOs: a FIFO in the batch folder, named as an artifact, a cases file
// or a feature's spec, used to block `tribunal run` and `submit` forever in open (a
// SIGTERM could not end it). Each is refused with the reason naming it, the other ACs
// go on, and the submission returns well within its deadline.
func TestSubmitRefusesFIFOs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ref.md", "# Notes\nThe target.\n")
	write("ours.md", "# Notes\nOurs.\n")
	write("skill/original.md", "Do the thing.\n")
	write("skill/candidate.md", "Do it.\n")
	fifotest.Make(t, filepath.Join(dir, "pipe.md"))
	fifotest.Make(t, filepath.Join(dir, "skill/cases.yaml"))
	fifotest.Make(t, filepath.Join(dir, "feature/spec.json"))
	write("batch.yaml", `version: 1
acs:
  - id: AC-1
    criterion: c
    ours: pipe.md
    reference: ref.md
  - id: AC-2
    criterion: c
    ours: ours.md
    reference: ref.md
  - id: AC-3
    kind: critic
    task: Summarise.
    output_file: pipe.md
  - id: AC-4
    kind: equivalence
    original: skill/original.md
    candidate: skill/candidate.md
    cases_file: skill/cases.yaml
  - id: AC-5
    kind: rubric
    spec: feature/spec.json
`)
	b, err := batch.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, _, js := natstest.Provisioned(t, bus.Config{Memory: true})
	store := tempStore(t)
	s := &Submitter{Pub: bus.NewPublisher(js), Store: store}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type result struct {
		sub Submission
		err error
	}
	done := make(chan result, 1)
	go func() {
		sub, err := s.Submit(ctx, b, "default", "fifo-batch")
		done <- result{sub, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Submit still blocked after 15 s: a FIFO in the batch folder was opened")
	}
	if r.err != nil || r.sub.Jobs != 5 {
		t.Fatalf("Submit = %+v, %v; want 5 jobs", r.sub, r.err)
	}
	specs := submittedSpecs(t, js, 5)
	const fifo = "is a named pipe (FIFO), not a regular file"
	for job, got := range map[string]string{
		"AC-1": ab.SpecOf(specs["AC-1"].KindPart).Ours.Error,
		"AC-3": critic.SpecOf(specs["AC-3"].KindPart).Output.Error,
		"AC-4": equivalence.SpecOf(specs["AC-4"].KindPart).Original.Error,
		"AC-5": rubricwire.SpecOf(specs["AC-5"].KindPart).Blocked,
	} {
		if !strings.Contains(got, fifo) {
			t.Errorf("%s: reason %q; want it to say the path %s", job, got, fifo)
		}
	}
	if got := ab.SpecOf(specs["AC-1"].KindPart).Ours.Error; !strings.Contains(got, "pipe.md") {
		t.Errorf("AC-1 reason %q does not name pipe.md", got)
	}
	if a := ab.SpecOf(specs["AC-2"].KindPart); a.Ours.Blob == nil || a.Reference.Blob == nil {
		t.Errorf("AC-2, with regular files, was not uploaded: %+v", a)
	}
}

// submittedSpecs reads the n job.submitted events of the stream, by job.
func submittedSpecs(t *testing.T, js jetstream.JetStream, n int) map[string]events.JobSpec {
	t.Helper()
	out := map[string]events.JobSpec{}
	for _, m := range natstest.SubjectMsgs(t, js, "tribunal.default.job.submitted") {
		ev, err := events.Decode(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		out[ev.JobID] = ev.Payload.(*events.JobSubmitted).Spec
	}
	if len(out) != n {
		t.Fatalf("%d jobs submitted, want %d", len(out), n)
	}
	return out
}
