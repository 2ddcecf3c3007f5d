package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/tribunal-dev/tribunal/pkg/bounds"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/registry"
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
	// ChainSeqs are where the stream holds the events of the event's chain, as its
	// header says (bus.MetaChainSeqs; nil when it says none): the positions the
	// aggregator kept in the job record, re-derived alike.
	ChainSeqs []uint64 `json:"chain_seqs,omitempty"`
	// Redrive are the jobs a redrive attempt sends again as its first request names them
	// (bus.MetaRedriveJobs; nil when it names none): checked against its requests.
	Redrive []string `json:"redrive,omitempty"`
	// History marks an event of another batch, replayed only because an audited rubric
	// view's loop state carries over from it. It is folded, never judged.
	History bool `json:"history,omitempty"`
}

// OK reports whether the message decoded to an event.
func (r *Recorded) OK() bool { return r.Err == nil }

// link is the message's link of a digest chain, as the aggregator writes it.
func (r *Recorded) link() string { return r.Event.ID + ":" + r.SHA256 }

// Replay reads the stream through the bus's stream readers (bus.ReadStream: no durable
// state, nothing acked, no service's consumer touched, so an audit never disturbs the
// services) and hands the selected messages to visit in stream order, one at a time:
// nothing is held, so a 100,000-job batch replays in bounded memory. A visitor may keep a message; Replay never reuses one. Undecodable messages
// are handed over with Err set (they are findings) unless what can still be read of
// their envelope names another tenant or batch. An error from visit stops the replay
// and is returned.
//
// The filter selects batches: a batch is selected when it matches BatchID (if set) and
// has an event stored within [Since, Until]; a selected batch is then replayed whole,
// including its events outside the range, because a decision can only be re-derived
// from all of its inputs. A rubric view's loop carries over from batch to batch, so when
// the selected batches hold rubric views Replay also hands over, marked History, the
// loop events of the same views from other batches that precede them.
//
// Replay reads the stream twice: once to select (which batches, which history, and the
// few facts an audit needs before it reaches them, see ahead), then to deliver. The
// first read starts at Since (DeliverByStartTime) and goes back to the stream's start
// only when a selected batch began before it. It cannot read once as RunWith does: the
// history of a rubric view comes before the batch that shows the view is selected, and
// a visitor, unlike an audit, cannot be told to drop what it was handed and start over
// (RunWith audits such a batch again). A caller that needs no history calls ReplayOwn,
// which reads once.
func Replay(ctx context.Context, js jetstream.JetStream, f Filter, visit func(*Recorded) error) error {
	_, err := replay(ctx, js, f, visit)
	return err
}

// replay is Replay, returning the plan (nil: the stream holds nothing) for its reads.
func replay(ctx context.Context, js jetstream.JetStream, f Filter, visit func(*Recorded) error) (*replayPlan, error) {
	p, err := plan(ctx, js, f)
	if err != nil || p == nil {
		return nil, err
	}
	return p, p.each(ctx, js, visit)
}

// ReplayOwn is Replay without the rubric views' history: it hands visit the selected
// batches' own messages, in stream order, exactly those Replay hands over without
// History set. Without Since or Until it reads the stream once: every batch is then
// selected by its first event, so each message is decided as it is read (the
// undecodable ones that name no batch are handed over before the next selected event,
// and those after the last are dropped, as Replay does). A range is decided only at
// the end of a read (a batch that began before Since, a clock set back), so ReplayOwn
// reads a range as Replay does, twice.
func ReplayOwn(ctx context.Context, js jetstream.JetStream, f Filter, visit func(*Recorded) error) error {
	_, err := replayOwn(ctx, js, f, visit)
	return err
}

// replayOwn is ReplayOwn, returning the plan (nil: the stream holds nothing) for its reads.
func replayOwn(ctx context.Context, js jetstream.JetStream, f Filter, visit func(*Recorded) error) (*replayPlan, error) {
	own := func(r *Recorded) error {
		if r.History {
			return nil
		}
		return visit(r)
	}
	if !f.Since.IsZero() || !f.Until.IsZero() {
		return replay(ctx, js, f, own)
	}
	p, err := openPlan(ctx, js, f, nil)
	if err != nil || p == nil {
		return nil, err
	}
	p.passes = 1
	p.reads++
	// pending are undecodable messages attributed to no batch, read after the first
	// selected event: handed over before the next one, dropped at the end.
	var pending []*Recorded
	var verr error
	kept := false
	err = readStream(ctx, js, p.stream, p.consumer(false), p.last, func(r Recorded) bool {
		if !r.OK() {
			tenant, batch := peekEnvelope(r.Raw)
			switch {
			case (f.Tenant != "" && tenant != "" && tenant != f.Tenant) || (f.BatchID != "" && batch != "" && batch != f.BatchID):
			case batch != "":
				verr = visit(&r)
			case kept:
				pending = append(pending, &r)
			}
			return verr == nil
		}
		if f.Tenant != "" && r.Event.Tenant != f.Tenant || f.BatchID != "" && r.Event.BatchID != f.BatchID {
			return true
		}
		for _, u := range pending {
			if verr = visit(u); verr != nil {
				return false
			}
		}
		pending, kept = pending[:0], true
		verr = visit(&r)
		return verr == nil
	})
	if verr != nil {
		return p, verr
	}
	return p, err
}

