package events_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/critic"
	"github.com/tribunal-dev/tribunal/pkg/kind/equivalence"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"
)

// TestKindPartsReadAsRecorded holds the move of the shipped kinds' parts out of
// pkg/events (issue 25) to the wire format they had: testdata/kindparts.golden holds,
// for every kind and every payload a kind has a part of, an event encoded by the build
// before the move and the payload's JSON as it wrote it (a job record's form), and a
// critic verdict with trials (critic_trials) as the build that added them wrote it. Each
// decodes to the kind's own type and re-encodes to the very bytes recorded, and the JSON
// reads to the same value, so the audit's comparison of re-encodings and the job records
// stored before stay as they were.
func TestKindPartsReadAsRecorded(t *testing.T) {
	t.Parallel()
	f, err := os.Open("testdata/kindparts.golden")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]reflect.Type{
		"job.submitted/ab": reflect.TypeFor[*ab.Spec](), "job.submitted/critic": reflect.TypeFor[*critic.Spec](),
		"job.submitted/equivalence": reflect.TypeFor[*equivalence.Spec](), "job.submitted/rubric": reflect.TypeFor[*rubricwire.Spec](),
		"gates.done/rubric": reflect.TypeFor[*rubricwire.Judging](), "verdict.emitted/critic": reflect.TypeFor[*critic.Vote](),
		"verdict.emitted/rubric": reflect.TypeFor[*rubricwire.Vote](), "verdict.emitted/critic-trials": reflect.TypeFor[*critic.Vote](), "iteration.decided/ab": reflect.TypeFor[*ab.Decided](),
		"iteration.decided/critic": reflect.TypeFor[*critic.Decided](), "iteration.decided/equivalence": reflect.TypeFor[*equivalence.Decided](),
		"iteration.decided/rubric": reflect.TypeFor[*rubricwire.Decision](),
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		name, rest, _ := strings.Cut(sc.Text(), " ")
		hexed, js, _ := strings.Cut(rest, " ")
		data, err := hex.DecodeString(hexed)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n++
		ev, err := events.Decode(data)
		if err != nil {
			t.Errorf("%s: decode: %v", name, err)
			continue
		}
		if name == "verdict.emitted/critic-trials" {
			if tr := critic.TrialsOf(ev.Payload.(*events.VerdictEmitted).KindTrials); len(tr) != 2 || tr[1].Error != "bad" {
				t.Errorf("%s: trials decoded as %+v", name, tr)
			}
		}
		if typ, ok := want[name]; ok {
			if got := reflect.TypeOf(kindPart(ev.Payload)); got != typ {
				t.Errorf("%s: part decoded as %v, want %v", name, got, typ)
			}
		}
		again, err := events.Encode(ev)
		if err != nil {
			t.Errorf("%s: re-encode: %v", name, err)
			continue
		}
		if !bytes.Equal(again, data) {
			t.Errorf("%s: re-encoded to other bytes\nrecorded %x\nnow      %x", name, data, again)
		}
		// The payload's JSON as the build before wrote it reads to the same value.
		p := reflect.New(reflect.TypeOf(ev.Payload).Elem()).Interface().(events.Payload)
		if err := json.Unmarshal([]byte(js), p); err != nil {
			t.Errorf("%s: read recorded JSON: %v", name, err)
			continue
		}
		fromJSON, err := events.Encode(events.Event{Envelope: ev.Envelope, Payload: p})
		if err != nil {
			t.Errorf("%s: encode the payload read from JSON: %v", name, err)
			continue
		}
		if !bytes.Equal(fromJSON, data) {
			t.Errorf("%s: recorded JSON read to another value\nrecorded %x\nfrom JSON %x", name, data, fromJSON)
		}
		// And the JSON written now reads back to it too.
		now, err := json.Marshal(ev.Payload)
		if err != nil {
			t.Fatal(err)
		}
		back := reflect.New(reflect.TypeOf(ev.Payload).Elem()).Interface().(events.Payload)
		if err := json.Unmarshal(now, back); err != nil || !reflect.DeepEqual(back, ev.Payload) {
			t.Errorf("%s: JSON written now does not read back (%v):\n%s", name, err, now)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 25 {
		t.Fatalf("%d recorded events, want every kind's", n)
	}
}

// kindPart is a payload's KindPart, for the payloads that have one.
func kindPart(p events.Payload) any {
	switch p := p.(type) {
	case *events.JobSubmitted:
		return p.Spec.KindPart
	case *events.GatesDone:
		return p.KindPart
	case *events.VerdictEmitted:
		return p.KindPart
	case *events.IterationDecided:
		return p.KindPart
	}
	return nil
}
