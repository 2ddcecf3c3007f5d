package audit

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/dictzstd"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/registry"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
	"github.com/tribunal-dev/tribunal/pkg/spillwords"
	"github.com/tribunal-dev/tribunal/pkg/stepset"
)

// blobTimeout bounds one blob read of the audit.
const blobTimeout = 30 * time.Second

// submittedBudget is the most bytes of the jobs' submission sequences in memory: each is
// written once, as its job is first stored (the newest place), and read at the end.
const submittedBudget = 256 << 10

// maxIndexFindings bounds the "no job.submitted for index" findings of one batch.
const maxIndexFindings = 20

// Run replays the batches f selects (Replay) and audits them as they are read: the
// audit keeps what later checks need (the rules' state, the expected outputs not yet
// recorded, the recorded outputs not yet explained, one entry per logical step), never
// the stream itself, so its memory does not grow with the events' bytes.
func Run(ctx context.Context, js jetstream.JetStream, f Filter, store blob.Store) (Report, error) {
	return RunWith(ctx, js, f, store, Options{})
}

// Options are what a caller of a long audit may ask of it besides the filter.
type Options struct {
	// Progress, when set, is told how far the replay has read, every few thousand
	// messages and at the end of each read (Progress).
	Progress func(Progress)
}

// Progress is how far a replay has read: Read of Total stream sequences in read Pass of
// Passes (1 when one read audits; 2 when a second read audits again, see RunWith).
// Total is an upper bound: a filter skips messages of other tenants and batches without
// reading them.
type Progress struct {
	Pass, Passes int
	Read, Total  uint64
}

// RunWith is Run with options.
//
// It reads the stream once (replayPlan.once), auditing as it selects. What the
// aggregator knew before the stream shows it (see ahead) is gathered on the way, and
// what the audit was told of it is checked against the whole read: when the read
// contradicts it for a batch (a spot-check claim or a cancel the aggregator's race
// settled otherwise than the stream's order, a redrive's jobs stored after its first
// request, a view's loop or a batch begun before Since), that batch's audit is dropped
// and the stream read again with the facts concluded, as a planned replay does, for
// that batch only and the selected batches a rubric view ties to it, from its first
// message on (readAgain). The other batches' audits stand: each batch's facts are its
// own. The report says which batches were read again and why (ReadAgain,
// ReadAgainBatches). Either way the audit decides what the planned replay decides.
func RunWith(ctx context.Context, js jetstream.JetStream, f Filter, store blob.Store, o Options) (Report, error) {
	p, err := openPlan(ctx, js, f, o.Progress)
	if err != nil {
		return Report{}, err
	}
	if p == nil {
		return newAuditor(ctx, store, newAhead(f.BatchID)).finish(), nil
	}
	a := newAuditor(ctx, store, p.ahead)
	wrong, err := p.once(ctx, js, a.visit)
	if err != nil {
		return Report{}, err
	}
	rep := a.finish()
	if len(wrong) > 0 {
		// What the one read derived of these batches rests on facts the read
		// contradicts: none of it stands.
		again, why := p.readAgain(wrong)
		p.passes = 2
		b := newAuditor(ctx, store, p.ahead)
		if err := p.each(ctx, js, func(r *Recorded) error { b.visit(r); return nil }); err != nil {
			return Report{}, err
		}
		second := b.finish()
		rep = mergeAgain(a, rep, b, second, p.again, p.againLoose)
		rep.ReadAgainFrom = p.from
		rep.ReadAgain, rep.ReadAgainMessages = why, second.Events+second.History+second.Rejudges
		for _, bk := range again {
			rep.ReadAgainBatches = append(rep.ReadAgainBatches, bk.tenant+"/"+bk.batch)
		}
	}
	rep.Reads = p.reads
	return rep, nil
}

// Audit re-derives every decision of the replayed batches from their recorded events
// alone and reports each value that differs from what the stream (or blob storage)
// records. It runs the aggregator's own rules (pkg/rulebook, in memory) in stream order:
// every kind's derivation, blocked jobs, loop steps and sign-offs (folding each view's
// loop across the replayed batches), batch completion, the digest chains, and every
// manifest, rebuilt and compared with the stored blob. Every artifact a render or its
// gates recorded is read back too, and so is every judge call's record and every page
// of a batch's plan; a verdict that names no call record (recorded before they were
// kept) is listed as not covered.
//
// store is read for the rubric a view is judged against (its verdicts cannot be
// normalized without it), the artifacts, call records, plan pages and the stored
// manifests; every blob is verified
// against its content address on read, so an altered one is reported as unreadable.
//
// Audit takes the messages as a slice (a stream backup, tests); Run audits the stream as
// it is read.
func Audit(recorded []Recorded, store blob.Store) Report {
	recs := make([]*Recorded, len(recorded))
	for i := range recorded {
		recs[i] = &recorded[i]
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })
	h := newAhead("")
	for _, r := range recs {
		h.add(r)
	}
	h.done()
	a := newAuditor(context.Background(), store, h)
	for _, r := range recs {
		a.visit(r)
	}
	return a.finish()
}