// replayPlan is what the first read of a replay learns: which messages the second one
// delivers.
type replayPlan struct {
	f       Filter
	stream  string
	filters []string
	// last is the stream's last sequence when the replay began: later messages are not
	// part of it.
	last uint64
	// mainFirst is the first sequence read from Since on; early is set when the delivery
	// must start before it, at the stream's beginning.
	mainFirst uint64
	early     bool
	batches   map[batchKey]*planBatch
	// other maps every rubric job to its view key, for the history of selected views.
	other map[jobKey]string
	// views are the view keys of the selected batches' rubric jobs.
	views map[string]bool
	// firstKept and lastKept bound the selected batches' decodable events.
	firstKept, lastKept uint64
	ahead               *ahead
	// onceFirstKept is the first selected event the one read delivered (once);
	// earlyUndecodable the batches an undecodable message before Since names (conclude).
	onceFirstKept    uint64
	earlyUndecodable map[batchKey]bool
	// undecodableAt is where the first undecodable message naming each batch is.
	undecodableAt map[batchKey]uint64
	// again, when set, limits the second read to these batches (readAgain), and the
	// history it delivers to againViews, their views; from is where it starts (0: where
	// the first read did), and againLoose says whether it delivers the undecodable
	// messages that name no batch too: only when the one read placed them otherwise.
	again      map[batchKey]bool
	againViews map[string]bool
	from       uint64
	againLoose bool
	// progress is told how far each read has come (nil: nobody); firstSeq is the
	// stream's first sequence, where Progress counts from. reads counts the reads
	// begun, passes how many the replay makes (for Progress).
	progress      func(Progress)
	firstSeq      uint64
	reads, passes int
}

// progressEvery is how many sequences a read advances between two reports.
const progressEvery = 4096

// tell reports that read pass reached seq, every progressEvery sequences and at the end.
func (p *replayPlan) tell(pass int, seq uint64) {
	if p.progress == nil || (seq%progressEvery != 0 && seq != p.last) {
		return
	}
	total := p.last - min(p.firstSeq, p.last) + 1
	read := min(seq-min(p.firstSeq, seq)+1, total)
	p.progress(Progress{Pass: pass, Passes: p.passes, Read: read, Total: total})
}

// planBatch is what the first read keeps of one batch.
type planBatch struct {
	selected    bool
	first, last uint64
	views       []string
	// size and subs count the batch's submissions, to know whether a replay from Since
	// missed some.
	size int
	subs map[int]bool
}

// plan is the first read of a replay; nil when the stream holds nothing.
func plan(ctx context.Context, js jetstream.JetStream, f Filter) (*replayPlan, error) {
	return planWith(ctx, js, f, nil)
}

// planWith is plan telling progress how far each read has come (nil: nobody).
func planWith(ctx context.Context, js jetstream.JetStream, f Filter, progress func(Progress)) (*replayPlan, error) {
	p, err := openPlan(ctx, js, f, progress)
	if err != nil || p == nil {
		return nil, err
	}
	p.passes = 2
	p.reads++
	err = readStream(ctx, js, p.stream, p.consumer(false), p.last, func(r Recorded) bool {
		p.first(&r)
		return true
	})
	if err != nil {
		return nil, err
	}
	p.tell(1, p.last)
	return p, p.conclude(ctx, js)
}

// openPlan starts a replay's plan: nil when the stream holds nothing.
func openPlan(ctx context.Context, js jetstream.JetStream, f Filter, progress func(Progress)) (*replayPlan, error) {
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
	p := &replayPlan{f: f, stream: name, last: info.State.LastSeq, batches: map[batchKey]*planBatch{}, other: map[jobKey]string{},
		views: map[string]bool{}, ahead: newAhead(f.BatchID), progress: progress, firstSeq: info.State.FirstSeq}
	if f.Tenant != "" {
		p.filters = []string{events.TenantAll(f.Tenant), events.DeadLetterPrefix + ".>"}
	}
	return p, nil
}

