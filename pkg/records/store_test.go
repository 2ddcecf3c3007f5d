package records_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/memkv"
	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/kv"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// conflicts counts the compare-and-set updates a bucket refused.
type conflicts struct {
	kv.KV
	n     atomic.Int64
	upper atomic.Int64
}

func (c *conflicts) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	r, err := c.KV.Update(ctx, key, value, rev)
	if kv.IsConflict(err) {
		c.n.Add(1)
		if !strings.Contains(key, ".d0-") {
			c.upper.Add(1)
		}
	}
	return r, err
}

// markAll marks every job of a batch done from workers goroutines taking jobs in
// submission order, as the aggregator's handlers do, and returns how many calls said the
// batch was complete.
func markAll(t testing.TB, st records.Store, size, workers int) int64 {
	var next, complete atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= size {
					return
				}
				done, err := st.MarkDone(context.Background(), "t", "b", i, size)
				if err != nil {
					t.Error(err)
					return
				}
				if done {
					complete.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return complete.Load()
}

// Every job counted once, the batch complete exactly once, whatever the batch size, and
// a redelivered job changes nothing.
func TestMarkDone(t *testing.T) {
	t.Parallel()
	for _, size := range []int{1, 2, 63, 64, 65, 513, 1000, 4097, 4161, 100000} {
		st := records.Store{Jobs: memkv.New("jobs"), Batches: memkv.New("batches")}
		if n := markAll(t, st, size, 16); n != 1 {
			t.Fatalf("size %d: the batch completed %d times", size, n)
		}
		if got, err := st.Progress(context.Background(), "t", "b", size); err != nil || got != size {
			t.Fatalf("size %d: progress %d (%v)", size, got, err)
		}
		done, err := st.MarkDone(context.Background(), "t", "b", size/2, size)
		if err != nil || !done {
			t.Fatalf("size %d: a redelivered job must still see the batch complete: %v %v", size, done, err)
		}
	}
	st := records.Store{Jobs: memkv.New("jobs"), Batches: memkv.New("batches")}
	if _, err := st.MarkDone(context.Background(), "t", "b", 5, 5); err == nil {
		t.Fatal("an index outside the batch was accepted")
	}
}

// The jobs in flight together are neighbours in submission order; striping puts each in
// a shard of its own, and the tree above spreads the shards' completions, so 64 handlers
// marking 10,000 jobs on a real bucket barely collide (contiguous shards of 1024 with a
// bitmap in the header saw about 90,000 conflicts here, and gave up on some updates).
func TestMarkDoneRarelyConflicts(t *testing.T) {
	_, js := natstest.Start(t).Connect(t)
	kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "batches"})
	if err != nil {
		t.Fatal(err)
	}
	b := &conflicts{KV: kv}
	st := records.Store{Batches: b}
	const size = 10000
	if n := markAll(t, st, size, 64); n != 1 {
		t.Fatalf("completed %d times", n)
	}
	t.Logf("%d conflicts for %d jobs, %d above level 0", b.n.Load(), size, b.upper.Load())
	if c := b.n.Load(); c > size/20 {
		t.Fatalf("%d conflicts for %d jobs", c, size)
	}
}

func BenchmarkMarkDone(b *testing.B) {
	for b.Loop() {
		st := records.Store{Jobs: memkv.New("jobs"), Batches: memkv.New("batches")}
		markAll(b, st, 10000, 64)
	}
}

