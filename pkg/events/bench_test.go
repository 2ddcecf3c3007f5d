package events_test

import (
	"testing"

	. "github.com/tribunal-dev/tribunal/pkg/events"
)

// BenchmarkEvents measures encoding and decoding every event type once (samples, the
// shipped kinds' parts among them): the cost a change to how a kind's part travels must
// be held to (docs/benchmarks.md).
func BenchmarkEvents(b *testing.B) {
	var evs []Event
	for _, p := range samples() {
		evs = append(evs, New(p, "team-a", "b1", "AC-7", 0, "", nil))
	}
	var data [][]byte
	for _, e := range evs {
		d, err := Encode(e)
		if err != nil {
			b.Fatal(err)
		}
		data = append(data, d)
	}
	b.Run("Encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, e := range evs {
				if _, err := Encode(e); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, d := range data {
				if _, err := Decode(d); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
