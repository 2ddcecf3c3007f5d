package ab

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/judgetest"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/strictjson"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		v     RawVerdict
		field string // "" means valid
	}{
		{"A", RawVerdict{"A", 0.8, "gap", ""}, ""},
		{"B", RawVerdict{"B", 0.8, "gap", ""}, ""},
		{"tie", RawVerdict{"tie", 0.5, "no visible difference", ""}, ""},
		// Seed 000: "raw_winner not A/B/tie" is a schema violation (exit 3); the
		// spelling is exact.
		{"TIE from the comparator schema", RawVerdict{"TIE", 0.95, "gap", ""}, "raw_winner"},
		{"Tie", RawVerdict{"Tie", 0.95, "gap", ""}, "raw_winner"},
		{"lower-case slot a", RawVerdict{"a", 0.95, "gap", ""}, "raw_winner"},
		{"lower-case slot b", RawVerdict{"b", 0.95, "gap", ""}, "raw_winner"},
		{"upper-case TIE", RawVerdict{"TIE", 0.5, "gap", ""}, "raw_winner"},
		{"confidence 0", RawVerdict{"A", 0, "gap", ""}, ""},
		{"confidence 1", RawVerdict{"A", 1, "gap", ""}, ""},
		{"empty winner", RawVerdict{"", 0.5, "gap", ""}, "raw_winner"},
		{"role word leaks the blind", RawVerdict{"ours", 0.5, "gap", ""}, "raw_winner"},
		{"reference word", RawVerdict{"reference", 0.5, "gap", ""}, "raw_winner"},
		{"padded", RawVerdict{"A ", 0.5, "gap", ""}, "raw_winner"},
		{"long form", RawVerdict{"Version A", 0.5, "gap", ""}, "raw_winner"},
		{"C", RawVerdict{"C", 0.5, "gap", ""}, "raw_winner"},
		{"negative", RawVerdict{"A", -0.01, "gap", ""}, "confidence"},
		{"above one", RawVerdict{"A", 1.0000001, "gap", ""}, "confidence"},
		{"percent scale", RawVerdict{"A", 85, "gap", ""}, "confidence"},
		{"NaN", RawVerdict{"A", math.NaN(), "gap", ""}, "confidence"},
		{"+Inf", RawVerdict{"A", math.Inf(1), "gap", ""}, "confidence"},
		{"-Inf", RawVerdict{"A", math.Inf(-1), "gap", ""}, "confidence"},
		{"empty gap", RawVerdict{"A", 0.5, "", ""}, "biggest_gap"},
		{"blank gap", RawVerdict{"A", 0.5, " \n\t", ""}, "biggest_gap"},
		{"first violation wins", RawVerdict{"X", 7, "", ""}, "raw_winner"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.v.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate() = %v, want *FieldError", err)
			}
			if fe.Field != tc.field {
				t.Errorf("field = %q, want %q (%v)", fe.Field, tc.field, fe)
			}
			if fe.Reason == "" || fe.Error() == "" {
				t.Errorf("FieldError without reason: %#v", fe)
			}
		})
	}
}

