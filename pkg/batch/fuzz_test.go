package batch

import (
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, and whatever it accepts has only ACs with valid,
// distinct ids; it never returns both a batch and an error.
func FuzzParse(f *testing.F) {
	f.Add([]byte(validBatch))
	f.Add([]byte("version: 1\nacs:\n  - id: AC-1\n"))
	f.Add([]byte("version: 1\nacs:\n  - id: AC-1\n    judges: gpt\n  - AC-2\n  - id: AC-1\n"))
	f.Add([]byte("\x00\xff\xfe garbage ::: [[ }}"))
	f.Add([]byte("hello"))
	f.Add([]byte(""))
	f.Add([]byte("version: 1\nacs:\n  - id: AC-1\n    criterion: " + strings.Repeat("[", 200) + strings.Repeat("]", 200) + "\n"))
	f.Add([]byte(strings.Repeat("- ", 300) + "x\n"))
	f.Add([]byte(strings.Repeat("{a: ", 100) + "1" + strings.Repeat("}", 100)))
	f.Add([]byte("a: &a [*a, *a]\nversion: 1\nacs: [{id: AC-1}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Parse("fuzz/batch.yaml", data)
		if err != nil {
			if b != nil {
				t.Fatalf("Parse returned a batch and an error %v", err)
			}
			return
		}
		if b == nil {
			t.Fatal("Parse returned neither a batch nor an error")
		}
		if len(b.ACs) == 0 {
			t.Fatal("Parse accepted a batch without ACs")
		}
		seen := map[string]bool{}
		for _, ac := range b.ACs {
			if validID(ac.ID) != nil {
				t.Fatalf("accepted AC with invalid id %q", ac.ID)
			}
			if seen[ac.ID] {
				t.Fatalf("accepted duplicate id %q", ac.ID)
			}
			seen[ac.ID] = true
			if ac.Line <= 0 {
				t.Fatalf("AC %s has no line", ac.ID)
			}
		}
	})
}
