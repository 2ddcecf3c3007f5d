package ingress

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
)

const boundsToken = "team-a-token-0123456789abcdef"

// hostileBodies are POST /v1/events bodies that once cost the ingress its memory; each
// must be refused with a 4xx naming what is wrong, allocating next to nothing.
func hostileBodies() []struct {
	name, contentType string
	body              []byte
	code              int
	says              string
} {
	claim := func(lead byte, n uint32, tail ...byte) []byte {
		b := []byte{lead, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[1:], n)
		return append(b, tail...)
	}
	// A well-formed request whose one event hides the claim inside its payload.
	inner, _ := msgpack.Marshal([][]byte{append([]byte{0x82, 0xa1, 'v', 0x01, 0xa4, 'd', 'a', 't', 'a'}, claim(0xdd, 0xffffffff)...)})
	tooMany, _ := msgpack.Marshal(make([][]byte, MaxRequestEvents+1))
	deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	return []struct {
		name, contentType string
		body              []byte
		code              int
		says              string
	}{
		// de157a3: `fatal error: runtime: out of memory` (msgpack allocated the claim).
		{"array32 claiming 4,294,967,295 events", MediaMsgpack, claim(0xdd, 0xffffffff), http.StatusBadRequest, "claims 4294967295 elements, 0 bytes follow"},
		// de157a3: 70 -> 267 MiB for 5 bytes.
		{"array32 claiming 10,000,000 events", MediaMsgpack, claim(0xdd, 10_000_000), http.StatusBadRequest, "claims 10000000 elements"},
		{"map32 claim", MediaMsgpack, claim(0xdf, 0x7fffffff), http.StatusBadRequest, "claims 2147483647 pairs"},
		{"bin32 claim for one event", MediaMsgpack, append([]byte{0x91}, claim(0xc6, 0x7fffffff)...), http.StatusBadRequest, "[0]"},
		{"the claim inside an event's payload", MediaMsgpack, inner, http.StatusBadRequest, "field data"},
		{"more events than a request carries", MediaMsgpack, tooMany, http.StatusRequestEntityTooLarge, fmt.Sprintf("at most %d events", MaxRequestEvents)},
		{"JSON nested 100,000 deep", MediaJSON, []byte(`{"events": ` + deep + `}`), http.StatusBadRequest, "deep, at most"},
		{"JSON event nested too deep", MediaJSON, []byte(`{"events": [{"data": ` + strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat(`}`, 40) + `}]}`), http.StatusBadRequest, "events[0].data"},
	}
}

func boundsServer(t testing.TB) http.Handler {
	store, err := fileblob.New(t.TempDir(), fileblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return New(Config{Tokens: map[string]string{boundsToken: "team-a"}, Store: store})
}

func postBody(h http.Handler, contentType string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, PathEvents, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+boundsToken)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

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

// TestHostileBodiesAreRefusedCheaply sends each hostile body through the ingress's
// handler: a 4xx naming the problem, with under 10 MiB allocated for it (the 5-byte body
// needed 4 GiB before). How long each takes is BenchmarkHostileBodies'.
func TestHostileBodiesAreRefusedCheaply(t *testing.T) {
	h := boundsServer(t)
	for _, tc := range hostileBodies() {
		t.Run(tc.name, func(t *testing.T) {
			var rec *httptest.ResponseRecorder
			n := allocated(func() { rec = postBody(h, tc.contentType, tc.body) })
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.says) {
				t.Errorf("%d %s, want %d saying %q", rec.Code, rec.Body, tc.code, tc.says)
			}
			if limit := uint64(10<<20) + 4*uint64(len(tc.body)); n > limit {
				t.Errorf("refusing a %d-byte body allocated %d bytes, over %d", len(tc.body), n, limit)
			}
		})
	}
}

func BenchmarkHostileBodies(b *testing.B) {
	h := boundsServer(b)
	for _, tc := range hostileBodies() {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if rec := postBody(h, tc.contentType, tc.body); rec.Code != tc.code {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