// auditor audits one replay, a message at a time (visit), then what only the end of the
// replay shows (finish).
type auditor struct {
	ctx   context.Context
	store blob.Store
	ahead *ahead
	rep   Report
	// job scopes the audit to one job of its batch (RunJob): the outputs the rules
	// derive for other jobs, and the batch positions no submission was replayed for, are
	// not its findings.
	job string

	// mem runs the aggregator's rules over the replay.
	mem     *rulebook.Memory
	audited map[batchKey]bool
	batches map[batchKey]*simBatch
	// submitted is the stream sequence of each job's job.submitted, by its place in mem
	// (0: none), for the findings about a job left open: a word a job, written out but
	// for the newest (submittedBudget).
	submitted  *spillwords.Words
	documents  map[string]cachedDocument
	noted      map[string]bool
	claimNoted map[batchKey]bool

	// undecodable are the hashes of the undecodable messages reported (a dead letter
	// repeats its original).
	undecodable map[[32]byte]bool
	// steps has one entry per logical step of the audited events, under the step's
	// deterministic id, for the whole replay (a duplicate may come hours after its first
	// copy), kept mostly on disk (stepTable); linked keeps the whole hash of the events
	// chains name (see linkedTypes), as long (digestTable); forged are the events whose
	// id is not their step's, by that id, and forgedSteps the steps whose first event was
	// one of them (rare: maps). types are the event types the steps name.
	steps       stepTable
	types       []events.Type
	linked      digestTable
	forged      map[string]forgedEntry
	forgedSteps map[stepKey]string
	// gated is the first gating decision of each pass of a job (one a pass: kept as the
	// steps are).
	gated stepTable
	// awaiting is the first job of each batch whose recorded decision waits for a person.
	awaiting map[batchKey]string

	// waiting are the outputs the rules derived that are not recorded yet, by id; early
	// the recorded outputs no expectation has claimed yet, by id (lots: a fixed budget
	// in memory, the rest on disk; a forged stream's unexplained outputs wait in early
	// to the end).
	waiting, early *lot
	// parking compresses the waiting expectations, a codec per event type.
	parking map[events.Type]*dictzstd.Codec
	// deferred are inputs that overtook their job's submission.
	deferred map[jobKey][]*Recorded
	// rendered is each pass's render.done until its gates are checked.
	rendered map[passKey]*Recorded
	// dangling are chain links naming an event not recorded (yet), by its id.
	dangling map[string][]chainRef
	chained  map[string]bool
	// refused are the inputs the rules refuse, by id.
	refused map[string]events.Type
	// planUnread are batches whose cancel could not be followed over their plan (no blob
	// store, or an unreadable page): their cancel's steps are noted, not judged.
	planUnread map[batchKey]bool
	blobs      blobCache
	// pos is where the stream holds the message being visited. foldHeld and afterHeld
	// are people's answers waiting for their batch's completion, to be applied before
	// its fold and after it; appliedAhead the answers applied before the stream holds
	// them, by position (see placeReview).
	pos                 uint64
	foldHeld, afterHeld map[batchKey][]*Recorded
	appliedAhead        map[uint64]bool
	// rebuilt are the rebuilt manifests, compressed, until their announcements are read;
	// zdec reads them back.
	rebuilt rebuiltManifests
	zdec    *zstd.Decoder

	// What a second read limited to some batches needs to merge its report with this
	// one's (mergeAgain): the counts by batch (loose: undecodable messages attributed
	// to none), and where in the replay each note and refusal was made (visiting: the
	// sequence being visited, the end during finish).
	tallies                 map[batchKey]*tally
	loose                   int
	visiting                uint64
	unverifiedAt, refusedAt []uint64
}

// tally is what an audit counted of one batch.
type tally struct{ events, rejudges, decisions int }

func (a *auditor) tally(bk batchKey) *tally {
	t := a.tallies[bk]
	if t == nil {
		t = &tally{}
		a.tallies[bk] = t
	}
	return t
}

// decided counts one re-derived value of batch bk compared with its record.
func (a *auditor) decided(bk batchKey) {
	a.rep.Decisions++
	a.tally(bk).decisions++
}

// stepKey is a logical step, the deterministic id (events.NewID) of its event, raw.
type stepKey [16]byte

// stepEntry is what the audit keeps of a step: where its event is, the first 8 bytes of
// its hash (enough to tell a second copy with other contents), its type (an index into
// auditor.types) and whether an expected output claimed it. 16 bytes, for every event of
// a batch: the sequence, the claim and the type share one word (at). On the heap only
// while it is among the newest (stepTable).
type stepEntry struct {
	at  uint64
	sum uint64
}

// stepTable holds an entry per key for the whole replay in a heap that does not grow
// with the replay: a bounded table of the newest entries in memory, the rest in
// temporary files with a bloom filter and a sparse index each in memory (pkg/stepset,
// about 1.5 bytes an entry once written out).
type stepTable struct{ set *stepset.Set }

// stepSlots is the size of a step table's in-memory part (tests lower it).
var stepSlots = stepset.HotSlots

func newStepTable(dir string) stepTable { return stepTable{stepset.NewSized(dir, stepSlots)} }

func (t stepTable) get(k stepKey) (stepEntry, bool) {
	v, ok := t.set.Get(stepset.Key(k))
	return stepEntry{at: v[0], sum: v[1]}, ok
}

func (t stepTable) put(k stepKey, s stepEntry) { t.set.Put(stepset.Key(k), stepset.Value{s.at, s.sum}) }

// gating is the first gating decision of the pass k names.
func (t stepTable) gating(k stepKey) (gating, bool) {
	v, ok := t.set.Get(stepset.Key(k))
	return gating(v[0]), ok
}

