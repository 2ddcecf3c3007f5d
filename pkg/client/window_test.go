package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// capturePub keeps every message it is handed, in order: its id and its event, but for
// the time it was made.
type capturePub struct{ msgs []string }

func (p *capturePub) Publish(_ string, msgs ...*message.Message) error {
	for _, m := range msgs {
		ev, err := events.Decode(m.Payload)
		if err != nil {
			return err
		}
		ev.Time = time.Time{}
		data, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		p.msgs = append(p.msgs, m.UUID+" "+string(data))
	}
	return nil
}

// windowBatch is a batch of n ab ACs over their own files, AC-3 too large for a bus of
// 100 KiB (so it is planned again as blocked) and AC-5's ours missing.
func windowBatch(t *testing.T, n int) (dir, doc string) {
	t.Helper()
	dir = t.TempDir()
	var sb strings.Builder
	sb.WriteString("version: 1\nacs:\n")
	for i := range n {
		writeFiles(t, dir, map[string]string{fmt.Sprintf("o%d.md", i): fmt.Sprintf("# ours %d\n", i), fmt.Sprintf("r%d.md", i): fmt.Sprintf("# ref %d\n", i)})
		criterion := "c"
		if i == 3 {
			criterion = strings.Repeat("x", 50_000)
		}
		if i == 5 {
			_ = os.Remove(filepath.Join(dir, "o5.md"))
		}
		fmt.Fprintf(&sb, "  - {id: AC-%d, criterion: %s, ours: o%d.md, reference: r%d.md}\n", i, criterion, i, i)
	}
	return dir, sb.String()
}

// TestWindowedSubmissionIsTheWhole: a batch planned, checked and published a few ACs at a
// time announces the same plan (digest, pages, size), blocks the same ACs and publishes
// the same events, ids included, as the batch planned whole: a submission cut anywhere
// resumes the same way whatever the window.
func TestWindowedSubmissionIsTheWhole(t *testing.T) {
	t.Parallel()
	const n = 23
	dir, doc := windowBatch(t, n)
	var plans []events.BatchOpened
	var published [][]string
	var blocked [][]string
	for _, window := range []int{0, 1, 4, n} {
		b := parseBatch(t, dir, doc)
		pub := &capturePub{}
		s := &Submitter{Pub: pub, Store: tempStore(t), MaxPayload: 100 << 10, Window: window}
		sub, err := s.Submit(context.Background(), b, "team-a", "b1")
		if err != nil {
			t.Fatalf("window %d: %v", window, err)
		}
		if sub.Jobs != n || sub.Published != n || len(sub.Blocked) != 1 {
			t.Fatalf("window %d: %+v", window, sub)
		}
		prep, err := s.Prepare(context.Background(), parseBatch(t, dir, doc), "team-a")
		if err != nil {
			t.Fatal(err)
		}
		if (prep.kept == nil) != (window > 0 && window < n) {
			t.Errorf("window %d: kept %v", window, prep.kept != nil)
		}
		plans, published, blocked = append(plans, prep.plan), append(published, pub.msgs), append(blocked, sub.Blocked)
	}
	for i := 1; i < len(plans); i++ {
		if !reflect.DeepEqual(plans[i], plans[0]) {
			t.Errorf("plan %d %+v, whole %+v", i, plans[i], plans[0])
		}
		if !reflect.DeepEqual(published[i], published[0]) {
			for k := range min(len(published[i]), len(published[0])) {
				if published[i][k] != published[0][k] {
					t.Errorf("event %d published differs at window %d:\n%s\nwhole:\n%s", k, i, published[i][k], published[0][k])
					break
				}
			}
		}
		if !reflect.DeepEqual(blocked[i], blocked[0]) {
			t.Errorf("blocked %q, whole %q", blocked[i], blocked[0])
		}
	}
}

// TestWindowedSubmissionFindsAChangedFile: a batch of several windows is planned again as
// it is published; a file changed since Prepare hashed it stops the submission at its
// AC, before its job is published.
func TestWindowedSubmissionFindsAChangedFile(t *testing.T) {
	t.Parallel()
	dir, doc := windowBatch(t, 12)
	pub := &capturePub{}
	s := &Submitter{Pub: pub, Store: tempStore(t), MaxPayload: 100 << 10, Window: 4}
	prep, err := s.Prepare(context.Background(), parseBatch(t, dir, doc), "team-a")
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"r9.md": "# changed\n"})
	var sub Submission
	err = s.publish(context.Background(), prep, "team-a", "b1", nil, false, &sub)
	if !errors.Is(err, errArtifactChanged) || !strings.Contains(err.Error(), "AC-9") {
		t.Fatalf("want AC-9's change named, got %v", err)
	}
	if sub.Published > 9 {
		t.Fatalf("%d jobs published, AC-9's among them", sub.Published)
	}
}