// first notes one message of the first read, from Since on.
func (p *replayPlan) first(r *Recorded) {
	if p.mainFirst == 0 {
		p.mainFirst = r.Seq
	}
	p.tell(1, r.Seq)
	p.scan(r, p.f.Until.IsZero() || !r.Stored.After(p.f.Until))
}

// conclude ends the first read: it reads what precedes Since when a selected batch (or a
// view's loop) began before it, concludes the facts gathered ahead and bounds the
// selected batches.
func (p *replayPlan) conclude(ctx context.Context, js jetstream.JetStream) error {
	if p.wantsEarlier() {
		// A selected batch (or a view's loop) began before Since: read what precedes it.
		p.early = true
		p.reads++
		err := readStream(ctx, js, p.stream, p.consumer(true), p.mainFirst-1, func(r Recorded) bool {
			if r.Seq >= p.mainFirst {
				return false
			}
			if !r.OK() {
				if tenant, batch := peekEnvelope(r.Raw); batch != "" {
					if p.earlyUndecodable == nil {
						p.earlyUndecodable = map[batchKey]bool{}
					}
					p.earlyUndecodable[batchKey{tenant, batch}] = true
					p.undecodable(batchKey{tenant, batch}, r.Seq)
				}
			}
			p.scan(&r, false)
			return true
		})
		if err != nil {
			return err
		}
	}
	p.ahead.done()
	p.bound()
	return nil
}

// wantsEarlier reports whether the replay must read what precedes Since.
func (p *replayPlan) wantsEarlier() bool {
	return !p.f.Since.IsZero() && p.mainFirst > p.firstSeq && p.needsEarlier()
}

// bound works out the selected batches' bounds and views.
func (p *replayPlan) bound() {
	p.firstKept, p.lastKept = 0, 0
	for _, b := range p.batches {
		if !b.selected || b.first == 0 {
			continue
		}
		if p.firstKept == 0 || b.first < p.firstKept {
			p.firstKept = b.first
		}
		p.lastKept = max(p.lastKept, b.last)
		for _, v := range b.views {
			p.views[v] = true
		}
	}
}

// consumer is the ordered consumer of one read: from Since, or from the stream's start.
func (p *replayPlan) consumer(fromStart bool) jetstream.OrderedConsumerConfig {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: p.filters, InactiveThreshold: time.Minute}
	if !fromStart && !p.f.Since.IsZero() {
		since := p.f.Since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	return cfg
}

func (p *replayPlan) batch(bk batchKey) *planBatch {
	b := p.batches[bk]
	if b == nil {
		b = &planBatch{size: -1}
		p.batches[bk] = b
	}
	return b
}

// scan notes one message of the first read; inRange says whether it was stored within
// the filter's range, the only place a batch can be selected.
func (p *replayPlan) scan(r *Recorded, inRange bool) {
	if !r.OK() {
		return // delivered or not by what its envelope still says, see keep
	}
	ev := r.Event
	if p.f.Tenant != "" && ev.Tenant != p.f.Tenant {
		return
	}
	b := p.batch(batchKey{ev.Tenant, ev.BatchID})
	if !b.selected && inRange && (p.f.BatchID == "" || ev.BatchID == p.f.BatchID) {
		b.selected = true
	}
	if b.first == 0 || r.Seq < b.first {
		b.first = r.Seq
	}
	b.last = max(b.last, r.Seq)
	p.ahead.add(r)
	if s, ok := ev.Payload.(*events.JobSubmitted); ok && r.DeadLetter == "" {
		if key := viewKey(ev.Tenant, s.Spec); key != "" {
			p.other[jobKey{ev.Tenant, ev.BatchID, ev.JobID}] = key
			b.views = append(b.views, key)
		}
		if !p.f.Since.IsZero() {
			b.size = s.BatchSize
			if b.subs == nil {
				b.subs = map[int]bool{}
			}
			b.subs[s.Index] = true
		}
	}
}

// needsEarlier reports whether a selected batch lacks a job.submitted or holds a rubric
// view: both mean events before the first one read may matter.
func (p *replayPlan) needsEarlier() bool {
	for _, b := range p.batches {
		if b.selected && (len(b.views) > 0 || b.size < 0 || len(b.subs) < b.size) {
			return true
		}
	}
	return false
}