// EachJob hands every record of one batch to fn, in the bucket's order, on a real
// bucket; it stops at fn's first error, and a record that does not decode is an error
// naming its key. The records are decoded ahead of fn, on another goroutine.
func TestEachJob(t *testing.T) {
	t.Parallel()
	b := natstest.Buckets(t, bus.Config{})
	st := records.New(b)
	ctx := t.Context()
	const n = 600 // more than the decoder runs ahead
	for i := range n {
		j := &records.Job{Tenant: "t", Batch: "b", ACID: "AC-" + strconv.Itoa(i), Index: i, BatchSize: n}
		if _, err := st.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.CreateJob(ctx, &records.Job{Tenant: "t", Batch: "other", ACID: "AC-0"}); err != nil {
		t.Fatal(err)
	}
	var got []int
	if err := st.EachJob(ctx, "t", "b", func(j *records.Job) error { got = append(got, j.Index); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d records, want %d", len(got), n)
	}
	for i, idx := range got {
		if idx != i {
			t.Fatalf("record %d has index %d: not in the bucket's order", i, idx)
		}
	}
	stop := errors.New("enough")
	seen := 0
	err := st.EachJob(ctx, "t", "b", func(*records.Job) error {
		if seen++; seen == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || seen != 3 {
		t.Fatalf("after fn's error: %v, %d records seen", err, seen)
	}
	if _, err := b.Jobs.Put(ctx, records.JobKey("t", "b", "AC-5"), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	err = st.EachJob(ctx, "t", "b", func(*records.Job) error { return nil })
	if !errors.Is(err, records.ErrCorrupt) || !strings.Contains(err.Error(), records.JobKey("t", "b", "AC-5")) {
		t.Fatalf("a corrupt record: %v", err)
	}
}

// scanConsumers names the consumers on the jobs bucket's stream.
func scanConsumers(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	s, err := js.Stream(t.Context(), "KV_"+bus.BucketJobs)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	names := s.ConsumerNames(t.Context())
	for n := range names.Name() {
		out = append(out, n)
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// EachJob reads a large batch whole, each record once in the bucket's order, even when
// its consumer is deleted in the middle of the read (the way an ordered consumer's reset
// made a watch end short, "the EachJob miss"); it leaves records of a batch whose name
// extends this one's alone, leaves deleted records out, reads an empty batch as empty,
// and leaves no consumer behind, also when fn stops it.
func TestEachJobReadsEveryRecord(t *testing.T) {
	t.Parallel()
	b := natstest.Buckets(t, bus.Config{})
	if b.JS == nil {
		t.Fatal("bus.OpenBuckets gave no JetStream: EachJob would watch")
	}
	st := records.New(b)
	ctx := t.Context()
	const n = 2000 // two pulls, and more than the decoder runs ahead
	for i := range n {
		for _, batch := range []string{"b", "bx"} {
			j := &records.Job{Tenant: "t", Batch: batch, ACID: "AC-" + strconv.Itoa(i), Index: i, BatchSize: n}
			if _, err := st.CreateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
	}
	read := func(fn func(seen int)) []int {
		t.Helper()
		var got []int
		err := st.EachJob(ctx, "t", "b", func(j *records.Job) error {
			if j.Batch != "b" {
				t.Fatalf("a record of batch %q", j.Batch)
			}
			got = append(got, j.Index)
			if fn != nil {
				fn(len(got))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if left := scanConsumers(t, b.JS); len(left) > 0 {
			t.Fatalf("consumers left behind: %v", left)
		}
		return got
	}
	inOrder := func(what string, got []int) {
		t.Helper()
		if len(got) != n {
			t.Fatalf("%s: %d records, want %d", what, len(got), n)
		}
		for i, idx := range got {
			if idx != i {
				t.Fatalf("%s: record %d has index %d: missed, repeated or out of order", what, i, idx)
			}
		}
	}
	inOrder("a plain read", read(nil))

	var deleted string
	got := read(func(seen int) {
		switch seen {
		case 10:
			names := scanConsumers(t, b.JS)
			if len(names) != 1 {
				t.Fatalf("reading through %v", names)
			}
			deleted = names[0]
			if err := b.JS.DeleteConsumer(ctx, "KV_"+bus.BucketJobs, deleted); err != nil {
				t.Fatal(err)
			}
		case 1500: // past the first pull: read by another consumer
			if names := scanConsumers(t, b.JS); len(names) != 1 || names[0] == deleted {
				t.Fatalf("after deleting %s, reading through %v", deleted, names)
			}
		}
	})
	inOrder("a read whose consumer was deleted", got)

	if err := b.Jobs.Delete(ctx, records.JobKey("t", "b", "AC-7")); err != nil {
		t.Fatal(err)
	}
	got = read(nil)
	if len(got) != n-1 || slices.Contains(got, 7) {
		t.Fatalf("after deleting AC-7: %d records, AC-7 among them: %v", len(got), slices.Contains(got, 7))
	}

	stop := errors.New("enough")
	if err := st.EachJob(ctx, "t", "b", func(*records.Job) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("after fn's error: %v", err)
	}
	if left := scanConsumers(t, b.JS); len(left) > 0 {
		t.Fatalf("consumers left behind by a read fn stopped: %v", left)
	}

	err := st.EachJob(ctx, "t", "empty", func(j *records.Job) error {
		t.Fatalf("the empty batch has %s", j.Key())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if left := scanConsumers(t, b.JS); len(left) > 0 {
		t.Fatalf("consumers left behind: %v", left)
	}
}

// EachJob hands every record exactly once, in the bucket's order, when its consumer's
// sequence skips: another client pulls from the scan's consumer in the middle of the
// read (the server counts what it delivered there, so the scan sees the consumer
// sequence jump, as it would after messages lost between server and client), and a
// record not read yet is purged meanwhile. The scan must notice the gap, replace its
// consumer and go on after the last stream sequence it handed on: the records the other
// client took come to fn all the same, and none twice.
func TestEachJobRecoversFromASequenceGap(t *testing.T) {
	t.Parallel()
	b := natstest.Buckets(t, bus.Config{})
	st := records.New(b)
	ctx := t.Context()
	const n, purged = 2500, 2200 // three pulls; the purged record is in the last
	for i := range n {
		j := &records.Job{Tenant: "t", Batch: "b", ACID: "AC-" + strconv.Itoa(i), Index: i, BatchSize: n}
		if _, err := st.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	var gapped string
	stolen := 0
	var got []int
	err := st.EachJob(ctx, "t", "b", func(j *records.Job) error {
		got = append(got, j.Index)
		switch len(got) {
		case 10:
			// The scan's goroutine is held by fn here (its channel fills): its first
			// pull is not consumed yet, so what this client takes is past it, and the
			// scan's next pull starts with a consumer sequence it did not expect.
			names := scanConsumers(t, b.JS)
			if len(names) != 1 {
				t.Fatalf("reading through %v", names)
			}
			gapped = names[0]
			c, err := b.JS.Consumer(ctx, "KV_"+bus.BucketJobs, gapped)
			if err != nil {
				t.Fatal(err)
			}
			mb, err := c.FetchNoWait(5)
			if err != nil {
				t.Fatal(err)
			}
			for m := range mb.Messages() {
				md, err := m.Metadata()
				if err != nil {
					t.Fatal(err)
				}
				if md.Sequence.Consumer <= 10 {
					t.Fatalf("the other client got consumer sequence %d, which the scan read", md.Sequence.Consumer)
				}
				stolen++
			}
			if err := mb.Error(); err != nil {
				t.Fatal(err)
			}
			// Removed from the stream, not marked deleted: the consumer's list of
			// last messages names one that is gone.
			s, err := b.JS.Stream(ctx, "KV_"+bus.BucketJobs)
			if err != nil {
				t.Fatal(err)
			}
			subject := "$KV." + bus.BucketJobs + "." + records.JobKey("t", "b", "AC-"+strconv.Itoa(purged))
			if err := s.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
				t.Fatal(err)
			}
		case 2000: // past the gap: read by another consumer
			if names := scanConsumers(t, b.JS); len(names) != 1 || names[0] == gapped {
				t.Fatalf("after the gap in %s, reading through %v: the gap was not noticed", gapped, names)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if stolen == 0 {
		t.Fatal("the other client took no message: no gap was made")
	}
	want := make([]int, 0, n-1)
	for i := range n {
		if i != purged {
			want = append(want, i)
		}
	}
	if !slices.Equal(got, want) {
		seen := map[int]int{}
		for _, i := range got {
			seen[i]++
		}
		var missed, twice []int
		for _, i := range want {
			switch seen[i] {
			case 0:
				missed = append(missed, i)
			case 1:
			default:
				twice = append(twice, i)
			}
		}
		t.Fatalf("%d records after %d taken by another client, want %d: missed %v, repeated %v, purged one read %d times",
			len(got), stolen, len(want), missed, twice, seen[purged])
	}
	if left := scanConsumers(t, b.JS); len(left) > 0 {
		t.Fatalf("consumers left behind: %v", left)
	}
}

// EachJob reads every record of a batch while they are rewritten under it, as a batch's
// records are while the aggregator records reviews, late verdicts and costs: each read
// hands every job exactly once, whatever was rewritten before, during or after the
// consumer was made (a read that missed one drew a review queue without it, and a
// completion that folded one twice would count it twice).
func TestEachJobWhileRecordsAreRewritten(t *testing.T) {
	t.Parallel()
	b := natstest.Buckets(t, bus.Config{})
	st := records.New(b)
	ctx := t.Context()
	const n = 50
	for i := range n {
		if _, err := st.CreateJob(ctx, &records.Job{Tenant: "t", Batch: "b", ACID: "AC-" + strconv.Itoa(i), Index: i, BatchSize: n}); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := 0; ; k++ {
			// A rewrite every millisecond or so, in bursts of five, as reviews and
			// late writes come: often enough to land in every read, and with gaps a
			// read's last consumer can be made in.
			wait := time.Duration(0)
			if k%5 == 4 {
				wait = 5 * time.Millisecond
			}
			select {
			case <-stop:
				return
			case <-time.After(wait):
			}
			i := k % n
			j := &records.Job{Tenant: "t", Batch: "b", ACID: "AC-" + strconv.Itoa(i), Index: i, BatchSize: n, BlockReason: "rewrite " + strconv.Itoa(k)}
			data, err := json.Marshal(j)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := b.Jobs.Put(ctx, records.JobKey("t", "b", j.ACID), data); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for read := range 300 {
		seen := map[int]bool{}
		if err := st.EachJob(ctx, "t", "b", func(j *records.Job) error {
			if seen[j.Index] {
				t.Errorf("read %d: %s handed twice", read, j.ACID)
			}
			seen[j.Index] = true
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(seen) != n {
			var missed []int
			for i := range n {
				if !seen[i] {
					missed = append(missed, i)
				}
			}
			close(stop)
			wg.Wait()
			t.Fatalf("read %d: %d jobs of %d, missed %v", read, len(seen), n, missed)
		}
	}
	close(stop)
	wg.Wait()
}
