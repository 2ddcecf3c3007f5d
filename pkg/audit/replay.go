package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kinds"
)

// DefaultStream is the stream Replay reads when the filter names none.
const DefaultStream = "TRIBUNAL"

// Filter selects the events to audit. Empty fields select everything.
type Filter struct {
	// Tenant limits the replay to one tenant's subjects (and its dead letters).
	Tenant string
	// BatchID keeps the events whose envelope names this batch.
	BatchID string
	// Since and Until bound the events by the time the stream stored them.
	Since, Until time.Time
	// Stream is the stream to read; DefaultStream when empty.
	Stream string
}

// Recorded is one stream message as the audit sees it: where it sits, its exact bytes'
// hash (the link of the digest chain) and what it decodes to.
type Recorded struct {
	// Seq is the stream sequence; it orders the replay.
	Seq uint64 `json:"seq"`
	// Subject is where the message was stored; the services trust it over the envelope.
	Subject string `json:"subject"`
	// Stored is when the stream stored it: the time a range selects by.
	Stored time.Time `json:"stored"`
	// MsgID is the Nats-Msg-Id the message was published with.
	MsgID string `json:"msg_id,omitempty"`
	// Raw are the message bytes; SHA256 their hash.
	Raw    []byte `json:"-"`
	SHA256 string `json:"sha256"`
	// Event is the decoded event; Err is set instead when the bytes do not decode.
	Event events.Event `json:"-"`
	Err   error        `json:"-"`
	// DeadLetter names the service whose dead letters hold the message
	// (tribunal._dlq.<service>); Reason is why it gave up.
	DeadLetter string `json:"dead_letter,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// OriginalSubject is the subject a dead letter's event was published on, as the
	// service that gave up on it recorded it.
	OriginalSubject string `json:"original_subject,omitempty"`
	// History marks an event of another batch, replayed only because an audited rubric
	// view's loop state carries over from it. It is folded, never judged.
	History bool `json:"history,omitempty"`
}

// OK reports whether the message decoded to an event.
func (r *Recorded) OK() bool { return r.Err == nil }

// link is the message's link of a digest chain, as the aggregator writes it.
func (r *Recorded) link() string { return r.Event.ID + ":" + r.SHA256 }

// Replay reads the stream with an ordered consumer (no durable state, nothing acked, so
// an audit never disturbs the services) and returns the selected messages in stream
// order. Undecodable messages are kept with Err set (they are findings) unless what can
// still be read of their envelope names another tenant or batch.
//
// The filter selects batches: a batch is selected when it matches BatchID (if set) and
// has an event stored within [Since, Until]; a selected batch is then returned whole,
// including its events outside the range, because a decision can only be re-derived
// from all of its inputs. Reading starts at Since (DeliverByStartTime) and goes back to
// the stream's start only when a selected batch began before it.
//
// A rubric view's loop carries over from batch to batch, so when the selected batches
// hold rubric views Replay also returns, marked History, the loop events of the same
// views from other batches that precede them.
func Replay(ctx context.Context, js jetstream.JetStream, f Filter) ([]Recorded, error) {
	if f.Tenant != "" {
		if err := events.ValidateTenant(f.Tenant); err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
	}
	name := f.Stream
	if name == "" {
		name = DefaultStream
	}
	st, err := js.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("audit: open stream %s: %w", name, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: stream %s info: %w", name, err)
	}
	if info.State.Msgs == 0 {
		return nil, nil
	}
	var filters []string
	if f.Tenant != "" {
		filters = []string{events.TenantAll(f.Tenant), events.DeadLetterPrefix + ".>"}
	}
	sel := &selection{f: f, batches: map[batchKey]bool{}, other: map[jobKey]string{}}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: filters, InactiveThreshold: time.Minute}
	if !f.Since.IsZero() {
		since := f.Since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	var first uint64
	err = readStream(ctx, js, name, cfg, info.State.LastSeq, func(r Recorded) bool {
		if first == 0 {
			first = r.Seq
		}
		sel.add(r, f.Until.IsZero() || !r.Stored.After(f.Until))
		return true
	})
	if err != nil {
		return nil, err
	}
	if !f.Since.IsZero() && first > info.State.FirstSeq && sel.needsEarlier() {
		// A selected batch (or a view's loop) began before Since: read what precedes it.
		var early []Recorded
		err := readStream(ctx, js, name, jetstream.OrderedConsumerConfig{FilterSubjects: filters, InactiveThreshold: time.Minute}, first-1, func(r Recorded) bool {
			if r.Seq >= first {
				return false
			}
			early = append(early, r)
			return true
		})
		if err != nil {
			return nil, err
		}
		pre := &selection{f: Filter{Tenant: f.Tenant, BatchID: f.BatchID}, batches: sel.batches, other: map[jobKey]string{}}
		for _, r := range early {
			pre.add(r, false)
		}
		for k, v := range sel.other {
			pre.other[k] = v
		}
		sel.kept = append(pre.kept, sel.kept...)
		sel.history = append(pre.history, sel.history...)
		sel.other = pre.other
	}
	return sel.result(), nil
}

// selection sorts the replayed messages into those of the selected batches and the
// history candidates.
type selection struct {
	f       Filter
	batches map[batchKey]bool
	kept    []Recorded
	history []Recorded
	// loose are undecodable messages no batch can be read from; result keeps those
	// stored among the selected batches' events.
	loose []Recorded
	// other maps the rubric jobs of unselected batches to their view keys.
	other map[jobKey]string
}

// add sorts one message; inRange says whether it was stored within the filter's range,
// the only place a batch can be selected.
func (s *selection) add(r Recorded, inRange bool) {
	if !r.OK() {
		tenant, batch := peekEnvelope(r.Raw)
		if (s.f.Tenant != "" && tenant != "" && tenant != s.f.Tenant) || (s.f.BatchID != "" && batch != "" && batch != s.f.BatchID) {
			return
		}
		switch {
		case batch != "" && s.batches[batchKey{tenant, batch}]:
			s.kept = append(s.kept, r)
		case batch == "" && inRange:
			s.loose = append(s.loose, r)
		case batch != "" && inRange:
			s.kept = append(s.kept, r)
		}
		return
	}
	ev := r.Event
	if s.f.Tenant != "" && ev.Tenant != s.f.Tenant {
		return
	}
	bk := batchKey{ev.Tenant, ev.BatchID}
	if !s.batches[bk] && inRange && (s.f.BatchID == "" || ev.BatchID == s.f.BatchID) {
		s.batches[bk] = true
	}
	if s.batches[bk] {
		s.kept = append(s.kept, r)
		return
	}
	// Another batch: keep what a rubric view's loop may be folded from; result keeps
	// those of the selected batches' views.
	switch p := ev.Payload.(type) {
	case *events.JobSubmitted:
		if key := viewKey(ev.Tenant, p.Spec); r.DeadLetter == "" && key != "" {
			s.other[jobKey{ev.Tenant, ev.BatchID, ev.JobID}] = key
			s.keepHistory(r)
		}
	case *events.SpotcheckRecorded:
		s.maybeHistory(r, jobKey{ev.Tenant, ev.BatchID, p.ACID})
	case *events.ViewReset:
		s.maybeHistory(r, jobKey{ev.Tenant, ev.BatchID, p.ACID})
	case *events.VerdictEmitted:
		if looping(p.Kind) || r.DeadLetter != "" {
			s.maybeHistory(r, jobKey{ev.Tenant, ev.BatchID, ev.JobID})
		}
	case *events.GatesFailed:
		if looping(p.Kind) || r.DeadLetter != "" {
			s.maybeHistory(r, jobKey{ev.Tenant, ev.BatchID, ev.JobID})
		}
	case *events.RenderUnchanged:
		s.maybeHistory(r, jobKey{ev.Tenant, ev.BatchID, ev.JobID})
	default:
		if r.DeadLetter != "" {
			s.maybeHistory(r, jobKey{ev.Tenant, ev.BatchID, ev.JobID})
		}
	}
}

// maybeHistory keeps a loop event of another batch when its job is a known rubric view,
// or when its submission may lie before what was read (a replay from Since).
func (s *selection) maybeHistory(r Recorded, job jobKey) {
	if _, ok := s.other[job]; ok || !s.f.Since.IsZero() {
		s.keepHistory(r)
	}
}

func (s *selection) keepHistory(r Recorded) {
	r.History = true
	s.history = append(s.history, r)
}

// needsEarlier reports whether a selected batch lacks a job.submitted or holds a rubric
// view: both mean events before the first one read may matter.
func (s *selection) needsEarlier() bool {
	if len(s.rubricViews()) > 0 {
		return true
	}
	size := map[batchKey]int{}
	seen := map[batchKey]map[int]bool{}
	for _, r := range s.kept {
		if !r.OK() {
			continue
		}
		bk := batchKey{r.Event.Tenant, r.Event.BatchID}
		if seen[bk] == nil {
			seen[bk] = map[int]bool{}
			size[bk] = -1
		}
		if p, ok := r.Event.Payload.(*events.JobSubmitted); ok && r.DeadLetter == "" {
			size[bk] = p.BatchSize
			seen[bk][p.Index] = true
		}
	}
	for bk, n := range size {
		if n < 0 || len(seen[bk]) < n {
			return true
		}
	}
	return false
}

// looping reports whether jobs of kind k loop over iterations and batches.
func looping(k events.Kind) bool {
	_, ok := kinds.Looping(k)
	return ok
}

// viewKey is a looping job's view key, "" for a job without one.
func viewKey(tenant string, spec events.JobSpec) string {
	if lk, ok := kinds.Looping(spec.Kind); ok {
		return lk.ViewKey(tenant, spec)
	}
	return ""
}

// rubricViews are the view keys of the selected looping jobs.
func (s *selection) rubricViews() map[string]bool {
	out := map[string]bool{}
	for _, r := range s.kept {
		if !r.OK() || r.DeadLetter != "" {
			continue
		}
		if p, ok := r.Event.Payload.(*events.JobSubmitted); ok {
			if key := viewKey(r.Event.Tenant, p.Spec); key != "" {
				out[key] = true
			}
		}
	}
	return out
}

// result merges the selected batches' messages with the history of their views that
// precedes the last of them, in stream order.
func (s *selection) result() []Recorded {
	out := append([]Recorded(nil), s.kept...)
	var first, last uint64
	for _, r := range s.kept {
		if r.OK() {
			if first == 0 {
				first = r.Seq
			}
			last = r.Seq
		}
	}
	for _, r := range s.loose {
		if r.Seq > first && r.Seq < last {
			out = append(out, r)
		}
	}
	if len(s.history) > 0 && len(s.kept) > 0 {
		viewsKept := s.rubricViews()
		for _, r := range s.history {
			key := jobKey{r.Event.Tenant, r.Event.BatchID, r.Event.JobID}
			switch p := r.Event.Payload.(type) {
			case *events.SpotcheckRecorded:
				key.job = p.ACID
			case *events.ViewReset:
				key.job = p.ACID
			}
			if viewsKept[s.other[key]] && r.Seq < last {
				out = append(out, r)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// readStream delivers the messages of one ordered consumer to visit until the stream's
// sequence last, the end of what matches, or visit returning false.
func readStream(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.OrderedConsumerConfig, last uint64, visit func(Recorded) bool) error {
	cons, err := js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return fmt.Errorf("audit: ordered consumer on %s: %w", stream, err)
	}
	// On a cluster every fetch of an ordered consumer recreates it, possibly on another
	// server, and the first pull can overtake the news of it: "no responders". The next
	// fetch resumes where the last message left off, so such a pull is simply repeated.
	unanswered := 0
	again := func(err error) bool {
		if !errors.Is(err, nats.ErrNoResponders) || unanswered >= 50 {
			return false
		}
		unanswered++
		time.Sleep(100 * time.Millisecond)
		return true
	}
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("audit: replay of %s: %w", stream, err)
		}
		batch, err := cons.Fetch(512, jetstream.FetchMaxWait(time.Second))
		if again(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("audit: replay of %s: %w", stream, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("audit: replay of %s: message metadata: %w", stream, err)
			}
			if !visit(record(m, md)) || md.Sequence.Stream >= last || md.NumPending == 0 {
				// Caught up: leave the rest of the pull (it would only wait out its timeout).
				return nil
			}
		}
		err = batch.Error()
		if n == 0 && again(err) {
			continue
		}
		unanswered = 0
		if err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("audit: replay of %s: %w", stream, err)
		}
		if n == 0 {
			return nil
		}
	}
}

// record decodes one message. The bytes are copied: the client may reuse its buffers.
func record(m jetstream.Msg, md *jetstream.MsgMetadata) Recorded {
	var msgID, reason, original string
	if h := m.Headers(); h != nil {
		msgID, reason, original = h.Get(jetstream.MsgIDHeader), h.Get(bus.MetaReason), h.Get(bus.MetaOriginalSubject)
	}
	r := NewRecorded(md.Sequence.Stream, m.Subject(), md.Timestamp, bytes.Clone(m.Data()), msgID, reason)
	if r.DeadLetter != "" {
		r.OriginalSubject = original
	}
	return r
}

// NewRecorded builds the audit's view of one stored message: its hash, its decoded event
// and, on a dead-letter subject, the service and reason. Replay uses it for every
// message; it is exported so a replay from another source (a stream backup) audits the
// same way.
func NewRecorded(seq uint64, subject string, stored time.Time, data []byte, msgID, reason string) Recorded {
	sum := sha256.Sum256(data)
	r := Recorded{Seq: seq, Subject: subject, Stored: stored, Raw: data, SHA256: hex.EncodeToString(sum[:]), MsgID: msgID}
	if svc, ok := strings.CutPrefix(subject, events.DeadLetterPrefix+"."); ok {
		r.DeadLetter, r.Reason = svc, reason
	}
	r.Event, r.Err = events.Decode(data)
	return r
}

// peekEnvelope reads what it can of an undecodable message's envelope, to attribute it
// to a tenant and batch; "" where it cannot.
func peekEnvelope(raw []byte) (tenant, batch string) {
	var w struct {
		Tenant  any `msgpack:"tenant"`
		BatchID any `msgpack:"batch"`
	}
	if msgpack.Unmarshal(raw, &w) != nil {
		return "", ""
	}
	t, _ := w.Tenant.(string)
	b, _ := w.BatchID.(string)
	return t, b
}
