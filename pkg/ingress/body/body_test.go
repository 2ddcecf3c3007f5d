package body

import (
	"bytes"
	"encoding/binary"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// allocated is what fn allocates on the heap, in bytes (runtime/metrics, which unlike
// ReadMemStats does not stop the world, so the fuzzer keeps its pace).
func allocated(fn func()) uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	fn()
	metrics.Read(s)
	return s[0].Value.Uint64() - before
}

func claim(lead byte, n uint32, tail ...byte) []byte {
	b := []byte{lead, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], n)
	return append(b, tail...)
}

// FuzzRead holds the request decoder to a memory limit proportional to its input,
// whatever the bytes: the body is split (Read) and each event decoded as the ingress does
// (events.Decode), and what one input allocates may not pass 1 MiB plus 512 bytes per
// byte of input (a claim once made five bytes allocate 4 GiB). The seeds are the hostile
// bodies and a real request.
func FuzzRead(f *testing.F) {
	// The bodies that once cost the ingress its memory (pkg/ingress's hostile bodies).
	f.Add(claim(0xdd, 0xffffffff))
	f.Add(claim(0xdd, 10_000_000))
	f.Add(claim(0xdf, 0x7fffffff))
	f.Add(append([]byte{0x91}, claim(0xc6, 0x7fffffff)...))
	inner, _ := msgpack.Marshal([][]byte{append([]byte{0x82, 0xa1, 'v', 0x01, 0xa4, 'd', 'a', 't', 'a'}, claim(0xdd, 0xffffffff)...)})
	f.Add(inner)
	ev, err := events.Encode(events.Event{Envelope: events.Envelope{ID: strings.Repeat("a", 32), Tenant: "team-a", BatchID: "b1", JobID: "AC-1"},
		Payload: &events.SpotcheckRecorded{ACID: "AC-1", Approved: true}})
	if err != nil {
		f.Fatal(err)
	}
	valid, _ := msgpack.Marshal([][]byte{ev})
	f.Add(valid)
	f.Fuzz(func(t *testing.T, body []byte) {
		n := allocated(func() {
			raw, err := Read(MediaMsgpack, bytes.NewReader(body))
			if err != nil {
				return
			}
			for _, data := range raw {
				_, _ = events.Decode(data)
			}
		})
		if limit := uint64(1<<20) + 512*uint64(len(body)); n > limit {
			t.Fatalf("a %d-byte body allocated %d bytes, over %d", len(body), n, limit)
		}
	})
}
