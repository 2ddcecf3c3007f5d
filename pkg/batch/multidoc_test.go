package batch

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestParseRefusesSecondDocument: a second YAML document after --- used to be dropped
// without a word, its ACs with it; it is a file error naming the marker's line.
func TestParseRefusesSecondDocument(t *testing.T) {
	t.Parallel()
	const first = "version: 1\nacs:\n  - id: AC-1\n    criterion: c\n    ours: a.md\n    reference: b.md\n"
	const second = "acs:\n  - id: AC-2\n    criterion: c\n    ours: a.md\n    reference: b.md\n"
	tests := []struct {
		name, data string
		line       int
	}{
		{"second document", first + "---\n" + second, 7},
		{"both documents marked", "---\n" + first + "---\n" + second, 8},
		{"marker with a comment", first + "# more ACs\n--- # next\n" + second, 8},
		{"empty second document", first + "---\n", 7},
		{"second document that does not parse", first + "---\nacs: [\n", 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Parse("batch.yaml", []byte(tt.data))
			var errs Errors
			if !errors.As(err, &errs) || len(errs) != 1 {
				t.Fatalf("Parse = %v, %v; want one file error", b, err)
			}
			if errs[0].Line != tt.line || !strings.Contains(errs[0].Msg, "second YAML document") {
				t.Fatalf("error %q at line %d; want the second document at line %d", errs[0].Msg, errs[0].Line, tt.line)
			}
			if want := fmt.Sprintf("batch.yaml:%d: ", tt.line); !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
		})
	}
	// One document, with or without its markers, is still a batch.
	for _, data := range []string{first, "---\n" + first, first + "...\n", "---\n" + first + "...\n"} {
		b, err := Parse("batch.yaml", []byte(data))
		if err != nil || len(b.ACs) != 1 {
			t.Errorf("Parse(%q) = %v; want its one AC", data, err)
		}
	}
}
