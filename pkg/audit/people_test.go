package audit

import (
	"fmt"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// TestPersonInput: spot-checks and loop resets are a person's inputs, named with the job,
// the decision, who and when; a judge's verdict is not.
func TestPersonInput(t *testing.T) {
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	rec := func(e events.Event) *Recorded {
		e.Time = at
		return &Recorded{Seq: 7, Event: e}
	}
	for _, tc := range []struct {
		ev   events.Event
		want string
	}{
		{events.New(&events.SpotcheckRecorded{ACID: "v", Approved: true, By: "console:alice"}, "team-a", "b1", "v", 0, "approve", nil),
			"team-a/b1 job v spotcheck.recorded %s (seq 7): approved by console:alice at 2026-11-30T08:00:00Z"},
		{events.New(&events.SpotcheckRecorded{ACID: "v", Dimension: "typography"}, "team-a", "b1", "v", 0, "reject-typography", nil),
			"team-a/b1 job v spotcheck.recorded %s (seq 7): rejected typography at 2026-11-30T08:00:00Z"},
		{events.New(&events.ViewReset{ACID: "v", Loop: 2, By: "host", Reason: "rubric fixed"}, "team-a", "b1", "v", 0, events.ResetStep(2), nil),
			"team-a/b1 job v view.reset %s (seq 7): reset loop 2 by host at 2026-11-30T08:00:00Z: rubric fixed"},
	} {
		in, ok := personInput(rec(tc.ev))
		if want := fmt.Sprintf(tc.want, short(tc.ev.ID)); !ok || in.String() != want || in.Job != "v" || in.EventID != tc.ev.ID {
			t.Errorf("%s: %v %q, want %q", tc.ev.Type, ok, in.String(), want)
		}
	}
	verdict := events.New(&events.VerdictEmitted{}, "team-a", "b1", "v", 0, "", nil)
	if _, ok := personInput(rec(verdict)); ok {
		t.Error("a verdict is listed as a person's input")
	}
}
