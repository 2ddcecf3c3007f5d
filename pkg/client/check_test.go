package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/kind/critic"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/spend"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// parseBatch parses doc as the batch file of dir.
func parseBatch(t *testing.T, dir, doc string) *batch.Batch {
	t.Helper()
	b, err := batch.Parse(filepath.Join(dir, "batch.yaml"), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tempStore is a file blob store in a temporary folder, closed at cleanup.
func tempStore(t *testing.T) *fileblob.Store {
	t.Helper()
	s, err := fileblob.New(t.TempDir(), fileblob.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestPrepareChecksEveryEvent: preparing builds and measures every job's event; an AC
// whose event is too large for the bus is planned again as blocked, its problem naming the
// AC, its line and the part of it that is too large, and `tribunal validate` shows it.
func TestPrepareChecksEveryEvent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"o.md": "# ours\n", "r.md": "# reference\n", "orig.md": "do a\n", "cand.md": "do a, briefly\n"})
	big := strings.Repeat("x", 50_000)
	var cases strings.Builder
	for i := range 400 {
		fmt.Fprintf(&cases, "{id: c%d, input: %s, tag: happy}, ", i, strings.Repeat("y", 100))
	}
	doc := `version: 1
acs:
  - {id: AC-1, criterion: c, ours: o.md, reference: r.md}
  - {id: AC-2, criterion: ` + big + `, ours: o.md, reference: r.md}
  - {id: AC-3, kind: critic, task: ` + big + `, output: inline text}
  - {id: AC-4, kind: equivalence, original: orig.md, candidate: cand.md, cases: [` + cases.String() + `]}
`
	b := parseBatch(t, dir, doc)
	store := tempStore(t)
	// A bus taking 100 KiB: 36 KiB per job.submitted once the headroom is kept.
	s := &Submitter{Store: store, MaxPayload: 100 << 10}
	prep, err := s.Prepare(context.Background(), b, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"AC-2: line 4: criterion: 50000 bytes make its job.submitted", "AC-3: line 5: critic.task: 50000 bytes", "AC-4: line 6: equivalence.cases: "}
	if len(prep.Blocked) != len(want) {
		t.Fatalf("blocked %q", prep.Blocked)
	}
	for i, w := range want {
		if !strings.HasPrefix(prep.Blocked[i], w) || !strings.Contains(prep.Blocked[i], "over the 36864 an event may carry") {
			t.Errorf("blocked[%d] = %q, want %q...", i, prep.Blocked[i], w)
		}
	}
	err = prep.Jobs(func(i int, j Job) error {
		size := len(j.Spec.Criterion)
		if critic.SpecOf(j.Spec.KindPart) != nil {
			size += len(critic.SpecOf(j.Spec.KindPart).Task)
		}
		if (i == 0) != (j.Spec.Problem == "") || size > 1000 {
			t.Errorf("%s: problem %q, %d bytes of text", j.ID, j.Spec.Problem, size)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := s.PlanBatch(context.Background(), b, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Problems) != 3 || !strings.Contains(plan.Problems[0], "criterion: 50000 bytes") {
		t.Fatalf("validate's problems %q", plan.Problems)
	}
}

// TestPlanDigestAndPages: the plan lists every job in pages stored in blob storage, and its
// digest is the same for the same batch and artifacts and differs when an artifact changed.
func TestPlanDigestAndPages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"o.md": "# ours\n", "r.md": "# reference\n"})
	var doc strings.Builder
	doc.WriteString("version: 1\nacs:\n")
	n := events.PlanPageSize + 3
	for i := range n {
		fmt.Fprintf(&doc, "  - {id: AC-%d, criterion: c, ours: o.md, reference: r.md}\n", i)
	}
	b := parseBatch(t, dir, doc.String())
	store := tempStore(t)
	s := &Submitter{Store: store}
	prep, err := s.Prepare(context.Background(), b, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if prep.plan.Size != n || len(prep.plan.Pages) != 2 || prep.plan.Validate() != nil {
		t.Fatalf("plan %+v", prep.plan)
	}
	// Stored only as the batch.opened naming them is published, not by Prepare.
	if blobs := storedBlobs(t, store); len(blobs) != 0 {
		t.Fatalf("Prepare stored %d blobs: %v", len(blobs), blobs)
	}
	if err := s.storePages(context.Background(), prep, "team-a"); err != nil {
		t.Fatal(err)
	}
	for i, ref := range prep.plan.Pages {
		page, err := records.LoadPlanPage(context.Background(), store, "team-a", ref)
		if err != nil {
			t.Fatal(err)
		}
		if err := page.Check(i, n); err != nil {
			t.Fatal(err)
		}
		if first := page.Jobs[0]; first.ID != fmt.Sprintf("AC-%d", i*events.PlanPageSize) || first.Kind != events.KindAB {
			t.Fatalf("page %d starts with %+v", i, first)
		}
	}
	again, err := s.Prepare(context.Background(), b, "team-a")
	if err != nil || again.Digest() != prep.Digest() {
		t.Fatalf("the same batch, another digest: %s %s %v", prep.Digest(), again.Digest(), err)
	}
	writeFiles(t, dir, map[string]string{"r.md": "# reference, edited\n"})
	changed, err := s.Prepare(context.Background(), b, "team-a")
	if err != nil || changed.Digest() == prep.Digest() {
		t.Fatalf("a changed artifact, the same digest: %v", err)
	}
}

// storedBlobs lists every blob of store.
func storedBlobs(t *testing.T, store *fileblob.Store) []string {
	t.Helper()
	var out []string
	if err := store.Walk(context.Background(), func(ref blob.Ref, _ int64) error {
		out = append(out, ref.String())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRefusedWindowStoresNoPlan: a windowed batch refused in a later window (here its
// last AC names a model the team may not name, after a page's worth of jobs) leaves
// nothing in the blob store: its plan's pages are written to the submission's own file,
// and stored only as its batch.opened is published. They were stored as Prepare reached
// them, and left there unused.
func TestRefusedWindowStoresNoPlan(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"o.md": "# ours\n", "r.md": "# reference\n"})
	var doc strings.Builder
	doc.WriteString("version: 1\nacs:\n")
	n := events.PlanPageSize + 1500 // a page flushed in the fifth window, the refusal in the sixth
	for i := range n {
		judges := ""
		if i == n-1 {
			judges = ", judges: [o1-pro]"
		}
		fmt.Fprintf(&doc, "  - {id: AC-%d, criterion: c, ours: o.md, reference: r.md%s}\n", i, judges)
	}
	b := parseBatch(t, dir, doc.String())
	store := tempStore(t)
	pub := &capturePub{}
	s := &Submitter{Pub: pub, Store: store, Window: 1000, Spend: &spend.Allowance{Models: []string{"gpt-4o"}, MaxCallsPerAC: 16}}
	_, err := s.Submit(context.Background(), b, "team-a", "refused-late")
	var re *RefusedError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), `"o1-pro" is not allowed`) {
		t.Fatalf("a batch naming a model it may not in its sixth window: %v", err)
	}
	if blobs := storedBlobs(t, store); len(blobs) != 0 {
		t.Errorf("the refused batch left %d blobs in the store: %v", len(blobs), blobs)
	}
	if len(pub.msgs) != 0 {
		t.Errorf("%d events of the refused batch published", len(pub.msgs))
	}
}
