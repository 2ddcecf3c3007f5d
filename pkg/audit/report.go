package audit

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// MismatchKind classifies a mismatch, so a reader can tell an altered decision from a
// broken record without parsing prose.
type MismatchKind string

// The kinds of mismatch an audit reports. Every one of them fails the audit: each means
// the stream no longer proves what was decided.
const (
	// KindMismatch: a recorded value differs from the value re-derived from the inputs.
	KindMismatch MismatchKind = "mismatch"
	// KindUndecodable: a message of the replay is not a valid event.
	KindUndecodable MismatchKind = "undecodable"
	// KindDuplicate: two recorded events stand for one logical step.
	KindDuplicate MismatchKind = "duplicate"
	// KindMissing: an event the re-derivation says must exist is not recorded.
	KindMissing MismatchKind = "missing"
	// KindCollision: the aggregator published a decision under the id of an earlier
	// event, so JetStream dropped it as a duplicate and the stream never held it.
	KindCollision MismatchKind = "collision"
	// KindUnexplained: a recorded decision that nothing in the replay derives.
	KindUnexplained MismatchKind = "unexplained"
	// KindOrder: a decision recorded before the event it claims to derive from.
	KindOrder MismatchKind = "order"
	// KindID: an event id that is not the deterministic id of its step.
	KindID MismatchKind = "id"
	// KindSubject: an event recorded on a subject that contradicts its envelope.
	KindSubject MismatchKind = "subject"
	// KindUnreadable: a blob the decision rests on (a manifest, an artifact a render or
	// its gates recorded) cannot be read back intact: it is missing or its bytes no
	// longer hash to their address.
	KindUnreadable MismatchKind = "unreadable"
)

// Mismatch is one finding. It names the job, the recorded event it concerns and, for a
// re-derived value, the input event the value was derived from, so the altered event can
// be found whichever side of the derivation was touched.
type Mismatch struct {
	// Kind says what sort of finding it is.
	Kind MismatchKind `json:"kind"`
	// Tenant, Batch and Job locate it ("" where it concerns no job, such as a manifest).
	Tenant string `json:"tenant,omitempty"`
	Batch  string `json:"batch,omitempty"`
	Job    string `json:"job,omitempty"`
	// EventID, EventType and Seq name the recorded event (Seq 0: not recorded).
	EventID   string      `json:"event_id,omitempty"`
	EventType events.Type `json:"event_type,omitempty"`
	Seq       uint64      `json:"seq,omitempty"`
	// FromID and FromType name the input event the value was re-derived from.
	FromID   string      `json:"from_id,omitempty"`
	FromType events.Type `json:"from_type,omitempty"`
	FromSeq  uint64      `json:"from_seq,omitempty"`
	// Field is the wire name of the value ("ab.winner", "digest", "manifest.ab:...").
	Field string `json:"field,omitempty"`
	// Recorded is what the stream (or the blob) holds; Derived what the events give.
	Recorded string `json:"recorded,omitempty"`
	Derived  string `json:"derived,omitempty"`
	// Detail explains findings that are not a value comparison.
	Detail string `json:"detail,omitempty"`
}

// String renders the finding on one line for the terminal.
func (m Mismatch) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", strings.ToUpper(string(m.Kind)))
	if m.Batch != "" {
		fmt.Fprintf(&b, " %s/%s", m.Tenant, m.Batch)
	}
	if m.Job != "" {
		fmt.Fprintf(&b, " job %s", m.Job)
	}
	if m.EventType != "" || m.EventID != "" {
		fmt.Fprintf(&b, " %s", strings.TrimSpace(string(m.EventType)+" "+short(m.EventID)))
		if m.Seq > 0 {
			fmt.Fprintf(&b, " (seq %d)", m.Seq)
		}
	}
	if m.FromID != "" {
		fmt.Fprintf(&b, " from %s %s", m.FromType, short(m.FromID))
		if m.FromSeq > 0 {
			fmt.Fprintf(&b, " (seq %d)", m.FromSeq)
		}
	}
	if m.Field != "" {
		fmt.Fprintf(&b, ": %s", m.Field)
	}
	switch {
	case m.Derived != "" || (m.Kind == KindMismatch && m.Recorded != ""):
		fmt.Fprintf(&b, ": recorded %s, re-derived %s", orNone(m.Recorded), orNone(m.Derived))
	case m.Recorded != "":
		fmt.Fprintf(&b, " %s", m.Recorded)
	}
	if m.Detail != "" {
		fmt.Fprintf(&b, ": %s", m.Detail)
	}
	return b.String()
}

