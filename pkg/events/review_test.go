package events

import (
	"strings"
	"testing"
)

// TestReviewCase: a review's case is optional and, when given, a case id (the transfer
// set's names); the same answer to two cases is two reviews, and a review without a case
// keeps the id step it had before cases existed. The case survives the wire.
func TestReviewCase(t *testing.T) {
	t.Parallel()
	answer := `{"verdict":"equivalent","behaviour_delta":"","efficiency_signal":{"original_directness":3,"candidate_directness":3,"interpretation_notes":"x"}}`
	ok := ReviewRecorded{Kind: KindEquivalence, Answer: answer, By: "ann", Case: "case-2"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"case 2", "../x", strings.Repeat("c", 129), "-lead"} {
		p := ok
		p.Case = bad
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "case") {
			t.Errorf("case %q: %v, want an error naming the case", bad, err)
		}
	}
	if ReviewCaseStep("ann", "", answer) != ReviewStep("ann", answer) {
		t.Fatal("a review without a case changed its id step")
	}
	if ReviewCaseStep("ann", "c1", answer) == ReviewCaseStep("ann", "c2", answer) || ReviewCaseStep("ann", "c1", answer) == ReviewStep("ann", answer) {
		t.Fatal("the same answer to two cases shares an id step")
	}
	if ok.Step() != ReviewCaseStep("ann", "case-2", answer) {
		t.Fatal("Step is not ReviewCaseStep")
	}
	data, err := Encode(New(&ok, "team-a", "b1", "AC-7", 0, ok.Step(), nil))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil || got.Payload.(*ReviewRecorded).Case != "case-2" {
		t.Fatalf("decoded %+v, %v", got.Payload, err)
	}
	none := ok
	none.Case = ""
	if data, _ := Encode(New(&none, "team-a", "b1", "AC-7", 0, none.Step(), nil)); strings.Contains(string(data), "case") {
		t.Fatal("a review without a case carries a case key on the wire")
	}
}