func (t stepTable) putGating(k stepKey, g gating) {
	t.set.Put(stepset.Key(k), stepset.Value{uint64(g)})
}

// digestTable keeps the whole SHA-256 of each event a chain names (linkedTypes) by its
// step, for the whole replay, in a step table of four words a value: in a large batch
// most jobs are in flight in stream order (their render request read long before their
// verdict), so a map of their hashes grew with the batch (112 MB seven minutes into a
// 1,000,000-AC audit), where the table's heap does not. One table, not two of two words
// each: the second's filters and fences were 4 MB of a 1,000,000-AC audit's heap.
type digestTable struct{ set *stepset.Of[stepset.Wide] }

func newDigestTable(dir string) digestTable {
	return digestTable{stepset.NewOf[stepset.Wide](dir, stepSlots)}
}

func (t digestTable) get(k stepKey) (sum [32]byte, ok bool) {
	v, ok := t.set.Get(stepset.Key(k))
	if !ok {
		return sum, false
	}
	for i, w := range v {
		binary.BigEndian.PutUint64(sum[8*i:], w)
	}
	return sum, true
}

func (t digestTable) put(k stepKey, sum [32]byte) {
	var v stepset.Wide
	for i := range v {
		v[i] = binary.BigEndian.Uint64(sum[8*i:])
	}
	t.set.Put(stepset.Key(k), v)
}

// maxStepSeq is the largest stream sequence a step entry holds (55 bits: a thousand
// years of a million messages a second); a later one is kept as this.
const maxStepSeq = 1<<55 - 1

func newStepEntry(seq, sum uint64, typ uint8) stepEntry {
	return stepEntry{at: min(seq, maxStepSeq)<<9 | uint64(typ), sum: sum}
}

// seq is where the stream holds the step's event.
func (s stepEntry) seq() uint64 { return s.at >> 9 }

// typ is the event's type, an index into auditor.types.
func (s stepEntry) typ() uint8 { return uint8(s.at) }

// claimed reports whether an expected output claimed the event.
func (s stepEntry) claimed() bool { return s.at&(1<<8) != 0 }

// claim marks it claimed.
func (s *stepEntry) claim() { s.at |= 1 << 8 }

// linkedTypes are the events the stages' chains name: their whole hash is kept.
var linkedTypes = map[events.Type]bool{
	events.TypeRenderRequested: true, events.TypeRenderDone: true, events.TypeGatesDone: true,
}

func prefix(sum [32]byte) uint64 { return binary.BigEndian.Uint64(sum[:8]) }

// typeCode is t's index in auditor.types, added on first use.
func (a *auditor) typeCode(t events.Type) uint8 {
	for i, x := range a.types {
		if x == t {
			return uint8(i)
		}
	}
	if len(a.types) == 255 {
		return 255 // more types than events has: named by no type
	}
	a.types = append(a.types, t)
	return uint8(len(a.types) - 1)
}

type forgedEntry struct {
	seq uint64
	sha [32]byte
}

// gating is a pass's first gating decision in one word: where the stream holds it and
// whether it failed (gates.failed) or passed (gates.done). One for every pass of a batch.
type gating uint64

func newGating(typ events.Type, seq uint64) gating {
	g := gating(min(seq, maxStepSeq) << 1)
	if typ == events.TypeGatesFailed {
		g |= 1
	}
	return g
}

func (g gating) seq() uint64 { return uint64(g) >> 1 }

func (g gating) typ() events.Type {
	if g&1 != 0 {
		return events.TypeGatesFailed
	}
	return events.TypeGatesDone
}

// passKey is one pass of a job through the pipeline: a redrive attempt renders and gates
// the same iteration again.
type passKey struct {
	job       jobKey
	iteration int
	attempt   int
}

func newAuditor(ctx context.Context, store blob.Store, h *ahead) *auditor {
	a := &auditor{
		ctx: ctx, store: store, ahead: h,
		audited: map[batchKey]bool{}, batches: map[batchKey]*simBatch{}, documents: map[string]cachedDocument{},
		noted: map[string]bool{}, claimNoted: map[batchKey]bool{},
		undecodable: map[[32]byte]bool{}, forged: map[string]forgedEntry{}, forgedSteps: map[stepKey]string{},
		awaiting: map[batchKey]string{},
		parking:  map[events.Type]*dictzstd.Codec{}, deferred: map[jobKey][]*Recorded{},
		rendered: map[passKey]*Recorded{}, dangling: map[string][]chainRef{}, chained: map[string]bool{},
		refused: map[string]events.Type{}, planUnread: map[batchKey]bool{}, blobs: blobCache{entries: map[blob.Ref]blobResult{}},
		foldHeld: map[batchKey][]*Recorded{}, afterHeld: map[batchKey][]*Recorded{}, appliedAhead: map[uint64]bool{},
		tallies: map[batchKey]*tally{},
	}
	a.rep.Mismatches = []Mismatch{}
	// Final job records wait for the completion and the key-value comparison on disk
	// (in $TMPDIR), not on the heap: what the audit holds of a job it is done with is its
	// key and where its record is. So do the steps' entries, but the newest.
	spill := os.TempDir()
	a.steps, a.gated, a.linked = newStepTable(spill), newStepTable(spill), newDigestTable(spill)
	a.waiting, a.early = newLot(spill), newLot(spill)
	a.mem = &rulebook.Memory{Documents: a.documentOf, Claim: a.claim, LoadPlan: a.planOf, SpillDir: spill, BeforeComplete: a.beforeComplete}
	if stepSlots != stepset.HotSlots {
		a.mem.IndexSlots = stepSlots // a test's: the jobs' keys written out as the steps are
	}
	a.submitted = spillwords.New(spill, submittedBudget)
	a.rebuilt.dir = spill
	return a
}