// Unverified is something the audit could not re-derive from the recorded events, and
// why: it is neither confirmed nor contradicted, and the report says so instead of
// staying silent.
type Unverified struct {
	// Tenant, Batch and Job locate it, where it has a place.
	Tenant string `json:"tenant,omitempty"`
	Batch  string `json:"batch,omitempty"`
	Job    string `json:"job,omitempty"`
	// What was not checked, and Why not.
	What string `json:"what"`
	Why  string `json:"why"`
}

// String renders the note on one line.
func (u Unverified) String() string {
	where := ""
	if u.Batch != "" {
		where = u.Tenant + "/" + u.Batch
	}
	if u.Job != "" {
		where += " job " + u.Job
	}
	if where != "" {
		where += ": "
	}
	return where + u.What + " (" + u.Why + ")"
}

// Refused is an input the aggregator's rules refuse, such as a dead letter whose original
// subject belongs to another tenant or type than its envelope: someone tried to act for
// a team they may not act for. It decides nothing, so it is no finding about the batch
// its envelope names (a failed attack leaves the victim's audit clean), but the report
// names it and where it came from. Anything derived from it all the same (an aggregator
// that acted on it) is unexplained, a finding naming it.
type Refused struct {
	// Tenant, Batch and Job are what its envelope claims.
	Tenant string `json:"tenant"`
	Batch  string `json:"batch,omitempty"`
	Job    string `json:"job,omitempty"`
	// EventID, EventType and Seq name the recorded message.
	EventID   string      `json:"event_id"`
	EventType events.Type `json:"event_type"`
	Seq       uint64      `json:"seq"`
	// Subject is the subject it was published on (a dead letter's original subject), and
	// From the tenant that subject belongs to: who sent it ("" when it names none).
	Subject string `json:"subject,omitempty"`
	From    string `json:"from,omitempty"`
	// DeadLetter names the service whose dead letters hold it.
	DeadLetter string `json:"dead_letter,omitempty"`
	// Reason is the refusal's label (as tribunal_refusals_total counts it), Detail the
	// rules' words.
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail"`
}

// String renders the refused input on one line.
func (r Refused) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "REFUSED %s/%s", r.Tenant, r.Batch)
	if r.Job != "" {
		fmt.Fprintf(&b, " job %s", r.Job)
	}
	fmt.Fprintf(&b, " %s %s (seq %d)", r.EventType, short(r.EventID), r.Seq)
	if r.DeadLetter != "" {
		fmt.Fprintf(&b, ", a dead letter of %s", r.DeadLetter)
	}
	if r.Subject != "" {
		fmt.Fprintf(&b, ", published on %s", r.Subject)
		if r.From != "" && r.From != r.Tenant {
			fmt.Fprintf(&b, " (tenant %s's)", r.From)
		}
	}
	if r.Reason != "" {
		fmt.Fprintf(&b, ": %s", r.Reason)
	}
	fmt.Fprintf(&b, ": %s", r.Detail)
	return b.String()
}

// PersonInput is a decision a person took about a batch's rubric view: a spot-check of
// a sign-off (spotcheck.recorded) or the reset of a view's loop (view.reset). The audit
// replays each like any input; listing them says who changed what and when, since none
// comes from a judge.
type PersonInput struct {
	Tenant string `json:"tenant"`
	Batch  string `json:"batch"`
	Job    string `json:"job"`
	// EventID, EventType and Seq name the recorded event.
	EventID   string      `json:"event_id"`
	EventType events.Type `json:"event_type"`
	Seq       uint64      `json:"seq"`
	At        time.Time   `json:"at"`
	By        string      `json:"by,omitempty"`
	// Decision is "approved", "rejected <dimension>" or "reset loop <n>"; Reason is a
	// reset's.
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
}

