package rulebook

import (
	"encoding/json"
	"fmt"
	"github.com/tribunal-dev/tribunal/pkg/stepset"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestHeldLogReadsBackWhatWasStored is a model test of a Memory's records across the
// log's evictions: random jobs stored again and again, in flight or final, of sizes from
// a few bytes to more than a segment, each read back (by key, by place) equal to the
// last version stored, as a map of them says, through a log of a few KiB that writes
// most of them out; with every key's hash alike (each lookup tells the records apart by
// the keys written with them); and after the spill file fails (the records then stay in
// memory, the log's evictions too); with the records written out a few at a time rather
// than a segment's in one write. With nothing final (the codec then has no
// dictionary, and a record decodes to its own bytes) what a read returned stays as it
// was while the log's segments are reused.
func TestHeldLogReadsBackWhatWasStored(t *testing.T) {
	for _, c := range []struct {
		what                 string
		collide, fail, plain bool
		batch                int
	}{
		{"written out", false, false, false, 0},
		{"every key's hash alike", true, false, false, 0},
		{"the spill file failing half way", false, true, false, 0},
		{"nothing final", false, false, true, 0},
		{"written out a record or two a write", false, false, false, 300},
		{"a record or two a write, the file failing", false, true, false, 300},
	} {
		t.Run(c.what, func(t *testing.T) {
			if c.batch > 0 {
				defer func(b int) { evictBatch = b }(evictBatch)
				evictBatch = c.batch
			}
			r := rand.New(rand.NewPCG(7, 11))
			m := &Memory{SpillDir: t.TempDir(), budget: 4 << 10}
			m.init()
			if m.spill == nil {
				t.Fatal("no spill file")
			}
			if c.collide {
				m.index.hashOf = func(string) stepset.Key { return stepset.Key{0x5e, 0xed} }
			}
			const jobs, steps = 300, 6000
			want := map[string][]byte{}
			places := map[string]uint32{}
			type read struct{ got, want []byte }
			var reads []read
			check := func(id string) {
				t.Helper()
				key := records.JobKey("t", "b", id)
				got := m.jobJSON(key)
				if string(got) != string(want[key]) {
					t.Fatalf("%s reads back\n%s\nwant\n%s", id, got, want[key])
				}
				reads = append(reads, read{got, want[key]})
				if p, ok := places[key]; ok {
					if got, _ := json.Marshal(m.decodeAt(p)); string(got) != string(want[key]) {
						t.Fatalf("%s at place %d reads back\n%s\nwant\n%s", id, p, got, want[key])
					}
				}
			}
			for step := range steps {
				if c.fail && step == steps/2 {
					m.spill.broken = true
				}
				id := fmt.Sprintf("AC-%d", r.IntN(jobs))
				if r.IntN(3) == 0 {
					check(id)
					continue
				}
				j := &records.Job{Tenant: "t", Batch: "b", ACID: id, Index: step, Status: events.StatusPending}
				if !c.plain && r.IntN(4) == 0 {
					j.Status = events.StatusCompared
				}
				// Mostly a few hundred bytes, some past a segment (512 bytes here), of
				// random letters, which compress little.
				size := r.IntN(400)
				if r.IntN(20) == 0 {
					size = 600 + r.IntN(2000)
				}
				var b strings.Builder
				for range size {
					b.WriteByte(byte('a' + r.IntN(26)))
				}
				j.CorrelationID = b.String()
				data, err := json.Marshal(j)
				if err != nil {
					t.Fatal(err)
				}
				places[j.Key()] = m.store(j)
				want[j.Key()] = data
				check(id)
			}
			for i := range jobs {
				check(fmt.Sprintf("AC-%d", i))
			}
			for i, rd := range reads {
				if string(rd.got) != string(rd.want) {
					t.Fatalf("read %d changed since: now\n%s\nwant\n%s", i, rd.got, rd.want)
				}
			}
			var live [heldSegments]int
			for p := range m.at.Len() {
				w := m.at.Get(p)
				if isHeld(w) {
					seg, _ := unpackHeld(w)
					live[seg]++
				}
			}
			if live != m.log.live {
				t.Fatalf("the log counts %v versions live a segment, the places name %v", m.log.live, live)
			}
			if _, capacity := m.log.bytes(); capacity > m.budget || m.evicted == 0 {
				t.Fatalf("the log took %d bytes of %d and wrote out %d records", capacity, m.budget, m.evicted)
			}
			t.Logf("%d records written out, %d spilled, %d held in memory", m.evicted, m.spilled, len(m.held))
		})
	}
}