// beforeVisit, when set (tests), is called before each message is visited, with its
// sequence and how many expectations wait for their record.
var beforeVisit func(seq uint64, waiting int)

// visit audits one message, in stream order.
func (a *auditor) visit(r *Recorded) {
	if beforeVisit != nil {
		beforeVisit(r.Seq, a.waiting.len())
	}
	a.pos, a.visiting = r.Seq, r.Seq
	if r.OK() && r.Event.Rejudge != "" {
		// A rejudge's events (another model judging the stored gated artifacts) stand
		// next to the decisions without changing any: they are counted, not simulated.
		a.rep.Rejudges++
		a.tally(batchKey{r.Event.Tenant, r.Event.BatchID}).rejudges++
		return
	}
	switch {
	case r.History:
		a.rep.History++
	case r.OK():
		a.rep.Events++
		a.tally(batchKey{r.Event.Tenant, r.Event.BatchID}).events++
	default:
		a.rep.Events++
		if tenant, batch := peekEnvelope(r.Raw); batch != "" {
			a.tally(batchKey{tenant, batch}).events++
		} else {
			a.loose++
		}
	}
	if !r.OK() {
		if !r.History {
			a.undecodableMsg(r)
		}
		return
	}
	if !r.History {
		a.audited[batchKey{r.Event.Tenant, r.Event.BatchID}] = true
		if r.DeadLetter == "" {
			a.structure(r)
			a.chain(r)
			a.artifacts(r)
			a.planPages(r)
			a.callRecords(r)
			a.gates(r)
			a.output(r)
		}
	}
	a.simulate(r)
	if in, ok := personInput(r); ok && !r.History && r.DeadLetter == "" && a.refused[r.Event.ID] == "" {
		// A refused one decided nothing: Report.Refused lists it instead.
		a.rep.People = append(a.rep.People, in)
	}
}

// finish reports what only the end of the replay shows and returns the report.
func (a *auditor) finish() Report {
	a.visiting = math.MaxUint64
	a.releaseReviews()
	a.unsubmitted()
	a.revisions()
	a.unrecorded()
	a.unexplained()
	a.unresolved()
	a.outcomes()
	a.rebuilt.dropAll()
	a.rep.state = &auditState{mem: a.mem, audited: a.audited, batches: a.batches, steps: a.steps, types: a.types, store: a.store}
	sort.SliceStable(a.rep.Mismatches, func(i, j int) bool {
		x, y := a.rep.Mismatches[i], a.rep.Mismatches[j]
		if x.Batch != y.Batch {
			return x.Batch < y.Batch
		}
		return x.Seq < y.Seq
	})
	return a.rep
}

// undecodableMsg reports a message that is not a valid event, once per content.
func (a *auditor) undecodableMsg(r *Recorded) {
	sum, _ := hexSHA(r.SHA256)
	if a.undecodable[sum] {
		return // a dead letter of a message already reported
	}
	a.undecodable[sum] = true
	tenant, batch := peekEnvelope(r.Raw)
	detail := r.Err.Error()
	if r.DeadLetter != "" {
		detail = "dead letter of " + r.DeadLetter + ": " + detail
	}
	a.add(Mismatch{Kind: KindUndecodable, Tenant: tenant, Batch: batch, EventID: r.MsgID, Seq: r.Seq,
		Field: "subject " + r.Subject, Detail: detail})
}