// personInput is r as a person's input, false for any other event.
func personInput(r *Recorded) (PersonInput, bool) {
	ev := r.Event
	in := PersonInput{Tenant: ev.Tenant, Batch: ev.BatchID, EventID: ev.ID, EventType: ev.Type, Seq: r.Seq, At: ev.Time.UTC()}
	switch p := ev.Payload.(type) {
	case *events.SpotcheckRecorded:
		in.Job, in.By, in.Decision = p.ACID, p.By, "approved"
		if !p.Approved {
			in.Decision = "rejected " + p.Dimension
		}
	case *events.ViewReset:
		in.Job, in.By, in.Decision, in.Reason = p.ACID, p.By, fmt.Sprintf("reset loop %d", p.Loop), p.Reason
	case *events.ReviewRecorded:
		in.Job, in.By, in.Decision = ev.JobID, p.By, "reviewed "+p.Answer
		if p.Case != "" {
			in.Decision = "reviewed case " + p.Case + " " + p.Answer
		}
	default:
		return in, false
	}
	return in, true
}

// String renders the input on one line.
func (p PersonInput) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s job %s %s %s (seq %d): %s", p.Tenant, p.Batch, p.Job, p.EventType, short(p.EventID), p.Seq, p.Decision)
	if p.By != "" {
		fmt.Fprintf(&b, " by %s", p.By)
	}
	fmt.Fprintf(&b, " at %s", p.At.Format(time.RFC3339))
	if p.Reason != "" {
		fmt.Fprintf(&b, ": %s", p.Reason)
	}
	return b.String()
}

// BatchSummary is what the audit re-derived for one batch: enough to compare with the
// aggregator's state (CheckState) and to show a reader what was checked.
type BatchSummary struct {
	// Tenant and Batch name it.
	Tenant string `json:"tenant"`
	Batch  string `json:"batch"`
	// Jobs is how many jobs were submitted.
	Jobs int `json:"jobs"`
	// Complete is true when the replayed events make every job final.
	Complete bool `json:"complete"`
	// Digest is the re-derived digest chain over the batch's inputs (BatchDigest).
	Digest string `json:"digest,omitempty"`
	// Summary is the re-derived batch.completed, when the batch is complete.
	Summary *events.BatchCompleted `json:"summary,omitempty"`
	// Attempt is the redrive attempt of the latest completion (0: the first pass);
	// Digest and Summary are that completion's.
	Attempt int `json:"attempt,omitempty"`
}

// Report is the outcome of an audit: what was read and re-derived, every mismatch and
// everything that could not be checked.
type Report struct {
	// Rejudges counts the events of rejudges: verdicts of other models next to the
	// decisions, which change none of them.
	Rejudges int `json:"rejudges,omitempty"`
	// Events is how many replayed messages belong to the audited batches.
	Events int `json:"events"`
	// History is how many events of other batches were replayed only to rebuild the
	// loop state of the audited rubric views.
	History int `json:"history,omitempty"`
	// Jobs is how many jobs the audited batches hold (one, for one job's audit).
	Jobs int `json:"jobs"`
	// Job is the one job audited (RunJob), "" for whole batches.
	Job string `json:"job,omitempty"`
	// Read is how many stream messages one job's audit read (RunJob): those at its
	// record's positions and up to its outcome, or every one it passed over.
	Read int `json:"read,omitempty"`
	// Reads is how many times a batch audit read the stream (Run): 1, or 2 (3 with an
	// early read before Since) when ReadAgain says why one read could not decide alone.
	Reads     int    `json:"reads,omitempty"`
	ReadAgain string `json:"read_again,omitempty"`
	// ReadAgainBatches are the batches (tenant/batch) the second read audited again:
	// those ReadAgain names and the selected batches sharing a rubric view with them.
	// The other batches' findings are the one read's.
	ReadAgainBatches []string `json:"read_again_batches,omitempty"`
	// ReadAgainMessages is how many messages the second read delivered to the audit,
	// and ReadAgainFrom the stream sequence it began at: the first message it delivers.
	ReadAgainMessages int    `json:"read_again_messages,omitempty"`
	ReadAgainFrom     uint64 `json:"read_again_from,omitempty"`
	// Decisions counts the re-derived values that were compared with a record.
	Decisions int `json:"decisions"`
	// Batches are the audited batches, as re-derived.
	Batches []BatchSummary `json:"batches"`
	// Mismatches are every finding, by batch and stream order.
	Mismatches []Mismatch `json:"mismatches"`
	// Unverified are the things the events cannot prove either way.
	Unverified []Unverified `json:"unverified,omitempty"`
	// Refused are the inputs the aggregator's rules refuse: they decide nothing.
	Refused []Refused `json:"refused,omitempty"`
	// People are the audited batches' inputs from a person (HE-2 spot-checks, loop
	// resets), replayed with the rest.
	People []PersonInput `json:"people,omitempty"`
	// State says whether the aggregator's key-value state (batch headers, job records)
	// was compared with the replay: "compared", or why it was not.
	State string `json:"state,omitempty"`

	// state is what the replay derived, for CheckState and JobDecisions.
	state *auditState
	// unseen marks one job's audit that read no event of its job (ErrJobNotInStream),
	// for CheckJobState.
	unseen bool
}