// each is the second read: it delivers the planned messages in stream order.
func (p *replayPlan) each(ctx context.Context, js jetstream.JetStream, visit func(*Recorded) error) error {
	var verr error
	p.reads++
	pass := p.passes
	defer p.tell(pass, p.last)
	cfg := p.consumer(p.early)
	if p.from != 0 {
		cfg.DeliverPolicy, cfg.OptStartTime, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, nil, p.from
	}
	err := readStream(ctx, js, p.stream, cfg, p.last, func(r Recorded) bool {
		p.tell(pass, r.Seq)
		inRange := (!p.early || r.Seq >= p.mainFirst) && (p.f.Until.IsZero() || !r.Stored.After(p.f.Until))
		keep, history := p.keep(&r, inRange)
		if !keep {
			return true
		}
		r.History = history
		verr = visit(&r)
		return verr == nil
	})
	if verr != nil {
		return verr
	}
	return err
}

// once reads the stream a single time, selecting and delivering together: what a
// second read would deliver is decidable as each message is read but for the facts
// gathered ahead (see ahead) and the history of rubric views. It delivers as if those
// asked for nothing, gathering them as the first read does, and returns the batches
// for which that was wrong, with why (none: the delivery, and what the visitor asked the
// ahead facts, were those of a planned replay). The plan is concluded either way (the
// early read included), so readAgain and each can then deliver those batches again.
// visit is given the messages it delivers.
func (p *replayPlan) once(ctx context.Context, js jetstream.JetStream, visit func(*Recorded)) ([]contradiction, error) {
	p.passes = 1
	p.reads++
	p.ahead.live = true
	var wrong []contradiction
	add := func(bk batchKey, why string) { wrong = append(wrong, contradiction{bk, why}) }
	// pending are undecodable messages attributed to no batch, read after the selected
	// batches' first event: delivered before the next kept one, the bound a planned
	// replay keeps them within, dropped at the end.
	var pending []*Recorded
	dropped := map[batchKey]bool{}
	err := readStream(ctx, js, p.stream, p.consumer(false), p.last, func(r Recorded) bool {
		inRange := p.f.Until.IsZero() || !r.Stored.After(p.f.Until)
		if !r.OK() {
			p.first(&r)
			tenant, batch := peekEnvelope(r.Raw)
			if batch != "" {
				p.undecodable(batchKey{tenant, batch}, r.Seq)
			}
			switch {
			case (p.f.Tenant != "" && tenant != "" && tenant != p.f.Tenant) || (p.f.BatchID != "" && batch != "" && batch != p.f.BatchID):
			case batch != "" && (inRange || p.selected(batchKey{tenant, batch})):
				visit(&r)
			case batch != "":
				dropped[batchKey{tenant, batch}] = true
			case inRange && p.onceFirstKept != 0 && r.Seq > p.onceFirstKept:
				pending = append(pending, &r)
			}
			return true
		}
		bk := batchKey{r.Event.Tenant, r.Event.BatchID}
		before := p.batches[bk]
		wasSelected, seen := before != nil && before.selected, before != nil && before.first != 0
		p.first(&r)
		if p.f.Tenant != "" && r.Event.Tenant != p.f.Tenant || !p.selected(bk) {
			return true
		}
		if !wasSelected && seen {
			// Stored within the range after events stored outside it (a clock set back).
			add(bk, fmt.Sprintf("batch %s/%s was selected by an event stored after some of its own outside the range", bk.tenant, bk.batch))
		}
		for _, u := range pending {
			visit(u)
		}
		pending = pending[:0]
		if p.onceFirstKept == 0 {
			p.onceFirstKept = r.Seq
		}
		visit(&r)
		return true
	})
	if err != nil {
		return nil, err
	}
	p.tell(1, p.last)
	p.ahead.live = false
	if err := p.conclude(ctx, js); err != nil {
		return nil, err
	}
	// holding are the selected batches holding each view, for the history check.
	holding := map[string][]batchKey{}
	for _, bk := range sortedKeys(p.batches) {
		if b := p.batches[bk]; b.selected {
			for _, v := range distinct(b.views) {
				holding[v] = append(holding[v], bk)
			}
		}
	}
	for _, bk := range sortedKeys(p.batches) {
		b := p.batches[bk]
		switch {
		case b.selected && b.first != 0 && b.first < p.mainFirst:
			add(bk, fmt.Sprintf("batch %s/%s began before --since", bk.tenant, bk.batch))
		case b.selected && (dropped[bk] || p.earlyUndecodable[bk]):
			add(bk, fmt.Sprintf("batch %s/%s was selected after an undecodable message of its own was passed", bk.tenant, bk.batch))
		case !b.selected && b.first != 0 && b.first < p.lastKept:
			// A rubric view's loop carries over from b: the selected batches holding the
			// view fold it.
			for _, v := range distinct(b.views) {
				for _, sk := range holding[v] {
					add(sk, fmt.Sprintf("batch %s/%s: a rubric view's loop carries over from batch %s/%s", sk.tenant, sk.batch, bk.tenant, bk.batch))
				}
			}
		}
	}
	p.ahead.contradicted(add)
	return wrong, nil
}

