package rulebook_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// completedFold decides n ab jobs in memory and returns the batch's completion.
func completedFold(t *testing.T, n int) *rulebook.Completion {
	t.Helper()
	m := &rulebook.Memory{}
	for i := 0; i < n; i++ {
		if _, err := m.Apply(in(submit(abSpec(fmt.Sprintf("AC-%d", i)), i, n))); err != nil {
			t.Fatal(err)
		}
	}
	var done *rulebook.Completion
	for i := 0; i < n; i++ {
		raw := []string{"A", "B", "tie"}[i%3]
		res, err := m.Apply(in(abVerdict(fmt.Sprintf("AC-%d", i), raw, 0.9, 0)))
		if err != nil {
			t.Fatal(err)
		}
		if res.Complete != nil {
			done = res.Complete
		}
	}
	if done == nil {
		t.Fatalf("%d jobs decided, no completion", n)
	}
	return done
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestCompleteStoredStreamsTheManifest: the aggregator's completion stores each manifest
// as it is encoded, byte for byte what Complete builds in memory, and never holds it: the
// live heap grown while the store reads the last of a 3,000-comparison manifest (about
// 3 MiB) is held under half the manifest's size, where holding the manifest (as
// Complete does) is all of it. A 1,000,000-AC manifest is about 1.1 GiB.
func TestCompleteStoredStreamsTheManifest(t *testing.T) {
	const n = 3000
	full := completedFold(t, n).Fold()
	full.KeepIndex()
	want, err := full.Complete("AC-2", 0)
	if err != nil {
		t.Fatal(err)
	}
	wantIndex := want.Index

	fold := completedFold(t, n).Fold()
	fold.KeepIndex()
	stored := map[string][]byte{}
	var grown []int64
	var size []int64
	base := liveHeap()
	got, err := fold.CompleteStored("AC-2", 0, func(mediaType string, r io.Reader) (events.Blob, error) {
		// Read as a store does, in pieces, keeping only the digest-worthy bytes aside
		// for the comparison below (outside the measured heap: copied after the GC).
		var buf bytes.Buffer
		var tmp [32 << 10]byte
		var kept [][]byte
		var read int64
		measured := false
		for {
			k, err := r.Read(tmp[:])
			if k > 0 {
				kept = append(kept, append([]byte(nil), tmp[:k]...))
				read += int64(k)
			}
			if mediaType == "application/json" && !measured && read > 1<<20 {
				// Half way through, what the reader itself kept left out.
				measured = true
				grown = append(grown, int64(liveHeap())-int64(base)-read)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return events.Blob{}, err
			}
		}
		if mediaType == "application/json" {
			size = append(size, read)
		}
		for _, p := range kept {
			buf.Write(p)
		}
		sum := sha256Hex(buf.Bytes())
		stored[sum] = buf.Bytes()
		return events.Blob{SHA256: sum, MediaType: "something/else", Size: int64(buf.Len())}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(want.Completion)
	b, _ := json.Marshal(got.Completion)
	if !bytes.Equal(a, b) {
		t.Fatalf("stored completion\n%s\nwant\n%s", b, a)
	}
	if got.Manifests != nil && len(got.Manifests) > 0 || got.Index != nil {
		t.Fatalf("the stored completion kept %d manifests and %d index bytes", len(got.Manifests), len(got.Index))
	}
	for k, data := range want.Manifests {
		ref := want.Completion.Manifests[k]
		if !bytes.Equal(stored[ref.SHA256], data) {
			t.Fatalf("%s manifest stored as %d bytes, want %d", k, len(stored[ref.SHA256]), len(data))
		}
	}
	if !bytes.Equal(stored[want.Completion.Index.SHA256], wantIndex) {
		t.Fatalf("index stored as %d bytes, want %d", len(stored[want.Completion.Index.SHA256]), len(wantIndex))
	}
	if len(size) != 1 || size[0] < 2<<20 {
		t.Fatalf("manifests of sizes %v, want one of over 2 MiB", size)
	}
	if grown[0] > size[0]/2 {
		t.Fatalf("the live heap grew %d bytes while a %d-byte manifest was stored, want under half of it", grown[0], size[0])
	}
	t.Logf("manifest %d bytes, live heap grown %d bytes while it was stored", size[0], grown[0])
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
