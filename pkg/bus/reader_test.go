package bus_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/bus"
)

// readAll reads with o and returns the stream sequences delivered.
func readAll(t *testing.T, js jetstream.JetStream, o bus.ReadOptions) []uint64 {
	t.Helper()
	var seqs []uint64
	err := bus.ReadStream(ctxT(t), js, "TRIBUNAL", o, func(_ jetstream.Msg, md *jetstream.MsgMetadata) bool {
		seqs = append(seqs, md.Sequence.Stream)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return seqs
}

// readers lists the reader consumers on the stream.
func readers(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	st, err := js.Stream(ctxT(t), "TRIBUNAL")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	names := st.ConsumerNames(ctxT(t))
	for n := range names.Name() {
		if strings.HasPrefix(n, "tribunal-reader-") {
			out = append(out, n)
		}
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReadStream: a read hands over exactly the selected messages, in stream order,
// from its start up to its last sequence, and leaves no consumer behind.
func TestReadStream(t *testing.T) {
	_, _, js := natstest.Provisioned(t, bus.Config{Memory: true})
	ctx := ctxT(t)
	var mine []uint64
	var cut time.Time
	for i := range 1200 {
		subject := []string{"tribunal.team-a.job.submitted", "tribunal.team-b.job.submitted", "tribunal._dlq.judge"}[i%3]
		if i == 600 {
			cut = time.Now()
		}
		ack, err := js.Publish(ctx, subject, []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		if i%3 != 1 {
			mine = append(mine, ack.Sequence)
		}
	}
	filters := []string{"tribunal.team-a.>", "tribunal._dlq.>"}
	if got := readAll(t, js, bus.ReadOptions{FilterSubjects: filters}); !slices.Equal(got, mine) {
		t.Errorf("filtered read: %d messages %v..., want %d", len(got), got[:min(5, len(got))], len(mine))
	}
	if got := readAll(t, js, bus.ReadOptions{}); len(got) != 1200 || got[0] != 1 || got[1199] != 1200 {
		t.Errorf("whole read: %d messages", len(got))
	}
	if got := readAll(t, js, bus.ReadOptions{FilterSubjects: filters, Last: 300}); !slices.Equal(got, mine[:200]) {
		t.Errorf("read up to 300: %d messages, want 200", len(got))
	}
	if got := readAll(t, js, bus.ReadOptions{Since: cut}); len(got) == 0 || got[0] > 601 || got[len(got)-1] != 1200 {
		t.Errorf("read since message 601: %v...", got[:min(5, len(got))])
	}
	// visit returning false ends the read.
	n := 0
	if err := bus.ReadStream(ctx, js, "TRIBUNAL", bus.ReadOptions{}, func(jetstream.Msg, *jetstream.MsgMetadata) bool {
		n++
		return n < 7
	}); err != nil || n != 7 {
		t.Errorf("a read stopped at 7: %d messages, %v", n, err)
	}
	if left := readers(t, js); len(left) > 0 {
		t.Errorf("reader consumers left behind: %v", left)
	}
}

// TestReadStreamSlots: readers share the slots; a read finding every slot held waits for
// one rather than joining another read's consumer (which would split that read's
// messages between the two).
func TestReadStreamSlots(t *testing.T) {
	_, _, js := natstest.Provisioned(t, bus.Config{Memory: true})
	ctx := ctxT(t)
	for i := range 3 {
		if _, err := js.Publish(ctx, "tribunal.team-a.job.submitted", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	release := make(chan struct{})
	var held, done sync.WaitGroup
	held.Add(bus.Readers)
	counts := make([]int, bus.Readers)
	errs := make([]error, bus.Readers)
	for i := range bus.Readers {
		done.Add(1)
		go func() {
			defer done.Done()
			errs[i] = bus.ReadStream(ctx, js, "TRIBUNAL", bus.ReadOptions{}, func(_ jetstream.Msg, md *jetstream.MsgMetadata) bool {
				counts[i]++
				if counts[i] == 1 {
					held.Done()
					<-release
				}
				return true
			})
		}()
	}
	held.Wait()
	if got := readers(t, js); len(got) != bus.Readers {
		t.Fatalf("%d reads hold %d slots: %v", bus.Readers, len(got), got)
	}
	var extra []uint64
	var mu sync.Mutex
	extraDone := make(chan error, 1)
	go func() {
		extraDone <- bus.ReadStream(ctx, js, "TRIBUNAL", bus.ReadOptions{}, func(_ jetstream.Msg, md *jetstream.MsgMetadata) bool {
			mu.Lock()
			extra = append(extra, md.Sequence.Stream)
			mu.Unlock()
			return true
		})
	}()
	close(release)
	done.Wait()
	if err := <-extraDone; err != nil {
		t.Fatal(err)
	}
	for i := range bus.Readers {
		if errs[i] != nil || counts[i] != 3 {
			t.Errorf("read %d: %d messages, %v; want all 3", i, counts[i], errs[i])
		}
	}
	if !slices.Equal(extra, []uint64{1, 2, 3}) {
		t.Errorf("the read that waited for a slot got %v, want all 3", extra)
	}
}

// TestReadStreamOutlivesItsConsumer: a read whose consumer disappears mid-read (expired,
// its server lost, deleted) goes on with a new one after the last message it delivered:
// every message once, in order.
func TestReadStreamOutlivesItsConsumer(t *testing.T) {
	_, _, js := natstest.Provisioned(t, bus.Config{Memory: true})
	ctx := ctxT(t)
	for i := range 2000 {
		if _, err := js.Publish(ctx, "tribunal.team-a.job.submitted", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	var seqs []uint64
	err := bus.ReadStream(ctx, js, "TRIBUNAL", bus.ReadOptions{}, func(_ jetstream.Msg, md *jetstream.MsgMetadata) bool {
		seqs = append(seqs, md.Sequence.Stream)
		if md.Sequence.Stream == 700 {
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := js.DeleteConsumer(dctx, "TRIBUNAL", md.Consumer); err != nil {
				t.Errorf("delete the reader's consumer %s: %v", md.Consumer, err)
			}
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("delivery %d is message %d (%d delivered)", i, s, len(seqs))
		}
	}
	if len(seqs) != 2000 {
		t.Errorf("%d messages delivered, want 2000", len(seqs))
	}
}
