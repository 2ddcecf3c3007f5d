package checklist

import (
	"errors"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

func job(t *testing.T, items ...string) *records.Job {
	t.Helper()
	part, err := events.EncodePart(Spec{Items: items, Output: events.Source{Name: "o.md", URL: "https://example.com/o.md"}})
	if err != nil {
		t.Fatal(err)
	}
	return &records.Job{Tenant: "t", Batch: "b", ACID: "CL-1", Spec: events.JobSpec{Kind: Name, ACID: "CL-1", Part: part}, Status: events.StatusPending}
}

func verdict(t *testing.T, v Vote) events.Event {
	t.Helper()
	v.Judge = events.JudgeInfo{Provider: "scripted", Model: "m"}
	part, err := events.EncodePart(v)
	if err != nil {
		t.Fatal(err)
	}
	return events.New(&events.VerdictEmitted{Kind: Name, Part: part}, "t", "b", "CL-1", 0, "", nil)
}

// TestDecide: the job passes when no item is unmet; an unmet item the checklist does not
// have is a schema violation, and a judge that could not answer blocks the job.
func TestDecide(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		vote    Vote
		status  events.Status
		outcome kind.Outcome
	}{
		"all met":       {Vote{Status: events.VoteOK, Unmet: []int{}}, events.StatusCompared, kind.OutcomeClean},
		"one unmet":     {Vote{Status: events.VoteOK, Unmet: []int{2}}, events.StatusCompared, kind.OutcomeFinding},
		"no such item":  {Vote{Status: events.VoteOK, Unmet: []int{3}}, events.StatusSchemaViolation, kind.OutcomeFinding},
		"judge is down": {Vote{Status: events.VoteUnavailable, Error: "timeout"}, events.StatusBlocked, kind.OutcomeFinding},
	} {
		t.Run(name, func(t *testing.T) {
			j := job(t, "a", "b")
			if err := (Kind{}).Decide(&kind.Step{Event: verdict(t, tc.vote), Job: j}); err != nil {
				t.Fatal(err)
			}
			if j.Status != tc.status || (j.Status != events.StatusBlocked && (Kind{}).Outcome(j) != tc.outcome) {
				t.Fatalf("status %s, outcome %s; want %s, %s", j.Status, (Kind{}).Outcome(j), tc.status, tc.outcome)
			}
		})
	}
}

// TestWire: an event whose checklist part is missing or out of bounds is refused on the
// way in, naming the field.
func TestWire(t *testing.T) {
	t.Parallel()
	w := (Kind{}).Wire()
	if err := w.Spec(job(t, "a").Spec); err != nil {
		t.Fatalf("a good spec: %v", err)
	}
	for name, tc := range map[string]struct {
		spec  events.JobSpec
		field string
	}{
		"no part":   {events.JobSpec{Kind: Name, ACID: "CL-1"}, "part"},
		"no items":  {job(t).Spec, "part.items"},
		"long item": {job(t, strings.Repeat("x", MaxItemText+1)).Spec, "part.items[0]"},
	} {
		var fe *events.FieldError
		if err := w.Spec(tc.spec); !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: %v; want a field error on %s", name, err, tc.field)
		}
	}
}

// TestScriptedAnswerParses: the offline judge's fixture is an answer the kind accepts.
func TestScriptedAnswerParses(t *testing.T) {
	t.Parallel()
	a, _, ok, err := (Kind{}).ScriptedAnswer(string(Name), "pass")
	if !ok || err != nil {
		t.Fatalf("%v %v", ok, err)
	}
	if got, err := ParseAnswer(a); err != nil || len(got.Unmet) != 0 {
		t.Fatalf("%+v %v", got, err)
	}
}
