package dictzstd

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
)

// TestRoundTrip: values encoded before and after the codec has a dictionary decode to
// themselves; similar values shrink once it has one; the codec starts no goroutine.
func TestRoundTrip(t *testing.T) {
	before := runtime.NumGoroutine()
	var c Codec
	value := func(i int) []byte {
		return []byte(fmt.Sprintf(`{"tenant":"team-a","batch":"b-1","ac_id":"AC-%d","status":"compared","spec":{"criterion":"the notes are clear"},"inputs":["%064x"]}`, i, i*7919))
	}
	var encs [][]byte
	for i := 0; i < 40; i++ {
		encs = append(encs, c.Encode(value(i), i == 10))
	}
	if encs[5][0] != plain || encs[20][0] != compressed || len(encs[20]) >= len(value(20))/2 {
		t.Fatalf("before the dictionary %d bytes (form %d), after %d of %d (form %d)", len(encs[5]), encs[5][0], len(encs[20]), len(value(20)), encs[20][0])
	}
	for i, e := range encs {
		got, err := c.Decode(e)
		if err != nil || !bytes.Equal(got, value(i)) {
			t.Fatalf("value %d: %s, %v", i, got, err)
		}
	}
	if _, err := c.Decode([]byte{7}); err == nil {
		t.Fatal("a foreign encoding decodes")
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("%d goroutines before, %d after", before, after)
	}
}
