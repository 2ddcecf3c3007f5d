package kind

import "github.com/tribunal-dev/tribunal/pkg/events"

// Repeating is a kind whose jobs may be asked several times (`trials:`) or up a judge
// ladder (`ladder:`), events.Repeats. A kind that is not Repeating refuses both.
type Repeating interface {
	Kind
	// RefuseRepeats says why the kind cannot judge a job with r, starting with the batch
	// key at fault ("trials: ...", "ladder: ..."); "" when it can.
	RefuseRepeats(r *events.Repeats) string
}

// RefuseRepeats is why k cannot judge a job with r ("" when it can, or r asks once).
func RefuseRepeats(k Kind, r *events.Repeats) string {
	if r == nil {
		return ""
	}
	if rk, ok := k.(Repeating); ok {
		return rk.RefuseRepeats(r)
	}
	field := "trials"
	if r.K() <= 1 && len(r.Ladder) > 0 {
		field = "ladder"
	}
	return field + ": the " + string(k.Name()) + " kind takes no repeated trials or judge ladder"
}

// NoLadder is a Repeating kind's refusal of a ladder when it takes only trials: its
// answers carry no confidence to escalate on.
func NoLadder(k events.Kind, r *events.Repeats) string {
	if len(r.Ladder) > 0 {
		return "ladder: the " + string(k) + " kind takes trials but no judge ladder: its answers carry no confidence to escalate on"
	}
	return ""
}