// structure checks each audited event on its own: subject, deterministic id, message id,
// and duplicates of one logical step. A redrive attempt is a step of its own: its events
// repeat the first pass's types and iterations under ids of the attempt
// (events.AttemptStep), so both the id and the duplicate key include it.
func (a *auditor) structure(r *Recorded) {
	ev := r.Event
	if tenant, typ, err := events.ParseSubject(r.Subject); err != nil || tenant != ev.Tenant || typ != ev.Type {
		a.add(a.at(r, Mismatch{Kind: KindSubject, Field: "subject", Recorded: r.Subject,
			Derived: events.SubjectRoot + "." + ev.Tenant + "." + string(ev.Type), Detail: "the services refuse an event whose subject contradicts its envelope"}))
	}
	steps := idSteps(ev)
	step, ok := "", false
	for _, s := range steps {
		s = events.AttemptStep(s, ev.Attempt)
		if events.NewID(ev.Type, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, s) == ev.ID {
			step, ok = s, true
			break
		}
	}
	derived := ev.ID
	if !ok {
		step = events.AttemptStep(steps[0], ev.Attempt)
		derived = events.NewID(ev.Type, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, step)
		a.add(a.at(r, Mismatch{Kind: KindID, Field: "envelope.id", Recorded: ev.ID, Derived: derived,
			Detail: "not the deterministic id of its step"}))
		if _, seen := a.forged[ev.ID]; !seen {
			sum, _ := hexSHA(r.SHA256)
			a.forged[ev.ID] = forgedEntry{seq: r.Seq, sha: sum}
		}
	}
	if r.MsgID != "" && r.MsgID != ev.ID {
		a.add(a.at(r, Mismatch{Kind: KindID, Field: "Nats-Msg-Id", Recorded: r.MsgID, Derived: ev.ID,
			Detail: "published under another message id than its event id, which deduplication relies on"}))
	}
	k := keyOf(derived)
	sum, _ := hexSHA(r.SHA256)
	if prev, dup := a.steps.get(k); dup {
		prevID := hex.EncodeToString(k[:])
		if id, ok := a.forgedSteps[k]; ok {
			prevID = id
		}
		detail := fmt.Sprintf("same logical step as %s (seq %d)", prevID, prev.seq())
		if prevID == ev.ID {
			detail = fmt.Sprintf("event id recorded twice (first at seq %d)", prev.seq())
			if prev.sum != prefix(sum) {
				detail += " with different contents"
			}
		}
		a.add(a.at(r, Mismatch{Kind: KindDuplicate, Detail: detail}))
	} else {
		a.steps.put(k, newStepEntry(r.Seq, prefix(sum), a.typeCode(ev.Type)))
		if linkedTypes[ev.Type] {
			a.linked.put(k, sum)
		}
		if !ok {
			a.forgedSteps[k] = ev.ID
		}
	}
	a.resolve(ev.ID, r)
	if ev.Type == events.TypeGatesDone || ev.Type == events.TypeGatesFailed {
		g := keyOf(events.NewID("gates", ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, events.AttemptStep("", ev.Attempt)))
		if prev, ok := a.gated.gating(g); ok && prev.typ() != ev.Type {
			a.add(a.at(r, Mismatch{Kind: KindDuplicate, Detail: fmt.Sprintf("the gater decided this iteration twice: %s (seq %d) and %s",
				prev.typ(), prev.seq(), ev.Type)}))
		} else if !ok {
			a.gated.putGating(g, newGating(ev.Type, r.Seq))
		}
	}
	if p, ok := ev.Payload.(*events.IterationDecided); ok && p.Status == events.StatusAwaitingSpotcheck {
		bk := batchKey{ev.Tenant, ev.BatchID}
		switch first := a.awaiting[bk]; {
		case first == "":
			a.awaiting[bk] = ev.JobID
		case first != ev.JobID && first != "-":
			a.awaiting[bk] = "-" // reported once
			a.add(Mismatch{Kind: KindDuplicate, Tenant: bk.tenant, Batch: bk.batch, Job: ev.JobID, EventID: ev.ID,
				EventType: ev.Type, Seq: r.Seq, Field: "status",
				Detail: "a second sign-off waits for a person in one interactive batch (the first was " + first + ")"})
		}
	}
}

// idSteps are the steps an event of this type may be published under (see events.New
// calls across the services).
func idSteps(ev events.Event) []string {
	switch p := ev.Payload.(type) {
	case *events.ManifestEmitted:
		return []string{p.Step()}
	case *events.SpotcheckRecorded:
		if p.Approved {
			return []string{"approve"}
		}
		return []string{"reject-" + p.Dimension}
	case *events.ViewReset:
		return []string{events.ResetStep(p.Loop)}
	case *events.IterationDecided, *events.JobBlocked:
		return []string{"", "final", events.ReviewedStep(ev.CausationID)}
	case *events.ReviewRecorded:
		return []string{p.Step()}
	case *events.BatchCancelRequested:
		return []string{events.CancelStep(p.Page)}
	}
	return []string{""}
}

// keyOf is the step key of a deterministic id (a non-hex id, which no step has, is
// hashed so it still has a key of its own).
func keyOf(id string) stepKey {
	var k stepKey
	if b, err := hex.DecodeString(id); err == nil && len(b) == len(k) {
		copy(k[:], b)
		return k
	}
	sum := sha256Of([]byte(id))
	copy(k[:], sum)
	return k
}

func hexSHA(s string) ([32]byte, bool) {
	var out [32]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(out) {
		return out, false
	}
	copy(out[:], b)
	return out, true
}

// aggregatorInputs are the subjects the aggregator's consumer receives (besides dead
// letters).
var aggregatorInputs = func() map[events.Type]bool {
	m := map[events.Type]bool{}
	for _, t := range bus.ServiceInputs[bus.Aggregator] {
		m[t] = true
	}
	return m
}()

// isAggregatorInput reports whether the aggregator consumes r: a dead letter, or an event
// on one of its input subjects whose envelope matches the subject.
func isAggregatorInput(r *Recorded) bool {
	if r.DeadLetter != "" {
		return true
	}
	tenant, typ, err := events.ParseSubject(r.Subject)
	return err == nil && aggregatorInputs[typ] && tenant == r.Event.Tenant && typ == r.Event.Type
}

// simulate feeds one message to the rebuilt aggregator, in stream order, but for a job's
// cancel, which goes where the aggregator applied it (see cancelPlan).
func (a *auditor) simulate(r *Recorded) {
	c := a.ahead.cancels
	if early := c.before(r); early != nil {
		a.simulateOne(early)
	}
	if c.held(r) {
		return
	}
	a.simulateOne(r)
	if late := c.after(r); late != nil {
		a.simulateOne(late)
	}
}

