package records

import "testing"

// TestHandedOncePerRecord: a record comes again (rewritten while read) and is not handed
// twice; another key at a taken index, and indexes out of the slice's range, are each
// handed once, by key.
func TestHandedOncePerRecord(t *testing.T) {
	var h handed
	for _, tc := range []struct {
		key   string
		index int
		want  bool
	}{
		{"t.b.AC-1", 1, true},
		{"t.b.AC-3", 3, true},
		{"t.b.AC-1", 1, false},
		{"t.b.AC-0", 0, true},
		{"t.b.AC-X", 1, true}, // a corrupt record under AC-1's index: the reader sees it
		{"t.b.AC-X", 1, false},
		{"t.b.AC-1", 1, false},
		{"t.b.AC-neg", -1, true},
		{"t.b.AC-neg", -1, false},
		{"t.b.AC-far", handedIndexes, true},
		{"t.b.AC-far", handedIndexes, false},
		{"t.b.AC-3", 3, false},
	} {
		if got := h.first(tc.key, tc.index); got != tc.want {
			t.Errorf("first(%s, %d) = %v, want %v", tc.key, tc.index, got, tc.want)
		}
	}
}