func TestParseRawVerdict(t *testing.T) {
	t.Parallel()
	valid := RawVerdict{RawWinner: "B", Confidence: 0.72, BiggestGap: "B aligns the header grid."}
	tests := []struct {
		name   string
		in     string
		want   RawVerdict
		field  string // expected *FieldError field
		syntax bool   // expected strictjson.ErrNotObject
	}{
		{name: "plain", in: `{"raw_winner":"B","confidence":0.72,"biggest_gap":"B aligns the header grid."}`, want: valid},
		{name: "whitespace", in: "\n\t {\"raw_winner\": \"B\", \"confidence\": 0.72, \"biggest_gap\": \"B aligns the header grid.\"}\n\n", want: valid},
		{name: "key order free", in: `{"biggest_gap":"B aligns the header grid.","confidence":0.72,"raw_winner":"B"}`, want: valid},
		{name: "json fence", in: "```json\n{\"raw_winner\":\"B\",\"confidence\":0.72,\"biggest_gap\":\"B aligns the header grid.\"}\n```", want: valid},
		{name: "bare fence", in: "```\n{\"raw_winner\":\"B\",\"confidence\":0.72,\"biggest_gap\":\"B aligns the header grid.\"}\n```\n", want: valid},
		{name: "JSON fence upper-case, CRLF", in: "  ```JSON\r\n{\"raw_winner\":\"B\",\"confidence\":0.72,\"biggest_gap\":\"B aligns the header grid.\"}\r\n```  ", want: valid},
		{name: "with reasoning", in: `{"raw_winner":"tie","confidence":0.95,"biggest_gap":"Equal.","reasoning":"correctness: equal; completeness: equal"}`,
			want: RawVerdict{"tie", 0.95, "Equal.", "correctness: equal; completeness: equal"}},
		// Seed 000: exit 3 when "winner-file raw_winner not A/B/tie": no case folding.
		{name: "TIE is a violation", in: `{"raw_winner":"TIE","confidence":0.95,"biggest_gap":"Equal."}`, field: "raw_winner", want: RawVerdict{"TIE", 0.95, "Equal.", ""}},
		{name: "lower a is a violation", in: `{"raw_winner":"a","confidence":1,"biggest_gap":"x"}`, field: "raw_winner", want: RawVerdict{"a", 1, "x", ""}},
		{name: "exponent number", in: `{"raw_winner":"A","confidence":5e-1,"biggest_gap":"x"}`, want: RawVerdict{"A", 0.5, "x", ""}},
		{name: "gap mentioning fences", in: "```json\n{\"raw_winner\":\"A\",\"confidence\":0.5,\"biggest_gap\":\"A closes its ``` block\"}\n```", want: RawVerdict{"A", 0.5, "A closes its ``` block", ""}},

		{name: "empty", in: "", syntax: true},
		{name: "blank", in: " \n ", syntax: true},
		{name: "prose before", in: `Here you go: {"raw_winner":"A","confidence":0.5,"biggest_gap":"x"}`, syntax: true},
		{name: "prose after", in: `{"raw_winner":"A","confidence":0.5,"biggest_gap":"x"} Hope that helps`, syntax: true},
		{name: "two objects", in: `{"raw_winner":"A","confidence":0.5,"biggest_gap":"x"}{}`, syntax: true},
		{name: "array", in: `[{"raw_winner":"A","confidence":0.5,"biggest_gap":"x"}]`, syntax: true},
		{name: "string", in: `"A"`, syntax: true},
		{name: "truncated", in: `{"raw_winner":"A","confidence":0.5`, syntax: true},
		{name: "fence other language", in: "```yaml\n{\"raw_winner\":\"A\",\"confidence\":0.5,\"biggest_gap\":\"x\"}\n```", syntax: true},
		{name: "fence unterminated", in: "```json\n{\"raw_winner\":\"A\",\"confidence\":0.5,\"biggest_gap\":\"x\"}", syntax: true},
		{name: "fence one line", in: "```{\"raw_winner\":\"A\",\"confidence\":0.5,\"biggest_gap\":\"x\"}```", syntax: true},
		{name: "closing fence on the object line", in: "```json\n{\"raw_winner\":\"A\",\"confidence\":0.5,\"biggest_gap\":\"x\"}```", syntax: true},
		{name: "prose after fence", in: "```json\n{\"raw_winner\":\"A\",\"confidence\":0.5,\"biggest_gap\":\"x\"}\n```\nDone.", syntax: true},
		{name: "empty fence", in: "```json\n```", syntax: true},
		{name: "two fences", in: "```json\n{}\n```\n```json\n{}\n```", syntax: true},

		{name: "missing raw_winner", in: `{"confidence":0.5,"biggest_gap":"x"}`, field: "raw_winner"},
		{name: "missing confidence", in: `{"raw_winner":"A","biggest_gap":"x"}`, field: "confidence"},
		{name: "missing gap", in: `{"raw_winner":"A","confidence":0.5}`, field: "biggest_gap"},
		{name: "comparator schema", in: `{"preferred":"A","confidence":0.5,"reasoning":"x"}`, field: "preferred"},
		{name: "reasoning is no alias of biggest_gap", in: `{"raw_winner":"A","confidence":0.5,"reasoning":"x"}`, field: "biggest_gap"},
		{name: "null reasoning", in: `{"raw_winner":"A","confidence":0.5,"biggest_gap":"x","reasoning":null}`, field: "reasoning"},
		{name: "extra field", in: `{"raw_winner":"A","confidence":0.5,"biggest_gap":"x","winner":"ours"}`, field: "winner"},
		{name: "case-variant key", in: `{"Raw_Winner":"A","confidence":0.5,"biggest_gap":"x"}`, field: "Raw_Winner"},
		{name: "duplicate key", in: `{"raw_winner":"A","raw_winner":"B","confidence":0.5,"biggest_gap":"x"}`, field: "raw_winner"},
		{name: "null winner", in: `{"raw_winner":null,"confidence":0.5,"biggest_gap":"x"}`, field: "raw_winner"},
		{name: "numeric winner", in: `{"raw_winner":1,"confidence":0.5,"biggest_gap":"x"}`, field: "raw_winner"},
		{name: "string confidence", in: `{"raw_winner":"A","confidence":"0.5","biggest_gap":"x"}`, field: "confidence"},
		{name: "null confidence", in: `{"raw_winner":"A","confidence":null,"biggest_gap":"x"}`, field: "confidence"},
		{name: "huge confidence", in: `{"raw_winner":"A","confidence":1e400,"biggest_gap":"x"}`, field: "confidence"},
		{name: "confidence above 1", in: `{"raw_winner":"A","confidence":1.5,"biggest_gap":"x"}`, field: "confidence", want: RawVerdict{"A", 1.5, "x", ""}},
		{name: "negative confidence", in: `{"raw_winner":"B","confidence":-0.1,"biggest_gap":"x"}`, field: "confidence", want: RawVerdict{"B", -0.1, "x", ""}},
		{name: "bad label", in: `{"raw_winner":"C","confidence":0.5,"biggest_gap":"x"}`, field: "raw_winner", want: RawVerdict{"C", 0.5, "x", ""}},
		{name: "role label", in: `{"raw_winner":"ours","confidence":0.5,"biggest_gap":"x"}`, field: "raw_winner", want: RawVerdict{"ours", 0.5, "x", ""}},
		{name: "blank gap", in: `{"raw_winner":"A","confidence":0.5,"biggest_gap":"  "}`, field: "biggest_gap", want: RawVerdict{"A", 0.5, "  ", ""}},
		{name: "gap array", in: `{"raw_winner":"A","confidence":0.5,"biggest_gap":["x"]}`, field: "biggest_gap"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRawVerdict([]byte(tc.in))
			switch {
			case tc.syntax:
				if !errors.Is(err, strictjson.ErrNotObject) || !strings.HasPrefix(err.Error(), "ab verdict: ") {
					t.Fatalf("err = %v, want strictjson.ErrNotObject naming the ab verdict", err)
				}
			case tc.field != "":
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != tc.field {
					t.Fatalf("err = %v, want *FieldError on %q", err, tc.field)
				}
			default:
				if err != nil {
					t.Fatalf("err = %v", err)
				}
			}
			if got != tc.want {
				t.Errorf("verdict = %#v, want %#v", got, tc.want)
			}
		})
	}
}