// TestTooManyJobsRefusedFirst: a batch over the jobs a batch may have is refused naming
// the limit and the count, with nothing published: by its ACs' count, before anything is
// planned or hashed, whatever the window.
func TestTooManyJobsRefusedFirst(t *testing.T) {
	t.Parallel()
	dir, doc := windowBatch(t, 10)
	for _, tc := range []struct {
		window, max int
		want        string
	}{
		{0, 9, "10 ACs, over the 9 jobs a batch may have (the submitter's limit)"},
		{4, 9, "10 ACs, over the 9 jobs a batch may have"},
	} {
		pub := &capturePub{}
		s := &Submitter{Pub: pub, Store: tempStore(t), Window: tc.window, MaxJobs: tc.max}
		_, err := s.Submit(context.Background(), parseBatch(t, dir, doc), "team-a", "b1")
		var refused *RefusedError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("window %d: %v, want %q", tc.window, err, tc.want)
		}
		if len(pub.msgs) != 0 {
			t.Errorf("window %d: %d messages published", tc.window, len(pub.msgs))
		}
	}
}

// TestWindowedPrepareHoldsAWindow: a prepared batch of several windows holds about a
// window's plans, not the batch's: its live heap grows by under an eighth of what the same
// batch prepared whole holds. (It was a tenth while an AC was 232 bytes: the whole
// batch's plans copy their ACs, and the 144-byte AC brought them from about 830 bytes an
// AC to 710, while the windowed batch's 55 to 80, most of it the job ids' owner index
// every window checks against, did not change.)
func TestWindowedPrepareHoldsAWindow(t *testing.T) {
	const n = 3000
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"o.md": "# ours\n", "r.md": "# reference\n"})
	var doc strings.Builder
	doc.WriteString("version: 1\nacs:\n")
	for i := range n {
		fmt.Fprintf(&doc, "  - {id: AC-%d, criterion: the criterion of AC %d, ours: o.md, reference: r.md}\n", i, i)
	}
	held := func(window int) uint64 {
		b := parseBatch(t, dir, doc.String())
		s := &Submitter{Store: tempStore(t), Window: window}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		prep, err := s.Prepare(context.Background(), b, "team-a")
		if err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(prep)
		return max(after.HeapAlloc, before.HeapAlloc) - before.HeapAlloc
	}
	whole, windowed := held(0), held(100)
	t.Logf("prepared and held: whole %d bytes an AC, in windows of 100 %d", whole/n, windowed/n)
	if windowed*8 > whole {
		t.Fatalf("windowed Prepare holds %d bytes, the whole batch's %d: want under an eighth", windowed, whole)
	}
}

// BenchmarkPrepareMemory measures parsing and preparing a 20,000-AC batch (two files an
// AC, as `tribunal bench` writes them): the heap in use at the peak (sampled every 50 µs)
// and still held once Prepare returns, per AC, the batch prepared whole and in windows.
func BenchmarkPrepareMemory(b *testing.B) {
	const n = 20_000
	dir := b.TempDir()
	var doc strings.Builder
	doc.WriteString("version: 1\nname: bench\nacs:\n")
	for i := range n {
		for _, side := range []string{"o", "r"} {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s%d.md", side, i)), []byte(fmt.Sprintf("# %s %d\n", side, i)), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		fmt.Fprintf(&doc, "  - id: AC-%d\n    criterion: The answer %d is as good as the reference.\n    ours: o%d.md\n    reference: r%d.md\n", i, i, i, i)
	}
	data := []byte(doc.String())
	for _, bc := range []struct {
		name   string
		window int
	}{{"whole", n}, {"window-2000", 2000}} {
		b.Run(bc.name, func(b *testing.B) {
			var peak, held uint64
			for b.Loop() {
				store := tempStoreB(b)
				runtime.GC()
				base := heapInUse()
				stop := sampleHeap()
				bt, err := batch.Parse(filepath.Join(dir, "batch.yaml"), data)
				if err != nil {
					b.Fatal(err)
				}
				s := &Submitter{Store: store, Window: bc.window}
				prep, err := s.Prepare(context.Background(), bt, "team-a")
				top := stop()
				if err != nil || prep.Len() != n {
					b.Fatalf("Prepare: %v", err)
				}
				runtime.GC()
				peak, held = max(peak, top-base), heapInUse()-base
				runtime.KeepAlive(prep)
			}
			b.ReportMetric(float64(peak)/n, "peak-B/AC")
			b.ReportMetric(float64(held)/n, "held-B/AC")
		})
	}
}

// sampleHeap samples the heap in use until the function it returns is called, which
// returns the highest.
func sampleHeap() func() uint64 {
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		var top uint64
		for {
			top = max(top, heapInUse())
			select {
			case <-stop:
				done <- top
				return
			case <-time.After(50 * time.Microsecond):
			}
		}
	}()
	return func() uint64 { close(stop); return <-done }
}

// heapInUse is the bytes of live and not yet swept heap objects.
func heapInUse() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func tempStoreB(b *testing.B) *fileblob.Store {
	b.Helper()
	s, err := fileblob.New(b.TempDir(), fileblob.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}