// contradiction is a batch whose audit the one read got wrong, and why.
type contradiction struct {
	bk  batchKey
	why string
}

// readAgain sets the plan's second read to deliver the batches whose audit the one read
// got wrong (once), and with them every selected batch a rubric view ties to them: a
// view's loop carries over from batch to batch, so its batches are audited together.
// It returns the batches, sorted, and why, each reason once.
func (p *replayPlan) readAgain(wrong []contradiction) ([]batchKey, string) {
	p.again, p.againViews = map[batchKey]bool{}, map[string]bool{}
	var whys []string
	for _, c := range wrong {
		p.again[c.bk] = true
		if !slices.Contains(whys, c.why) {
			whys = append(whys, c.why)
		}
	}
	views := map[batchKey][]string{}
	for bk, b := range p.batches {
		if b.selected && len(b.views) > 0 {
			views[bk] = distinct(b.views)
		}
	}
	for grew := true; grew; {
		grew = false
		for bk, vs := range views {
			if p.again[bk] {
				for _, v := range vs {
					grew = grew || !p.againViews[v]
					p.againViews[v] = true
				}
				continue
			}
			for _, v := range vs {
				if p.againViews[v] {
					p.again[bk], grew = true, true
					break
				}
			}
		}
	}
	// The second read starts at the first message it delivers: the batches' first
	// events, undecodable messages naming them, their views' history, and the
	// undecodable messages naming no batch when the one read placed them otherwise than
	// a planned replay (it began keeping them elsewhere than the first selected event).
	p.againLoose = p.onceFirstKept != p.firstKept
	from := func(seq uint64) {
		if seq != 0 && (p.from == 0 || seq < p.from) {
			p.from = seq
		}
	}
	if p.againLoose {
		from(p.firstKept + 1)
	}
	for bk, b := range p.batches {
		switch {
		case p.again[bk]:
			from(b.first)
			from(p.undecodableAt[bk])
		case !b.selected && b.first < p.lastKept && slices.ContainsFunc(b.views, func(v string) bool { return p.againViews[v] }):
			from(b.first)
		}
	}
	return sortedKeys(p.again), strings.Join(whys, "; ")
}

// undecodable notes an undecodable message naming batch bk at seq.
func (p *replayPlan) undecodable(bk batchKey, seq uint64) {
	if p.undecodableAt == nil {
		p.undecodableAt = map[batchKey]uint64{}
	}
	if at, ok := p.undecodableAt[bk]; !ok || seq < at {
		p.undecodableAt[bk] = seq
	}
}

// distinct are the views of a batch, each once (a batch lists one per rubric job).
func distinct(views []string) []string {
	out := slices.Clone(views)
	slices.Sort(out)
	return slices.Compact(out)
}

// sortedKeys are a map's batch keys by tenant, then batch.
func sortedKeys[V any](m map[batchKey]V) []batchKey {
	out := make([]batchKey, 0, len(m))
	for bk := range m {
		out = append(out, bk)
	}
	slices.SortFunc(out, func(x, y batchKey) int {
		if c := strings.Compare(x.tenant, y.tenant); c != 0 {
			return c
		}
		return strings.Compare(x.batch, y.batch)
	})
	return out
}

