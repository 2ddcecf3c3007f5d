package batch

import (
	"errors"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/fielderr"
)

// RepeatsOf is what the AC asks beyond one call: its trials (its own, else the batch's),
// at_least, and the batch's ladder. nil asks once.
func (b *Batch) RepeatsOf(ac AC) *events.Repeats { return b.File.repeats(ac) }

func (f *File) repeats(ac AC) *events.Repeats {
	r := events.Repeats{Trials: f.Trials, AtLeast: f.AtLeast, Ladder: f.Ladder}
	if ac.Trials > 0 {
		r.Trials = ac.Trials
	}
	if ac.AtLeast > 0 {
		r.AtLeast = ac.AtLeast
	}
	if e := f.EscalateWhen; e != nil {
		r.Escalate = &events.Escalate{Confidence: e.Confidence, Flip: e.Flip, Disagreement: e.Disagreement}
	}
	if r.Trials <= 1 && r.AtLeast == 0 && len(r.Ladder) == 0 && r.Escalate == nil {
		return nil
	}
	return &r
}

// repeatsError is what is wrong with the batch's own trials and ladder: the field, as the
// batch file names it, and the message.
func (f *File) repeatsError() (string, string) {
	err := f.repeats(AC{}).Validate("repeats")
	if err == nil {
		return "", ""
	}
	var fe *fielderr.Error
	if errors.As(err, &fe) {
		msg := fe.Reason
		if msg == "" {
			msg = "missing"
		}
		return strings.TrimPrefix(fe.Field, "repeats."), msg
	}
	return "trials", err.Error()
}

// repeatsProblem is why one AC cannot take the trials or ladder it asks for, "" when it
// can: a ladder beside a panel, an at_least above the trials. Whether its kind takes them
// at all is the kind's to say (kind.Repeating), asked where the batch is planned.
func (f *File) repeatsProblem(ac AC) string {
	r := f.repeats(ac)
	if r == nil {
		return ""
	}
	field := "trials"
	if ac.Trials == 0 && f.Trials == 0 {
		field = "ladder"
		if len(r.Ladder) == 0 {
			field = "at_least"
		}
	}
	if len(r.Ladder) > 0 && (len(ac.Judges()) > 0 || len(f.Judges) > 0) {
		return "ladder: a ladder names its own judges, one per rung; it cannot be combined with a panel (judges:)"
	}
	if err := r.Validate("repeats"); err != nil {
		var fe *fielderr.Error
		if errors.As(err, &fe) {
			return strings.TrimPrefix(fe.Field, "repeats.") + ": " + fe.Reason
		}
		return field + ": " + err.Error()
	}
	return ""
}
