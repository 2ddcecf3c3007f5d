package localstate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/judge/scripted"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

func TestPlan(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2026, 11, d, 12, 0, 0, 0, time.UTC) }
	batches := func() []BatchInfo {
		return []BatchInfo{
			{Tenant: "t", Batch: "b1", CreatedAt: day(1), Complete: true, Views: []string{"t.f.list.populated.light"}},
			{Tenant: "t", Batch: "b2", CreatedAt: day(2), Complete: true},
			{Tenant: "t", Batch: "b3", CreatedAt: day(3), Complete: false},
			{Tenant: "t", Batch: "b4", CreatedAt: day(4), Complete: true},
			{Tenant: "t", Batch: "b5", CreatedAt: day(5), Complete: true, Views: []string{"t.f.list.populated.light"}},
			{Tenant: "u", Batch: "b6", CreatedAt: day(6), Complete: true, Views: []string{"u.f.list.populated.light"}},
		}
	}
	pruned := func(bs []BatchInfo) map[string]string {
		out := map[string]string{}
		for _, b := range bs {
			if b.Prune {
				out[b.Batch] = b.Why
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		o    PruneOptions
		want []string
	}{
		{"nothing selected", PruneOptions{}, nil},
		// b5 continues b1's view: b1 stays with it; b3 is still running.
		{"keep the newest two", PruneOptions{Keep: 2}, []string{"b2", "b4"}},
		{"older than day 4", PruneOptions{Before: day(4)}, []string{"b2"}},
		{"both rules", PruneOptions{Keep: 1, Before: day(5)}, []string{"b2", "b4"}},
		// Nothing holds b1's view any more once b5 goes too.
		{"keep one", PruneOptions{Keep: 1}, []string{"b1", "b2", "b4", "b5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs := batches()
			Plan(bs, tc.o)
			got := pruned(bs)
			if len(got) != len(tc.want) {
				t.Fatalf("pruned %v, want %v", got, tc.want)
			}
			for _, w := range tc.want {
				if _, ok := got[w]; !ok {
					t.Fatalf("pruned %v, want %v", got, tc.want)
				}
			}
			if bs[0].Batch != "b6" {
				t.Fatalf("not newest first: %+v", bs)
			}
		})
	}
	bs := batches()
	Plan(bs, PruneOptions{Keep: 2})
	for _, b := range bs {
		if b.Batch == "b1" && b.Why != "kept: its rubric view t.f.list.populated.light continues in batch b5" {
			t.Fatalf("b1: %q", b.Why)
		}
		if b.Batch == "b3" && b.Why != "kept: not complete" {
			t.Fatalf("b3: %q", b.Why)
		}
	}
}

// writeBatch writes a one-AC ab batch whose ours artifact holds text.
func writeBatch(t *testing.T, dir, name, text string) *batch.Batch {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "ours.md"), []byte(text), 0o644)
	os.WriteFile(filepath.Join(dir, "reference.md"), []byte("# Shared reference\nThe same in every batch.\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "batch.yaml"), []byte("version: 1\nname: "+name+"\nacs:\n  - {id: AC-1, criterion: The notes are clear., ours: ours.md, reference: reference.md}\n"), 0o644)
	b, err := batch.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPruneKeepsWhatStays judges two batches that share their reference artifact, prunes
// the older one, and checks what is left: the newer batch still loads, its manifest and
// artifacts read back, its audit still passes; the older batch's records and the events
// before the newer one are gone, and so is the artifact only it used, while the shared
// one stays.
func TestPruneKeepsWhatStays(t *testing.T) {
	ctx := context.Background()
	env := e2e.NewEnv(t)
	env.Bus = bus.Config{}
	r := env.StartWith(app.Options{Provider: e2e.Scripted(t, scripted.Options{Fixtures: map[string]string{"ab": "A"}, Named: "ab"}, nil), Instance: "prune-test", CloseTimeout: 5 * time.Second})
	store := env.Store.(*fileblob.Store)
	judge := func(b *batch.Batch) string {
		s := env.Submit(b, "default")
		env.WaitComplete(s, 60*time.Second)
		return s.BatchID
	}
	old := judge(writeBatch(t, filepath.Join(t.TempDir(), "old"), "old", "# Notes\nOnly the old batch has these bytes.\n"))
	// Further apart than the skew prune allows for.
	time.Sleep(1500 * time.Millisecond)
	recent := judge(writeBatch(t, filepath.Join(t.TempDir(), "new"), "new", "# Notes\nOnly the new batch has these bytes.\n"))
	oldOurs := blob.Ref{Tenant: "default", SHA256: sha(t, store, "# Notes\nOnly the old batch has these bytes.\n")}
	shared := blob.Ref{Tenant: "default", SHA256: sha(t, store, "# Shared reference\nThe same in every batch.\n")}

	// A dry run decides and changes nothing.
	rep, err := Prune(ctx, r.JS, r.Buckets, store, PruneOptions{Keep: 1, DryRun: true})
	if err != nil || rep.Pruned != 1 || len(rep.Batches) != 2 || rep.Batches[1].Batch != old || !rep.Batches[1].Prune {
		t.Fatalf("dry run %+v %v", rep, err)
	}
	if _, err := store.Stat(ctx, oldOurs); err != nil {
		t.Fatalf("the dry run removed a blob: %v", err)
	}
	streamBefore := streamState(t, r)

	rep, err = Prune(ctx, r.JS, r.Buckets, store, PruneOptions{Keep: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pruned != 1 || rep.Records < 2 || rep.Events == 0 || rep.Blobs == 0 {
		t.Fatalf("report %+v", rep)
	}
	if h, _, err := records.New(r.Buckets).Header(ctx, "default", old); err != nil || h != nil {
		t.Fatalf("the pruned batch's header: %+v %v", h, err)
	}
	if jobs, err := records.New(r.Buckets).LoadJobs(ctx, "default", old); err != nil || len(jobs) != 0 {
		t.Fatalf("the pruned batch's jobs: %d %v", len(jobs), err)
	}
	if _, err := store.Stat(ctx, oldOurs); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("the artifact only the pruned batch used: %v", err)
	}
	if _, err := store.Stat(ctx, shared); err != nil {
		t.Fatalf("the artifact both batches used: %v", err)
	}
	after := streamState(t, r)
	if after.FirstSeq <= streamBefore.FirstSeq {
		t.Fatalf("no event dropped: first seq %d then %d", streamBefore.FirstSeq, after.FirstSeq)
	}
	// What stays is whole: results, manifest, artifacts, and the audit.
	res, err := client.Load(ctx, r.Buckets, store, "default", recent)
	if err != nil || res.Manifest == nil || len(res.Rows) != 1 {
		t.Fatalf("the kept batch: %+v %v", res, err)
	}
	a, err := audit.Run(ctx, r.JS, audit.Filter{Tenant: "default", BatchID: recent}, store)
	if err != nil {
		t.Fatal(err)
	}
	if !a.OK() || a.Jobs != 1 {
		t.Fatalf("audit of the kept batch after the prune: %+v", a)
	}
	// The judge-call cache stays unless asked: a rerun of the kept batch is answered from it.
	if rep, err := Prune(ctx, r.JS, r.Buckets, store, PruneOptions{Keep: 1, DropCache: true}); err != nil || rep.CacheEntries == 0 || rep.Pruned != 0 {
		t.Fatalf("drop the cache: %+v %v", rep, err)
	}
}

func sha(t *testing.T, store blob.Store, text string) string {
	t.Helper()
	a, err := blob.PutBytes(context.Background(), store, "scratch", []byte(text), "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	return a.Ref.SHA256
}

type seqs struct{ FirstSeq, LastSeq uint64 }

func streamState(t *testing.T, r *app.Running) seqs {
	t.Helper()
	s, err := r.JS.Stream(context.Background(), "TRIBUNAL")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return seqs{info.State.FirstSeq, info.State.LastSeq}
}