// keep decides whether the second read delivers r, and whether as history.
func (p *replayPlan) keep(r *Recorded, inRange bool) (keep, history bool) {
	if !r.OK() {
		tenant, batch := peekEnvelope(r.Raw)
		if (p.f.Tenant != "" && tenant != "" && tenant != p.f.Tenant) || (p.f.BatchID != "" && batch != "" && batch != p.f.BatchID) {
			return false, false
		}
		switch {
		case batch != "" && p.selected(batchKey{tenant, batch}):
			return p.again == nil || p.again[batchKey{tenant, batch}], false
		case batch == "" && inRange:
			// Attributed to no batch: kept among the selected batches' events (read
			// again only when the one read kept others, see readAgain).
			return (p.again == nil || p.againLoose) && r.Seq > p.firstKept && r.Seq < p.lastKept, false
		case batch != "" && inRange:
			return p.again == nil, false
		}
		return false, false
	}
	ev := r.Event
	if p.f.Tenant != "" && ev.Tenant != p.f.Tenant {
		return false, false
	}
	if bk := (batchKey{ev.Tenant, ev.BatchID}); p.selected(bk) {
		return p.again == nil || p.again[bk], false
	}
	// Another batch: kept when a selected view's loop is folded from it.
	if p.lastKept == 0 || r.Seq >= p.lastKept {
		return false, false
	}
	key := jobKey{ev.Tenant, ev.BatchID, ev.JobID}
	switch s := ev.Payload.(type) {
	case *events.JobSubmitted:
		if r.DeadLetter != "" {
			return false, false
		}
	case *events.SpotcheckRecorded:
		key.job = s.ACID
	case *events.ViewReset:
		key.job = s.ACID
	case *events.VerdictEmitted:
		if !looping(s.Kind) && r.DeadLetter == "" {
			return false, false
		}
	case *events.GatesFailed:
		if !looping(s.Kind) && r.DeadLetter == "" {
			return false, false
		}
	case *events.RenderUnchanged:
	default:
		if r.DeadLetter == "" {
			return false, false
		}
	}
	v, ok := p.other[key]
	if p.again != nil {
		return ok && p.againViews[v], true
	}
	return ok && p.views[v], true
}

func (p *replayPlan) selected(bk batchKey) bool {
	b := p.batches[bk]
	return b != nil && b.selected
}

// looping reports whether jobs of kind k loop over iterations and batches.
func looping(k events.Kind) bool {
	_, ok := registry.Looping(k)
	return ok
}

// viewKey is a looping job's state key, "" for a job without one.
func viewKey(tenant string, spec events.JobSpec) string {
	if lk, ok := registry.Looping(spec.Kind); ok {
		return lk.StateKey(tenant, spec)
	}
	return ""
}

// ahead is what an audit must know of a batch before the replay reaches it, because the
// aggregator knew it from its key-value state or from the order it happened to apply its
// inputs in: which sign-off of an interactive batch won the spot-check claim (the
// recorded decision names it), which jobs each redrive sends again (`tribunal redrive`
// writes them on the header before its first request), and where each job's cancel was
// applied (see cancelScan). Replay's first read gathers it (add, then done); Audit over a
// slice reads it from the slice.
//
// A replay read once (replayPlan.once) gathers them while the audit runs: the audit is
// told what is known so far (live), and what it was told is kept (claims, redrives, the
// cancels it applied as stored) to be checked against what the whole read concludes
// (contradicted).
type ahead struct {
	batches map[batchKey]*aheadBatch
	// scan gathers the cancels' places until done; cancels is what it concludes.
	scan    *cancelScan
	cancels *cancelPlan
	// live is set while the facts are still being gathered; claims and redrives are what
	// the audit was told meanwhile.
	live     bool
	claims   []claimTold
	redrives []redriveTold
	// reviews are the people's answers each completion folded (see placeReview).
	reviews *reviewScan
}

// claimTold is a claim holder the audit was told while the facts were gathered.
type claimTold struct {
	bk          batchKey
	job, holder string
}

// redriveTold is what the audit was told of a redrive attempt's jobs at its first
// request while the facts were gathered: the jobs the request names, or how many of
// them the stream had shown (the attempt's jobs only grow).
type redriveTold struct {
	bk      batchKey
	attempt int
	named   []string
	jobs    int
}

// claimHolder is the job whose sign-off wins batch bk's spot-check claim, job asking
// for it: the one the recorded decision that waits for a person names, else job.
func (h *ahead) claimHolder(bk batchKey, job string) string {
	holder := job
	if first := h.of(bk).awaiting; first != "" {
		holder = first
	}
	if h.live {
		h.claims = append(h.claims, claimTold{bk: bk, job: job, holder: holder})
	}
	return holder
}

// redriveJobs are the jobs redrive attempt of batch bk sends again, named those its
// first request names: the requests the stream holds, or while the facts are gathered
// the named ones (the stream shows the rest later).
func (h *ahead) redriveJobs(bk batchKey, attempt int, named []string) []string {
	jobs := h.of(bk).redrives[attempt]
	if !h.live {
		return jobs
	}
	if named != nil {
		h.redrives = append(h.redrives, redriveTold{bk: bk, attempt: attempt, named: named})
		return named
	}
	h.redrives = append(h.redrives, redriveTold{bk: bk, attempt: attempt, jobs: len(jobs)})
	return jobs
}