// EventRef is one recorded event a decision rests on.
type EventRef struct {
	ID   string      `json:"id"`
	Type events.Type `json:"type,omitempty"`
	// Seq is its stream sequence (0 when the replay did not hold it).
	Seq uint64 `json:"seq,omitempty"`
	// SHA256 is the hash of its bytes, as the job's digest chain links it.
	SHA256 string `json:"sha256,omitempty"`
}

// Decision is one audited job as re-derived from its events: its outcome, the events it
// rests on (in the order they were applied) and the findings about it. No finding means
// the recorded outcome was re-derived identically.
type Decision struct {
	Tenant    string        `json:"tenant"`
	Batch     string        `json:"batch"`
	Job       string        `json:"job"`
	Index     int           `json:"index"`
	Kind      events.Kind   `json:"kind"`
	Status    events.Status `json:"status"`
	DecidedBy string        `json:"decided_by,omitempty"`
	Inputs    []EventRef    `json:"inputs"`
	// Mismatches are the findings that name this job.
	Mismatches []Mismatch `json:"mismatches,omitempty"`
}

// JobDecisions lists every audited job's decision, by batch and position in it, for a
// reader who follows each one to the events it rests on (the console's audit report).
// The jobs are decoded one at a time from the rules' compressed records; the events are
// named from the audit's one entry per step.
func (r *Report) JobDecisions() []Decision {
	st := r.state
	if st == nil {
		return []Decision{}
	}
	byJob := map[jobKey][]Mismatch{}
	for _, m := range r.Mismatches {
		if m.Job != "" {
			k := jobKey{m.Tenant, m.Batch, m.Job}
			byJob[k] = append(byJob[k], m)
		}
	}
	var bks []batchKey
	for bk := range st.audited {
		bks = append(bks, bk)
	}
	sort.Slice(bks, func(i, j int) bool {
		if bks[i].tenant != bks[j].tenant {
			return bks[i].tenant < bks[j].tenant
		}
		return bks[i].batch < bks[j].batch
	})
	out := []Decision{}
	for _, bk := range bks {
		from := len(out)
		st := st.of(bk)
		st.mem.EachJob(bk.tenant, bk.batch, func(j *records.Job) {
			d := Decision{Tenant: j.Tenant, Batch: j.Batch, Job: j.ACID, Index: j.Index, Kind: j.Spec.Kind, Status: j.Status,
				DecidedBy: j.DecidedBy, Inputs: make([]EventRef, 0, len(j.Inputs)), Mismatches: byJob[jobKey{j.Tenant, j.Batch, j.ACID}]}
			for _, l := range j.Inputs {
				id, sha := l, ""
				if i := strings.LastIndexByte(l, ':'); i >= 0 {
					id, sha = l[:i], l[i+1:]
				}
				d.Inputs = append(d.Inputs, st.ref(id, sha))
			}
			out = append(out, d)
		})
		batch := out[from:]
		sort.SliceStable(batch, func(i, j int) bool { return batch[i].Index < batch[j].Index })
	}
	return out
}

// OK reports whether the audit found nothing: the stream still proves every decision.
func (r *Report) OK() bool { return len(r.Mismatches) == 0 }

// Count is how many mismatches of kind k the report holds.
func (r *Report) Count(k MismatchKind) int {
	n := 0
	for _, m := range r.Mismatches {
		if m.Kind == k {
			n++
		}
	}
	return n
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