func FuzzParseRawVerdict(f *testing.F) {
	seeds := []string{
		`{"raw_winner":"A","confidence":0.8,"biggest_gap":"x"}`,
		"```json\n{\"raw_winner\":\"tie\",\"confidence\":0,\"biggest_gap\":\"same\"}\n```",
		`{"raw_winner":"TIE","confidence":1,"biggest_gap":"y"}`,
		`{"preferred":"B","confidence":0.7,"reasoning":"z"}`,
		`{"raw_winner":"B","confidence":1e400,"biggest_gap":"x"}`,
		`{"raw_winner":"A","raw_winner":"B"}`,
		"```\n{}\n```",
		"",
	}
	judgetest.FuzzAnswer(f, seeds, ParseRawVerdict, strictjson.ErrNotObject, func(t *testing.T, v RawVerdict) {
		if err := v.Validate(); err != nil {
			t.Fatalf("accepted verdict %#v does not validate: %v", v, err)
		}
		if v.RawWinner != LabelA && v.RawWinner != LabelB && v.RawWinner != RawTie {
			t.Fatalf("raw_winner not canonical: %q", v.RawWinner)
		}
	})
}

// TestRawWinnerExactlyAsSeed pins seed 000's rule: a verdict is
// `{raw_winner: "A"|"B"|"tie", ...}`, and exit 3 is "Schema violation: winner-file
// `raw_winner` not `A`/`B`/`tie`". Only those three spellings pass; every other one,
// case variants included, makes the comparison a schema violation and the run exit 3.
func TestRawWinnerExactlyAsSeed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw  string
		exit int
	}{
		{"A", kind.ExitClean}, {"B", kind.ExitFindings}, {"tie", kind.ExitFindings},
		{"a", kind.ExitSchemaViolation}, {"b", kind.ExitSchemaViolation}, {"TIE", kind.ExitSchemaViolation},
		{"Tie", kind.ExitSchemaViolation}, {"T", kind.ExitSchemaViolation}, {"A ", kind.ExitSchemaViolation},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			in := `{"raw_winner":` + strconvQuote(tc.raw) + `,"confidence":0.9,"biggest_gap":"g"}`
			v, err := ParseRawVerdict([]byte(in))
			var c Comparison
			if err != nil {
				c = SchemaViolation("AC-7", Pair{Ours: "o", Reference: "r"}, Assign("AC-7", 0), err)
			} else {
				c = Compared("AC-7", Pair{Ours: "o", Reference: "r"}, Assign("AC-7", 0), v)
			}
			m := BuildManifest("ab-critic-1", "cfn-ab-critic", time.Unix(0, 0), 0.75, []Comparison{c})
			if got := kind.ExitCode(m.Outcomes()); got != tc.exit {
				t.Fatalf("raw_winner %q: exit %d, want %d (%v)", tc.raw, got, tc.exit, err)
			}
		})
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// benchVerdict is a typical answer: a fenced object with a gap and a short per-dimension
// summary, as models send them.
const benchVerdict = "```json\n" + `{"raw_winner": "B", "confidence": 0.82, "biggest_gap": "B keeps the form's labels above their fields; A puts them inside as placeholders that vanish on input.", "reasoning": "correctness: B; completeness: equal; clarity: B, labels stay visible; consistency: equal; accessibility: B, placeholders are no labels."}` + "\n```"

// BenchmarkParseRawVerdict is the judge's cost per ab answer (one per call).
func BenchmarkParseRawVerdict(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseRawVerdict([]byte(benchVerdict)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawVerdictValidate is the aggregator's cost per recorded vote (derive re-checks
// every ok vote).
func BenchmarkRawVerdictValidate(b *testing.B) {
	v, err := ParseRawVerdict([]byte(benchVerdict))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}