// simulateOne feeds one recorded event to the rebuilt aggregator, holding back an event
// that overtook its job's submission as the aggregator's retries do.
func (a *auditor) simulateOne(r *Recorded) {
	if isRedriveRequest(r) {
		a.redriveRequest(r)
		return
	}
	if !isAggregatorInput(r) || a.placeReview(r) {
		return
	}
	tenant, batch, job := rulebook.JobOf(r.Event)
	key := jobKey{tenant, batch, job}
	if _, ok := r.Event.Payload.(*events.JobSubmitted); ok {
		a.applyInput(r)
		a.flush(key)
		return
	}
	if len(a.deferred[key]) > 0 && r.DeadLetter == "" {
		a.deferred[key] = append(a.deferred[key], kept(r)) // keep the job's order
		return
	}
	if !a.applyInput(r) {
		a.deferred[key] = append(a.deferred[key], kept(r))
	}
}

// kept is a copy of r to hold past its visit: without its bytes, which nothing later
// reads.
func kept(r *Recorded) *Recorded {
	c := *r
	c.Raw = nil
	return &c
}

// flush applies the events that overtook their job's submission, as the aggregator's
// retries do once the job is recorded.
func (a *auditor) flush(key jobKey) {
	pending := a.deferred[key]
	delete(a.deferred, key)
	for i, r := range pending {
		if !a.applyInput(r) {
			a.deferred[key] = pending[i:]
			return
		}
	}
}

// unsubmitted reports the inputs whose job's submission the replay never reached.
func (a *auditor) unsubmitted() {
	var keys []jobKey
	for k, rs := range a.deferred {
		if len(rs) > 0 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return a.deferred[keys[i]][0].Seq < a.deferred[keys[j]][0].Seq })
	for _, k := range keys {
		r := a.deferred[k][0]
		if r.History || !a.audited[batchKey{k.tenant, k.batch}] {
			continue
		}
		a.add(a.at(r, Mismatch{Kind: KindMissing, Job: k.job, Field: "job.submitted",
			Detail: fmt.Sprintf("%d event(s) for a job whose submission is not recorded", len(a.deferred[k]))}))
	}
}

// expect registers an aggregator output the rules derived: checked at once against a
// recorded event of its id that came too early, else when that event is recorded.
func (a *auditor) expect(e expectation) {
	id, typ := e.ev.ID, e.ev.Type
	if e.from.history || !a.audited[batchKey{e.ev.Tenant, e.ev.BatchID}] {
		return
	}
	if a.job != "" && e.ev.JobID != "" && e.ev.JobID != a.job {
		return // another job's, not replayed
	}
	if p, ok := a.early.take(keyOf(id), a.typeCode(typ), func(p []byte) bool { return parkedID(p) == id }); ok {
		a.check(e, a.unkeep(p), false)
		return
	}
	if s, ok := a.steps.get(keyOf(id)); ok && s.claimed() {
		a.check(e, nil, true)
		return
	}
	a.waiting.put(keyOf(id), a.typeCode(typ), e.from.seq, a.park(e))
}

// outputTypes are the events only the aggregator publishes.
var outputTypes = map[events.Type]bool{
	events.TypeIterationDecided: true, events.TypeJobBlocked: true, events.TypeSignoffRecorded: true,
	events.TypeManifestEmitted: true, events.TypeBatchCompleted: true, events.TypeJobCancelRequested: true,
}

// isOutput reports whether only the aggregator publishes r: an output type, a render
// request but a redrive's (`tribunal redrive` publishes those, isRedriveRequest), or a
// cancel's continuation to the next plan page (the client asks for page 0 only).
func isOutput(r *Recorded) bool {
	switch p := r.Event.Payload.(type) {
	case *events.RenderRequested:
		return !isRedriveRequest(r)
	case *events.BatchCancelRequested:
		return p.Page > 0
	}
	return outputTypes[r.Event.Type]
}

// output matches a recorded aggregator output with the expectation of its id, or keeps
// it until one comes.
func (a *auditor) output(r *Recorded) {
	if !isOutput(r) {
		return
	}
	id := r.Event.ID
	if p, ok := a.waiting.take(keyOf(id), a.typeCode(r.Event.Type), func(p []byte) bool { return parkedID(p) == id }); ok {
		a.check(a.unpark(p), r, false)
		return
	}
	a.early.put(keyOf(id), a.typeCode(r.Event.Type), r.Seq, a.keep(r))
}

// unrecorded reports the outputs the rules derived that the stream never recorded, by
// the sequence of what they derive from (ties in the order derived).
func (a *auditor) unrecorded() {
	err := a.waiting.each(func(p []byte) error {
		e := a.unpark(p)
		s, ok := a.steps.get(keyOf(e.ev.ID))
		a.check(e, nil, ok && s.claimed())
		return nil
	})
	a.waiting.close()
	a.waiting = nil
	if err != nil {
		// The lot's own files, written by it: a failed read is a broken machine.
		panic(err.Error())
	}
}

