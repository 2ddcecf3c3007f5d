package batch

// Each test here pins a bug found in an earlier parser (built on goccy/go-yaml) so that
// no rewrite brings it back.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Bug A: an AC-level type error (judges not a list, criterion not a string, an entry
// that is not a mapping) stopped the whole file instead of costing only that AC.
func TestBugACTypeErrorKeepsTheRest(t *testing.T) {
	t.Parallel()
	const file = "b/batch.yaml"
	tests := []struct {
		name, bad, field string
		line             int
		msg              string
	}{
		{"judges not a list", "  - id: AC-2\n    judges: gpt-4\n", "judges", 7, "array"},
		{"criterion not a string", "  - id: AC-2\n    criterion: [1, 2]\n", "criterion", 7, "string"},
		{"criterion a mapping", "  - id: AC-2\n    criterion: {a: 1}\n", "criterion", 7, "string"},
		{"iteration not a number", "  - id: AC-2\n    iteration: soon\n", "iteration", 7, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := parseAround(t, file, tt.bad)
			if len(b.ACs) != 3 || b.ACs[0].Problem() != "" || b.ACs[2].Problem() != "" || b.ACs[1].ID != "AC-2" {
				t.Fatalf("ACs = %+v", b.ACs)
			}
			loc := "AC-2: line " + strconv.Itoa(tt.line) + ": " + tt.field + ":"
			if !strings.HasPrefix(b.ACs[1].Problem(), loc) || !strings.Contains(b.ACs[1].Problem(), tt.msg) {
				t.Errorf("Problem = %q; want %q and %q", b.ACs[1].Problem(), loc, tt.msg)
			}
		})
	}
	t.Run("entry not a mapping", func(t *testing.T) {
		b, err := Parse("batch.yaml", []byte("version: 1\nacs:\n  - AC-1\n  - id: AC-2\n"))
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		if len(b.ACs) != 1 || b.ACs[0].ID != "AC-2" {
			t.Errorf("ACs = %+v; want AC-2 only", b.ACs)
		}
		if len(b.Rejected) != 1 || b.Rejected[0].Line != 3 || b.Rejected[0].Field != "acs[0].id" {
			t.Errorf("Rejected = %v; want acs[0] at line 3", b.Rejected)
		}
	})
}

// Bug B: file-level errors that are about a missing key, or several unknown keys, or an
// unknown key containing '.', name neither a line nor the field ("(document)").
func TestBugFileErrorsNameLineAndField(t *testing.T) {
	t.Parallel()
	const file = "teams/a/batch.yaml"
	tests := []struct {
		name, doc string
		line      int
		field     string
	}{
		{"acs missing", "version: 1\nname: x\n", 1, "acs"},
		{"version missing", "name: x\nacs:\n  - id: AC-1\n", 1, "version"},
		{"two unknown keys, first", "version: 1\nbogus: 3\nacs:\n  - id: AC-1\nzany: 4\n", 2, "bogus"},
		{"two unknown keys, second", "version: 1\nbogus: 3\nacs:\n  - id: AC-1\nzany: 4\n", 5, "zany"},
		{"unknown key with a dot", "version: 1\nacs:\n  - id: AC-1\n\"x.y\": 1\n", 4, "x.y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertFileError(t, file, tt.doc, tt.line, tt.field, tt.field)
		})
	}
}

// Bug C: an unknown key that looks like a path index made Parse panic (a path was built
// from user text).
func TestBugUnknownKeyWithPathSyntaxDoesNotPanic(t *testing.T) {
	t.Parallel()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Parse panicked: %v", r)
		}
	}()
	_, err := Parse("b.yaml", []byte("version: 1\nacs:\n  - id: AC-1\nx[0: 1\n"))
	if err == nil {
		t.Fatal("unknown key accepted")
	}
	if !strings.Contains(err.Error(), "b.yaml:4:") {
		t.Errorf("err = %v; want line 4", err)
	}
}

// Bug D: YAML alias expansion is unbounded: a 359-byte batch takes ~15 s and ~5 GB.
func aliasBomb(levels int) []byte {
	var sb strings.Builder
	sb.WriteString("version: 1\nacs:\n  - id: AC-1\nl0: &l0 [x,x,x,x,x,x,x,x,x,x]\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&sb, "l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", i-1), 10), ","))
	}
	return []byte(sb.String())
}

func TestBugAliasExpansionIsBounded(t *testing.T) {
	t.Parallel()
	data := aliasBomb(6)
	done := make(chan error, 1)
	go func() {
		_, err := Parse("bomb/batch.yaml", data)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Parse accepted an alias bomb")
		}
	case <-time.After(time.Second):
		t.Fatalf("Parse of a %d-byte file took over 1s: alias expansion is unbounded", len(data))
	}
}

// Repeated and unknown keys by the thousand: yaml.v3 compares every pair of repeated keys
// (gigabytes for 8,000), and the schema library names every unknown key in each key's
// error. Both are caught before that, and the report stays readable.
func TestManyBadKeysStayBounded(t *testing.T) {
	t.Parallel()
	for name, line := range map[string]func(i int) string{
		"repeated": func(int) string { return "name: x\n" },
		"unknown":  func(i int) string { return fmt.Sprintf("bogus%d: x\n", i) },
	} {
		t.Run(name, func(t *testing.T) {
			var sb strings.Builder
			sb.WriteString("version: 1\nacs:\n  - id: AC-1\n")
			for i := range 8000 {
				sb.WriteString(line(i))
			}
			_, err := Parse("b.yaml", []byte(sb.String()))
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("err = %v; want Errors", err)
			}
			if len(es) != maxProblems+1 || !strings.Contains(es[len(es)-1].Msg, "more problems") {
				t.Fatalf("%d errors, last %q; want %d and a count of the rest", len(es), es[len(es)-1], maxProblems+1)
			}
			if n := len(err.Error()); n > 4000 {
				t.Fatalf("error text is %d bytes", n)
			}
			if es[0].Line != 4 && es[0].Line != 5 {
				t.Errorf("first error at line %d", es[0].Line)
			}
		})
	}
}
