package equivalence

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/strictjson"
)

const validRun = `{"transcript": "Read the request. Asked which branch to use. Listed the files to change.",
 "self_report": {
  "steps_followed": ["confirm the target branch", "list the files to change"],
  "steps_skipped": ["run the tests: no test command is given for this repo"],
  "ambiguities": [{"question": "does 'small change' include docs?", "resolution": "treated docs as included"}],
  "improvisation": [],
  "deviation_urges": ["wanted to refactor the helper but the document forbids drive-by changes"],
  "final_output": "Proposed a two-file change and asked for confirmation."}}`

func TestParseRunnerOutput(t *testing.T) {
	t.Parallel()
	got, err := ParseRunnerOutput([]byte(validRun))
	if err != nil {
		t.Fatal(err)
	}
	want := Transcript{
		Text: "Read the request. Asked which branch to use. Listed the files to change.",
		SelfReport: SelfReport{
			StepsFollowed:  []string{"confirm the target branch", "list the files to change"},
			StepsSkipped:   []string{"run the tests: no test command is given for this repo"},
			Ambiguities:    []Ambiguity{{"does 'small change' include docs?", "treated docs as included"}},
			Improvisation:  []string{},
			DeviationUrges: []string{"wanted to refactor the helper but the document forbids drive-by changes"},
			FinalOutput:    "Proposed a two-file change and asked for confirmation.",
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
	// Empty lists come back as [], never null, so a re-marshalled transcript parses again.
	out, _ := json.Marshal(got)
	if !strings.Contains(string(out), `"improvisation":[]`) {
		t.Errorf("empty list not marshalled as []: %s", out)
	}
	if _, err := ParseRunnerOutput(out); err != nil {
		t.Errorf("round trip: %v", err)
	}
}

func TestParseRunnerOutputViolations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, old, new, field string
	}{
		{"blank transcript", `"transcript": "Read the request. Asked which branch to use. Listed the files to change."`, `"transcript": " "`, "transcript"},
		{"null list", `"improvisation": []`, `"improvisation": null`, "self_report.improvisation"},
		{"missing list", `"improvisation": [],`, ``, "self_report.improvisation"},
		{"list of numbers", `"improvisation": []`, `"improvisation": [1]`, "self_report.improvisation[0]"},
		{"blank list entry", `"improvisation": []`, `"improvisation": ["ok", ""]`, "self_report.improvisation[1]"},
		{"ambiguity without resolution", `, "resolution": "treated docs as included"`, ``, "self_report.ambiguities[0].resolution"},
		{"ambiguity blank resolution", `"resolution": "treated docs as included"`, `"resolution": ""`, "self_report.ambiguities[0].resolution"},
		{"ambiguity as a string", `[{"question": "does 'small change' include docs?", "resolution": "treated docs as included"}]`, `["docs?"]`, "self_report.ambiguities[0]"},
		{"ambiguity extra key", `"resolution": "treated docs as included"`, `"resolution": "x", "confidence": 1`, "self_report.ambiguities[0].confidence"},
		{"unknown self-report field", `"improvisation": []`, `"improvisation": [], "mood": "fine"`, "self_report.mood"},
		{"blank final output", `"final_output": "Proposed a two-file change and asked for confirmation."`, `"final_output": ""`, "self_report.final_output"},
		{"final output at top level", `"transcript":`, `"final_output": "x", "transcript":`, "final_output"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := strings.Replace(validRun, tc.old, tc.new, 1)
			if in == validRun {
				t.Fatalf("replacement %q did not apply", tc.old)
			}
			_, err := ParseRunnerOutput([]byte(in))
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want *FieldError on %s", err, tc.field)
			}
			if fe.Field != tc.field {
				t.Errorf("field = %q, want %q (%v)", fe.Field, tc.field, err)
			}
		})
	}
	var fe *FieldError
	if _, err := ParseRunnerOutput([]byte(`{"transcript": "t", "self_report": "all fine"}`)); !errors.As(err, &fe) || fe.Field != "self_report" {
		t.Errorf("self_report as a string: %v, want a FieldError on self_report", err)
	}
	if _, err := ParseRunnerOutput([]byte("I followed the document.")); !errors.Is(err, strictjson.ErrNotObject) || !strings.HasPrefix(err.Error(), "equivalence: ") {
		t.Errorf("prose: %v, want strictjson.ErrNotObject naming equivalence", err)
	}
}

func TestRender(t *testing.T) {
	t.Parallel()
	tr, err := ParseRunnerOutput([]byte(validRun))
	if err != nil {
		t.Fatal(err)
	}
	got := tr.Render()
	for _, want := range []string{
		"TRANSCRIPT:\nRead the request.",
		"steps_followed:\n  - confirm the target branch\n  - list the files to change\n",
		"improvisation: (none)\n",
		"ambiguities:\n  - does 'small change' include docs? -> resolved: treated docs as included\n",
		"deviation_urges:\n  - wanted to refactor",
		"final_output:\nProposed a two-file change and asked for confirmation.\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Render() lacks %q:\n%s", want, got)
		}
	}
	if tr.Render() != got {
		t.Error("Render is not deterministic")
	}
}

func FuzzParseRunnerOutput(f *testing.F) {
	f.Add([]byte(validRun))
	f.Add([]byte(`{"transcript":"t","self_report":{"steps_followed":[],"steps_skipped":[],"ambiguities":[],"improvisation":[],"deviation_urges":[],"final_output":"o"}}`))
	f.Add([]byte(`{"transcript":"t","self_report":{"ambiguities":[{"question":"q","question":"r"}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := ParseRunnerOutput(data)
		if err != nil {
			return
		}
		if verr := tr.Validate(); verr != nil {
			t.Fatalf("accepted a transcript Validate rejects: %v", verr)
		}
		out, _ := json.Marshal(tr)
		back, err := ParseRunnerOutput(out)
		if err != nil || !reflect.DeepEqual(tr, back) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
