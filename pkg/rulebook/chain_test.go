package rulebook_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/views"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// link is a made-up link of an upstream event of job.
func link(typ events.Type, job string, n int) string {
	return events.Link(events.NewID(typ, tenant, batch, job, 0, ""), strings.Repeat(string(rune('a'+n)), 64))
}

// TestDecisionChainsTheStages: a decision's job record chains the stages its input passed
// through (the input's Chain) before the input itself, once each, so the digest a
// manifest or sign-off carries covers render.requested, render.done and gates.done.
func TestDecisionChainsTheStages(t *testing.T) {
	stages := []string{link(events.TypeRenderRequested, "AC-1", 0), link(events.TypeRenderDone, "AC-1", 1), link(events.TypeGatesDone, "AC-1", 2)}
	sub := in(submit(abSpec("AC-1"), 0, 1))
	withChain := func(e events.Event, chain ...string) events.Event { e.Chain = chain; return e }
	failed := events.New(&events.GatesFailed{Kind: events.KindAB, ACID: "AC-1", Blocked: "missing artifact"}, tenant, batch, "AC-1", 0, "", nil)
	cases := []struct {
		name  string
		input rulebook.Input
		want  []string
	}{
		{"verdict", in(withChain(abVerdict("AC-1", "A", 0.9, 0), stages...)), append(append([]string{sub.Link}, stages...), "")},
		{"failed gates", in(withChain(failed, stages[:2]...)), append(append([]string{sub.Link}, stages[:2]...), "")},
		{"dead-lettered verdict", func() rulebook.Input {
			i := in(withChain(abVerdict("AC-1", "A", 0.9, 0), stages...))
			i.DeadLetter = &rulebook.DeadLetter{Service: "aggregator", Reason: "gave up"}
			return i
		}(), append(append([]string{sub.Link}, stages...), "")},
		{"verdict written before chains", in(abVerdict("AC-1", "A", 0.9, 0)), []string{sub.Link, ""}},
		{"a link already chained", in(withChain(abVerdict("AC-1", "A", 0.9, 0), sub.Link, stages[0])), []string{sub.Link, stages[0], ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := append([]string(nil), c.want...)
			want[len(want)-1] = c.input.Link
			res, err := rulebook.Apply(rulebook.State{Job: pending(t, abSpec("AC-1"))}, c.input)
			if err != nil || res.Job == nil || !res.Job.Final() {
				t.Fatalf("%+v, %v", res.Job, err)
			}
			if got := strings.Join(res.Job.Inputs, " "); got != strings.Join(want, " ") {
				t.Fatalf("inputs\n %s\nwant\n %s", got, strings.Join(want, " "))
			}
		})
	}
	// Without the input's own bytes nothing is chained, the chain it carries included.
	bare := in(withChain(abVerdict("AC-1", "A", 0.9, 0), stages...))
	bare.Link = ""
	if res, err := rulebook.Apply(rulebook.State{Job: pending(t, abSpec("AC-1"))}, bare); err != nil || len(res.Job.Inputs) != 1 {
		t.Fatalf("an input without a link: %+v, %v", res.Job, err)
	}
}

// TestSignoffDigestCoversTheStages: a rubric sign-off's digest is chained over the stages
// of the verdict that signed it off too.
func TestSignoffDigestCoversTheStages(t *testing.T) {
	spec := viewSpec(events.ModeHeadless)
	st := rulebook.State{Job: pending(t, spec), KindState: viewState(&views.Record{}, argus.DefaultRubric())}
	res, err := rulebook.Apply(st, in(rubricVote(t, spec.ACID, 0, true)))
	if err != nil {
		t.Fatal(err)
	}
	second := rubricVote(t, spec.ACID, 1, true)
	second.Chain = []string{link(events.TypeRenderRequested, spec.ACID, 3), link(events.TypeRenderDone, spec.ACID, 4), link(events.TypeGatesDone, spec.ACID, 5)}
	res, err = rulebook.Apply(rulebook.State{Job: res.Job, KindState: viewState(recordOf(res.KindState), argus.DefaultRubric())}, in(second))
	if err != nil || res.Job.Status != events.StatusSignedOff {
		t.Fatalf("%+v, %v", res.Job, err)
	}
	for _, l := range second.Chain {
		if !strings.Contains(strings.Join(res.Job.Inputs, " "), l) {
			t.Fatalf("inputs %v lack %s", res.Job.Inputs, l)
		}
	}
	for _, e := range res.Publish {
		if so, ok := e.Payload.(*events.SignoffRecorded); ok {
			if so.Digest != records.ChainDigest(res.Job.Inputs) {
				t.Fatalf("sign-off digest %s, want the chain over %v", so.Digest, res.Job.Inputs)
			}
			return
		}
	}
	t.Fatal("no sign-off published")
}

