package events_test

import (
	"strings"
	"testing"

	. "github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"
)

func TestBlobs(t *testing.T) {
	t.Parallel()
	b := func(c string) Blob { return Blob{SHA256: strings.Repeat(c, 64), MediaType: "text/plain", Size: 1} }
	ob, rb := b("a"), b("b")
	p := &JobSubmitted{BatchSize: 1, Spec: JobSpec{Kind: KindAB, ACID: "AC-1", KindPart: &ab.Spec{
		Ours: Source{Name: "o", Blob: &ob}, Reference: Source{Name: "r", Blob: &rb}}}}
	got := Blobs(p)
	if len(got) != 2 || got[0].Field != "spec.ab.ours.blob" || got[0].Blob != ob || got[1].Field != "spec.ab.reference.blob" || got[1].Blob != rb {
		t.Fatalf("Blobs(ab) = %+v", got)
	}
	ref := b("d")
	r := &JobSubmitted{BatchSize: 1, Spec: JobSpec{Kind: KindRubric, ACID: "AC-2", KindPart: &rubricwire.Spec{
		SpecJSON: b("1"), SpecText: b("2"), Tokens: b("3"), Rubric: b("4"), Reference: &ref}}}
	fields := map[string]bool{}
	for _, f := range Blobs(r) {
		fields[f.Field] = true
	}
	for _, want := range []string{"spec.rubric.spec_json", "spec.rubric.spec_text", "spec.rubric.tokens", "spec.rubric.rubric", "spec.rubric.reference"} {
		if !fields[want] {
			t.Errorf("rubric blob %s not found in %v", want, fields)
		}
	}
	if len(fields) != 5 {
		t.Errorf("rubric: %d blobs, want 5 (no unset pointer)", len(fields))
	}
	if got := Blobs(&SpotcheckRecorded{ACID: "x", Approved: true}); len(got) != 0 {
		t.Errorf("a spot-check references %v", got)
	}
}
