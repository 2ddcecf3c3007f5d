package rulebook_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/critic"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
	"github.com/tribunal-dev/tribunal/pkg/spillsort"
)

var updateFold = flag.Bool("update-fold-golden", false, "rewrite testdata/fold.golden.json from the fold as it is")

// foldJobs decides n jobs of a batch, ab and critic mixed, with verdicts that route to
// suggestions and some that do not, AC ids whose natural order is not their byte order,
// and two thresholds (the last folded ab job's is the manifest's), returned shuffled.
func foldJobs(t testing.TB, n int) []*records.Job {
	t.Helper()
	var jobs []*records.Job
	for i := 0; i < n; i++ {
		jobs = append(jobs, foldJob(t, i, n))
	}
	r := rand.New(rand.NewPCG(7, 9))
	r.Shuffle(len(jobs), func(a, b int) { jobs[a], jobs[b] = jobs[b], jobs[a] })
	return jobs
}

// foldJob is the i-th of foldJobs' n jobs.
func foldJob(t testing.TB, i, n int) *records.Job {
	t.Helper()
	var spec events.JobSpec
	var v *events.VerdictEmitted
	id := fmt.Sprintf("AC-%d", i*7%n)
	switch {
	case i%5 == 4:
		id = fmt.Sprintf("C-%03d", i)
		spec = events.JobSpec{Kind: events.KindCritic, ACID: id, KindPart: &critic.Spec{Task: "t", Output: events.Source{Name: "o", URL: "https://x"}}}
		q := i % 10
		v = &events.VerdictEmitted{Kind: events.KindCritic, KindPart: &critic.Vote{Judge: events.JudgeInfo{Provider: "p", Model: "m"}, Status: events.VoteOK,
			Correctness: i % 11, Slop: i % 3, Scope: 9, Rationale: fmt.Sprintf("rationale %d", i), ClaimedVerdict: []string{"pass", "revise"}[i%2], ClaimedQuality: &q}}
	default:
		spec = abSpec(id)
		if i%3 == 0 {
			spec.KindPart.(*ab.Spec).Threshold = 0.6
		}
		v = &events.VerdictEmitted{Kind: events.KindAB, Votes: []events.Vote{{Judge: events.JudgeInfo{Provider: "scripted", Model: "m"},
			Order: "AB", Status: events.VoteOK, RawWinner: []string{"A", "B", "tie"}[i%3], Confidence: []float64{0.3, 0.62, 0.8, 0.97}[i%4],
			BiggestGap: fmt.Sprintf("gap of <%d> & \"more\"", i)}}}
	}
	res, err := rulebook.Apply(rulebook.State{Now: t0}, in(submit(spec, i, n)))
	if err != nil || res.Job == nil {
		t.Fatalf("submit %s: %+v %v", id, res, err)
	}
	e := events.New(v, tenant, batch, id, 0, "", nil)
	e.Time = t0.Add(time.Duration(i) * time.Millisecond)
	res, err = rulebook.Apply(rulebook.State{Job: res.Job, Now: t0}, in(e))
	if err != nil || res.Job == nil || !res.Job.Final() {
		t.Fatalf("verdict %s: %+v %v", id, res, err)
	}
	return res.Job
}

// foldGolden is what a completion of foldJobs is: its record (the manifests' and the
// index's digests and sizes in it) and the ab manifest's first bytes, to read.
type foldGolden struct {
	Completion records.Completion `json:"completion"`
	Head       string             `json:"ab_manifest_head"`
}

// TestFoldIsItsGolden: the completion of 3,000 jobs folded in a shuffled order is byte for
// byte the golden recorded before the fold wrote its rows out (commit f6ced55): the same
// manifests, index and digest, whether the rows stay in memory or are spilled in many
// runs, through Complete, CompleteStored and CompleteHashed. The index's ref alone was
// recorded again since, when its stored form became chunks in batch order (v5).
func TestFoldIsItsGolden(t *testing.T) {
	jobs := foldJobs(t, 3000)
	path := filepath.Join("testdata", "fold.golden.json")
	for _, buffer := range []int{spillsort.DefaultBuffer, 16 << 10} {
		t.Run(fmt.Sprint(buffer), func(t *testing.T) {
			defer func(b int) { spillsort.DefaultBuffer = b }(spillsort.DefaultBuffer)
			spillsort.DefaultBuffer = buffer
			spilled := spillsort.Written()
			fold := func() *rulebook.Fold {
				f := rulebook.NewFold(tenant, batch)
				f.KeepIndex()
				for _, j := range jobs {
					f.Add(j)
				}
				return f
			}
			full, err := fold().Complete("AC-1", 0)
			if err != nil {
				t.Fatal(err)
			}
			got := foldGolden{Completion: full.Completion, Head: string(full.Manifests[events.KindAB][:600])}
			data, err := json.MarshalIndent(got, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if *updateFold {
				if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(append(data, '\n'), want) {
				t.Fatalf("completion\n%s\nwant the golden\n%s", data, want)
			}
			stored, err := fold().CompleteStored("AC-1", 0, func(mediaType string, r io.Reader) (events.Blob, error) {
				b, err := io.ReadAll(r)
				return events.Blob{SHA256: sha256Hex(b), Size: int64(len(b))}, err
			})
			if err != nil {
				t.Fatal(err)
			}
			hashed, err := fold().CompleteHashed("AC-1", 0, func(events.Kind) io.Writer { return io.Discard })
			if err != nil {
				t.Fatal(err)
			}
			a, _ := json.Marshal(full.Completion)
			for name, c := range map[string]records.Completion{"stored": stored.Completion, "hashed": hashed} {
				if name == "hashed" {
					c.Index = full.Completion.Index // the audit keeps no index
				}
				if b, _ := json.Marshal(c); !bytes.Equal(a, b) {
					t.Fatalf("%s completion\n%s\nwant\n%s", name, b, a)
				}
			}
			if n := spillsort.Written() - spilled; buffer < 1<<20 && n < 1<<20 {
				t.Fatalf("the folds spilled %d bytes with a %d-byte buffer, want their rows", n, buffer)
			}
		})
	}
}