// contradicted tells add of each batch what the audit was told of it while the facts
// were gathered that the whole read contradicts: that batch's audit must then run again
// with what the read concluded. Each fact is a batch's own (its claim, its redrives, its
// jobs' cancels, its people's answers), so the other batches' audits stand. Call it
// after done.
func (h *ahead) contradicted(add func(bk batchKey, why string)) {
	for _, c := range h.claims {
		want := c.job
		if first := h.of(c.bk).awaiting; first != "" {
			want = first
		}
		if c.holder != want {
			add(c.bk, fmt.Sprintf("batch %s/%s: the spot-check claim went to the sign-off of %s, which the stream holds after %s's", c.bk.tenant, c.bk.batch, want, c.job))
		}
	}
	for _, r := range h.redrives {
		jobs := h.of(r.bk).redrives[r.attempt]
		if r.named != nil && !slices.Equal(r.named, jobs) {
			add(r.bk, fmt.Sprintf("batch %s/%s: redrive %d's first request names other jobs than its requests send again", r.bk.tenant, r.bk.batch, r.attempt))
		}
		if n := len(jobs); r.named == nil && n != r.jobs {
			add(r.bk, fmt.Sprintf("batch %s/%s: redrive %d sends %d jobs again, %d of them stored after its first request", r.bk.tenant, r.bk.batch, r.attempt, n, n-r.jobs))
		}
	}
	cancels := map[batchKey]int{}
	for _, pc := range h.cancels.bySeq {
		cancels[pc.bk]++
	}
	for _, bk := range sortedKeys(cancels) {
		add(bk, fmt.Sprintf("batch %s/%s: %d job cancels were applied elsewhere than the stream holds them", bk.tenant, bk.batch, cancels[bk]))
	}
	h.reviews.contradicted(add)
}

type aheadBatch struct {
	// awaiting is the first job whose recorded decision waits for a person.
	awaiting string
	// redrives are the jobs each redrive attempt sends again, in stream order.
	redrives map[int][]string
}

// newAhead starts gathering; batch limits the cancels' places to one batch ("" every
// batch), the only one a replay of that batch audits.
func newAhead(batch string) *ahead {
	return &ahead{batches: map[batchKey]*aheadBatch{}, scan: newCancelScan(batch), cancels: &cancelPlan{}, reviews: newReviewScan()}
}

func (h *ahead) add(r *Recorded) {
	if !r.OK() || r.History || r.Event.Rejudge != "" {
		return
	}
	h.scan.add(r)
	if r.DeadLetter != "" {
		return
	}
	h.reviews.add(r)
	ev := r.Event
	bk := batchKey{ev.Tenant, ev.BatchID}
	switch p := ev.Payload.(type) {
	case *events.IterationDecided:
		if p.Status == events.StatusAwaitingSpotcheck && h.batch(bk).awaiting == "" {
			h.batch(bk).awaiting = ev.JobID
		}
	case *events.RenderRequested:
		if isRedriveRequest(r) {
			b := h.batch(bk)
			if !slices.Contains(b.redrives[ev.Attempt], ev.JobID) {
				b.redrives[ev.Attempt] = append(b.redrives[ev.Attempt], ev.JobID)
			}
		}
	}
}

func (h *ahead) batch(bk batchKey) *aheadBatch {
	b := h.batches[bk]
	if b == nil {
		b = &aheadBatch{redrives: map[int][]string{}}
		h.batches[bk] = b
	}
	return b
}

func (h *ahead) of(bk batchKey) *aheadBatch {
	if b := h.batches[bk]; b != nil {
		return b
	}
	return &aheadBatch{redrives: map[int][]string{}}
}

