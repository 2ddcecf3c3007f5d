package events

import "testing"

// TestSubjectTemplate: an event subject's tenant becomes "{tenant}", so span names stay
// one per event type however many teams there are; any other subject is its own.
func TestSubjectTemplate(t *testing.T) {
	for subject, want := range map[string]string{
		"tribunal.team-a.render.requested": "tribunal.{tenant}.render.requested",
		"tribunal.default.job.submitted":   "tribunal.{tenant}.job.submitted",
		DeadLetterSubject("judge"):         "tribunal._dlq.judge",
		"tribunal.team-a.no.such.type":     "tribunal.team-a.no.such.type",
	} {
		if got := SubjectTemplate(subject); got != want {
			t.Errorf("SubjectTemplate(%q) = %q, want %q", subject, got, want)
		}
	}
}