// check compares one expected aggregator output with its recorded event (nil: not
// recorded; collided: because an earlier event holds its id).
func (a *auditor) check(e expectation, rec *Recorded, collided bool) {
	ev := e.ev
	m := Mismatch{Tenant: ev.Tenant, Batch: ev.BatchID, Job: ev.JobID, EventID: ev.ID, EventType: ev.Type,
		FromID: e.from.id, FromType: e.from.typ, FromSeq: e.from.seq}
	if rec == nil {
		m.Kind, m.Field = KindMissing, string(ev.Type)
		m.Detail = fmt.Sprintf("the %s re-derived from the events is not recorded", e.what)
		if collided {
			m.Kind = KindCollision
			m.Detail = fmt.Sprintf("the %s was published under id %s, which an earlier event of the job already holds, so the stream dropped it as a duplicate", e.what, ev.ID)
		}
		a.add(m)
		return
	}
	k := keyOf(rec.Event.ID)
	if s, ok := a.steps.get(k); ok {
		s.claim()
		a.steps.put(k, s)
	}
	a.decided(batchKey{ev.Tenant, ev.BatchID})
	m.EventID, m.Seq = rec.Event.ID, rec.Seq
	if rec.Event.CausationID != ev.CausationID {
		a.add(with(m, KindMismatch, "envelope.cause", rec.Event.CausationID, ev.CausationID))
	}
	if rec.Event.CorrelationID != ev.CorrelationID {
		a.add(with(m, KindMismatch, "envelope.corr", rec.Event.CorrelationID, ev.CorrelationID))
	}
	diffs, err := diffMsgpack(rec.Event.Payload, ev.Payload, e.skip...)
	if err != nil {
		a.add(with(m, KindMismatch, "data", "", "").withDetail(err.Error()))
	}
	for _, d := range diffs {
		a.add(with(m, KindMismatch, d.path, d.recorded, d.derived))
	}
	if rec.Seq < e.from.seq {
		o := m
		o.Kind, o.Detail = KindOrder, fmt.Sprintf("recorded at seq %d, before the event it derives from (seq %d)", rec.Seq, e.from.seq)
		a.add(o)
	}
	if p, ok := ev.Payload.(*events.ManifestEmitted); ok && e.manifest != 0 {
		a.checkManifest(batchKey{ev.Tenant, ev.BatchID}, rec, e.from, p.Manifest, e.manifest)
	}
}

func with(m Mismatch, k MismatchKind, field, recorded, derived string) Mismatch {
	m.Kind, m.Field, m.Recorded, m.Derived = k, field, recorded, derived
	return m
}

func (m Mismatch) withDetail(d string) Mismatch {
	m.Detail = d
	return m
}

// unexplained reports the recorded aggregator outputs that no replayed input derives,
// naming the refused input one was derived from.
func (a *auditor) unexplained() {
	err := a.early.each(func(p []byte) error {
		r := a.unkeep(p)
		if a.planUnread[batchKey{r.Event.Tenant, r.Event.BatchID}] && isCancel(r) {
			return nil // the cancel's steps could not be followed (noted)
		}
		if a.earlierRevision(r) {
			return nil
		}
		m := Mismatch{Kind: KindUnexplained, Detail: "no replayed event derives it"}
		if typ, ok := a.refused[r.Event.CausationID]; ok {
			m.FromID, m.FromType = r.Event.CausationID, typ
			m.Detail = "derived from an input the aggregator's rules refuse"
		}
		a.add(a.at(r, m))
		return nil
	})
	a.early.close()
	a.early = nil
	if err != nil {
		panic(err.Error()) // the lot's own files: a failed read is a broken machine
	}
}

// outcomes reports the audited jobs the events leave without a final outcome, and the
// batch positions nothing was submitted for.
func (a *auditor) outcomes() {
	var bks []batchKey
	for bk := range a.audited {
		bks = append(bks, bk)
	}
	sort.Slice(bks, func(i, j int) bool { return bks[i].tenant+"/"+bks[i].batch < bks[j].tenant+"/"+bks[j].batch })
	type open struct {
		bk     batchKey
		seq    uint64
		job    string
		status events.Status
	}
	var opens []open
	for _, bk := range bks {
		b := a.batch(bk)
		sum := BatchSummary{Tenant: bk.tenant, Batch: bk.batch, Complete: b.completed > 0}
		// have are the indices below the batch's size a record holds: a bit each.
		have := make([]uint64, (max(b.size, 0)+63)/64)
		a.mem.EachPlace(bk.tenant, bk.batch, func(p rulebook.Place) {
			j := a.mem.JobAt(p)
			sum.Jobs++
			if j.Index >= 0 && j.Index < b.size {
				have[j.Index/64] |= 1 << (j.Index % 64)
			}
			if int(p) < a.submitted.Len() && !j.Final() {
				if seq := a.submitted.Get(int(p)); seq != 0 {
					opens = append(opens, open{bk, seq, j.ACID, j.Status})
				}
			}
		})
		a.rep.Jobs += sum.Jobs
		missing := 0
		for i := 0; i < b.size && a.job == ""; i++ {
			if have[i/64]&(1<<(i%64)) == 0 {
				missing++
				if missing <= maxIndexFindings {
					a.add(Mismatch{Kind: KindMissing, Tenant: bk.tenant, Batch: bk.batch, Field: "job.submitted",
						Detail: fmt.Sprintf("no job.submitted for index %d of %d", i, b.size)})
				}
			}
		}
		if b.completion != nil {
			sum.Digest, sum.Summary, sum.Attempt = b.completion.Digest, &b.completion.Summary, b.completion.Attempt
		}
		a.rep.Batches = append(a.rep.Batches, sum)
	}
	sort.SliceStable(opens, func(i, j int) bool { return opens[i].seq < opens[j].seq })
	for _, o := range opens {
		detail := "the recorded events leave the job " + string(o.status)
		if o.status == events.StatusAwaitingSpotcheck {
			detail += " (its sign-off waits for a person)"
		}
		a.add(Mismatch{Kind: KindMissing, Tenant: o.bk.tenant, Batch: o.bk.batch, Job: o.job,
			EventID:   events.NewID(events.TypeJobSubmitted, o.bk.tenant, o.bk.batch, o.job, 0, ""),
			EventType: events.TypeJobSubmitted, Seq: o.seq, Field: "outcome", Detail: detail})
	}
}