// readStream delivers the selected messages (cfg's filters and start) to visit until the
// stream's sequence last, the end of what matches, or visit returning false. It reads
// through one of the bus's reader slots (bus.ReadStream), not a consumer of its own
// naming, so the audit needs no right on any consumer but the readers' (the console's
// NATS user has no other, pkg/tenants).
//
// Hashing and decoding a message costs more than reading it, and each message's is its
// own: chunks of messages are decoded on every core while the stream is read and the
// visitor audits, and handed to visit in stream order. At most readAhead chunks are
// read ahead of the visitor, so a slow visitor holds the read back rather than memory
// growing.
func readStream(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.OrderedConsumerConfig, last uint64, visit func(Recorded) bool) error {
	o := bus.ReadOptions{FilterSubjects: cfg.FilterSubjects, Last: last}
	if cfg.OptStartTime != nil {
		o.Since = *cfg.OptStartTime
	}
	if cfg.DeliverPolicy == jetstream.DeliverByStartSequencePolicy {
		o.From = cfg.OptStartSeq
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan *readChunk, readAhead)
	order := make(chan *readChunk, readAhead)
	for range max(1, runtime.GOMAXPROCS(0)) {
		go func() {
			for c := range work {
				c.decode()
			}
		}()
	}
	var stopped atomic.Bool
	var readErr error
	go func() {
		defer close(order)
		defer close(work)
		cur := &readChunk{done: make(chan struct{})}
		// flush hands the chunk to the decoders, then to the visitor: every chunk the
		// visitor waits for is being decoded.
		flush := func() bool {
			if len(cur.msgs) == 0 {
				return true
			}
			select {
			case work <- cur:
			case <-ctx.Done():
				return false
			}
			select {
			case order <- cur:
			case <-ctx.Done():
				return false
			}
			cur = &readChunk{done: make(chan struct{})}
			return true
		}
		readErr = bus.ReadStream(ctx, js, stream, o, func(m jetstream.Msg, md *jetstream.MsgMetadata) bool {
			if stopped.Load() {
				return false
			}
			cur.msgs = append(cur.msgs, rawOf(m, md))
			if len(cur.msgs) < readChunkSize && md.NumPending > 0 && (last == 0 || md.Sequence.Stream < last) {
				return true
			}
			return flush()
		})
		flush()
	}()
	for c := range order {
		<-c.done
		for i := 0; i < len(c.recs) && !stopped.Load(); i++ {
			if !visit(c.recs[i]) {
				stopped.Store(true)
				cancel()
			}
		}
		c.recs = nil
	}
	if readErr != nil && !stopped.Load() {
		return fmt.Errorf("audit: replay of %s: %w", stream, readErr)
	}
	return nil
}

// readChunkSize is how many messages are decoded as one piece of work; readAhead how
// many such chunks may wait for the visitor: enough to keep every core decoding while
// the visitor works (a chunk takes a core about as long as the visitor takes over it),
// few enough that what waits is a few MiB (32 chunks held about 30 MB of raw and
// decoded events at the 100,000-job audit's peak).
const (
	readChunkSize = 256
	readAhead     = 8
)

// readChunk is a run of consecutive messages: read (msgs), then decoded (recs, done
// closed).
type readChunk struct {
	msgs []rawMsg
	recs []Recorded
	done chan struct{}
}

func (c *readChunk) decode() {
	c.recs = make([]Recorded, len(c.msgs))
	for i, m := range c.msgs {
		c.recs[i] = m.record()
	}
	c.msgs = nil
	close(c.done)
}

// rawMsg is what the audit reads of one message before decoding it.
type rawMsg struct {
	seq                     uint64
	subject                 string
	stored                  time.Time
	data                    []byte
	msgID, reason, original string
	chainSeqs, redrive      string
}

// record decodes the message.
func (m *rawMsg) record() Recorded {
	r := NewRecorded(m.seq, m.subject, m.stored, m.data, m.msgID, m.reason)
	if r.DeadLetter != "" {
		r.OriginalSubject = m.original
	}
	if r.OK() {
		r.ChainSeqs = bus.ParseChainSeqs(m.chainSeqs, len(r.Event.Chain))
		if m.redrive != "" && isRedriveRequest(&r) {
			r.Redrive = bus.ParseRedriveJobs(m.redrive)
		}
	}
	return r
}

// rawOf copies what the audit reads of a message: the client may reuse its buffers.
func rawOf(m jetstream.Msg, md *jetstream.MsgMetadata) rawMsg {
	r := rawMsg{seq: md.Sequence.Stream, subject: m.Subject(), stored: md.Timestamp, data: bytes.Clone(m.Data())}
	if h := m.Headers(); h != nil {
		r.msgID, r.reason, r.original = h.Get(jetstream.MsgIDHeader), h.Get(bus.MetaReason), h.Get(bus.MetaOriginalSubject)
		r.chainSeqs, r.redrive = h.Get(bus.MetaChainSeqs), h.Get(bus.MetaRedriveJobs)
	}
	return r
}

// record decodes one message. The bytes are copied: the client may reuse its buffers.
func record(m jetstream.Msg, md *jetstream.MsgMetadata) Recorded {
	raw := rawOf(m, md)
	return raw.record()
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
	if bounds.Msgpack(raw, bounds.Event) != nil || msgpack.Unmarshal(raw, &w) != nil {
		return "", ""
	}
	t, _ := w.Tenant.(string)
	b, _ := w.BatchID.(string)
	return t, b
}