// TestMemoryKeepsRecordsAsStored: Memory keeps records encoded (compressed once a final
// record gives it a dictionary) and hands each back exactly as the rules produced it,
// pending ones stored before the dictionary existed as well as later ones, starting no
// goroutine of its own.
func TestMemoryKeepsRecordsAsStored(t *testing.T) {
	before := runtime.NumGoroutine()
	m := &rulebook.Memory{}
	want := map[string][]byte{}
	keep := func(res rulebook.Applied, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if res.Job != nil {
			data, _ := json.Marshal(res.Job)
			want[res.Job.ACID] = data
		}
	}
	const n = 50
	for i := 0; i < n; i++ {
		keep(m.Apply(in(submit(abSpec(fmt.Sprintf("AC-%d", i)), i, n))))
	}
	for i := 0; i < n; i++ {
		keep(m.Apply(in(abVerdict(fmt.Sprintf("AC-%d", i), "A", 0.9, 0))))
		if i == n/2 {
			for id, data := range want {
				if got := m.JobJSON(tenant, batch, id); !bytes.Equal(got, data) {
					t.Fatalf("%s half way: %s, want %s", id, got, data)
				}
			}
		}
	}
	for id, data := range want {
		if got := m.JobJSON(tenant, batch, id); !bytes.Equal(got, data) {
			t.Fatalf("%s: %s, want %s", id, got, data)
		}
		if j := m.Job(tenant, batch, id); j == nil || !j.Final() {
			t.Fatalf("%s decodes to %+v", id, j)
		}
	}
	if jobs := m.Jobs(tenant, batch); len(jobs) != n || jobs[0].ACID != "AC-0" {
		t.Fatalf("%d jobs", len(jobs))
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("%d goroutines before, %d after", before, after)
	}
}

// TestCompleteHashedIsComplete: the audit's completion (manifests hashed, not held) is the
// aggregator's completion, and the compact manifests it hands over are the stored ones.
func TestCompleteHashedIsComplete(t *testing.T) {
	run := func() *rulebook.Completion {
		m := &rulebook.Memory{}
		var done *rulebook.Completion
		for i := 0; i < 3; i++ {
			if _, err := m.Apply(in(submit(abSpec(fmt.Sprintf("AC-%d", i)), i, 3))); err != nil {
				t.Fatal(err)
			}
		}
		for i, raw := range []string{"A", "B", "tie"} {
			res, err := m.Apply(in(abVerdict(fmt.Sprintf("AC-%d", i), raw, 0.9, 0)))
			if err != nil {
				t.Fatal(err)
			}
			if res.Complete != nil {
				done = res.Complete
			}
		}
		return done
	}
	full, err := run().Fold().Complete("AC-2", 0)
	if err != nil {
		t.Fatal(err)
	}
	compact := map[events.Kind]*bytes.Buffer{}
	hashed, err := run().Fold().CompleteHashed("AC-2", 0, func(k events.Kind) io.Writer {
		compact[k] = &bytes.Buffer{}
		return compact[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(full.Completion)
	b, _ := json.Marshal(hashed)
	if !bytes.Equal(a, b) {
		t.Fatalf("hashed completion\n%s\nwant\n%s", b, a)
	}
	var plain, got bytes.Buffer
	if err := json.Compact(&plain, full.Manifests[events.KindAB]); err != nil {
		t.Fatal(err)
	}
	if err := json.Compact(&got, compact[events.KindAB].Bytes()); err != nil || !bytes.Equal(got.Bytes(), plain.Bytes()) {
		t.Fatalf("compact manifest %s, want %s", compact[events.KindAB], plain.Bytes())
	}
}