// at fills a mismatch's location from a recorded event.
func (a *auditor) at(r *Recorded, m Mismatch) Mismatch {
	ev := r.Event
	m.Tenant, m.Batch, m.EventID, m.EventType, m.Seq = ev.Tenant, ev.BatchID, ev.ID, ev.Type, r.Seq
	if m.Job == "" {
		m.Job = ev.JobID
	}
	return m
}

func (a *auditor) add(m Mismatch) { a.rep.Mismatches = append(a.rep.Mismatches, m) }

// unverified notes, once per batch and subject, what could not be re-derived.
func (a *auditor) unverified(r *Recorded, what, why string) {
	if r.History {
		return
	}
	ev := r.Event
	key := ev.Tenant + "/" + ev.BatchID + "/" + what + "/" + why
	if a.noted[key] {
		return
	}
	a.noted[key] = true
	a.rep.Unverified = append(a.rep.Unverified, Unverified{Tenant: ev.Tenant, Batch: ev.BatchID, Job: ev.JobID, What: what, Why: why})
	a.unverifiedAt = append(a.unverifiedAt, a.visiting)
}

func (a *auditor) blobContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(a.ctx, blobTimeout)
}

// gates re-runs what the gater decided deterministically: each kind's gates
// (kind.Kind.Gate) over the recorded render, reading the artifacts back from blob storage,
// compared with the recorded gates.done or gates.failed: the blind placement of the slots,
// the routing of a blocked render, and whether every artifact is still the one rendered.
// A looping kind's gates also read its view's state, which the stream does not hold.
func (a *auditor) gates(r *Recorded) {
	ev := r.Event
	key := passKey{jobKey{ev.Tenant, ev.BatchID, ev.JobID}, ev.Iteration, ev.Attempt}
	switch ev.Payload.(type) {
	case *events.RenderDone:
		if a.rendered[key] == nil {
			a.rendered[key] = kept(r)
		}
		return
	case *events.RenderUnchanged:
		delete(a.rendered, key)
		return
	case *events.GatesDone, *events.GatesFailed:
	default:
		return
	}
	rd := a.rendered[key]
	if rd == nil {
		return
	}
	delete(a.rendered, key)
	done := rd.Event.Payload.(*events.RenderDone)
	var derived events.Payload
	if done.Blocked != "" {
		derived = &events.GatesFailed{Kind: done.Spec.Kind, ACID: done.Spec.ACID, Blocked: done.Blocked}
	} else {
		k, err := registry.Lookup(done.Spec.Kind)
		if err != nil {
			return
		}
		if _, looping := k.(kind.Looping); looping {
			a.unverified(r, "the gates of a looping view", "they read the view's previous render and baseline, which the stream does not hold")
			return
		}
		if a.store == nil {
			a.note(batchKey{ev.Tenant, ev.BatchID}, "the gates and the artifacts they read", "the audit was given no blob store")
			return
		}
		ctx, cancel := a.blobContext()
		derived, err = stage.GateJob(ctx, k, &stage.GateEnv{Store: a.store}, rd.Event, done)
		cancel()
		if err != nil {
			a.unverified(r, "the gates", err.Error())
			return
		}
	}
	a.decided(batchKey{ev.Tenant, ev.BatchID})
	if derived.EventType() != ev.Type {
		a.add(a.from(a.at(r, with(Mismatch{}, KindMismatch, "type", string(ev.Type), string(derived.EventType())).
			withDetail("the gates re-run over the recorded render (and the artifacts as stored now) decide otherwise")), rd))
		return
	}
	diffs, err := diffMsgpack(ev.Payload, derived)
	if err != nil {
		a.add(a.from(a.at(r, Mismatch{Kind: KindMismatch, Field: "gates", Detail: err.Error()}), rd))
		return
	}
	for _, d := range diffs {
		a.add(a.from(a.at(r, with(Mismatch{}, KindMismatch, d.path, d.recorded, d.derived)), rd))
	}
}

// compareTo counts one re-derivation of a value of r from the event from and reports
// each differing field.
func (a *auditor) compareTo(r, from *Recorded, recorded, derived any, field string) {
	a.decided(batchKey{r.Event.Tenant, r.Event.BatchID})
	diffs, err := diffMsgpack(map[string]any{field: recorded}, map[string]any{field: derived})
	if err != nil {
		a.add(a.from(a.at(r, Mismatch{Kind: KindMismatch, Field: field, Detail: err.Error()}), from))
		return
	}
	for _, d := range diffs {
		a.add(a.from(a.at(r, with(Mismatch{}, KindMismatch, d.path, d.recorded, d.derived)), from))
	}
}

func (a *auditor) from(m Mismatch, r *Recorded) Mismatch {
	m.FromID, m.FromType, m.FromSeq = r.Event.ID, r.Event.Type, r.Seq
	return m
}

// errNoStore is why nothing is read back when the audit has no blob store.
var errNoStore = errors.New("no blob store given to the audit")
