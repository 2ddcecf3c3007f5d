package audit

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/dictzstd"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
	"github.com/tribunal-dev/tribunal/pkg/spillsort"
)

// errPlanUnread marks a cancel step whose plan page the audit could not read.
var errPlanUnread = errors.New("plan page unread")

// planOf reads a page of a batch's plan for the rules' cancel steps.
func (a *auditor) planOf(tenant string, ref events.Blob) (*records.PlanPage, error) {
	if a.store == nil {
		return nil, fmt.Errorf("%w: the audit was given no blob store", errPlanUnread)
	}
	ctx, cancel := a.blobContext()
	defer cancel()
	data, _, err := blob.ReadAll(ctx, a.store, blob.Ref{Tenant: tenant, SHA256: ref.SHA256})
	if err != nil {
		return nil, fmt.Errorf("%w: read plan page %s: %v", errPlanUnread, ref.SHA256, err)
	}
	return records.DecodePlanPage(data)
}

// isCancel reports whether r is one of a cancel's events.
func isCancel(r *Recorded) bool {
	switch r.Event.Payload.(type) {
	case *events.BatchCancelRequested, *events.JobCancelRequested:
		return true
	}
	return false
}

// isOutcome reports whether ev announces a job's final outcome.
func isOutcome(ev events.Event) bool {
	switch p := ev.Payload.(type) {
	case *events.JobBlocked:
		return true
	case *events.IterationDecided:
		return p.Final
	}
	return false
}

// A cancel races with the job's own events: the aggregator applies its inputs
// concurrently, so it may cancel a job before an earlier-stored verdict reaches it, or
// before its submission does, and apply a later-stored verdict first. The race leaves no
// event of its own, but its outcome is recorded: the job's final outcome names the input
// it was derived from (its causation), and every input the aggregator applied while the
// job was still open left outputs of its own (the submission's render request, a loop's
// decisions), while one applied after the job was final left none. So a cancel that
// decided its job goes right after the last of the job's inputs with outputs (before all
// of them when there are none: it overtook the submission too), and a cancel that found
// its job decided goes after the input that decided it. The cancel rule makes everything
// else irrelevant: it records the job from the cancel alone (rulebook.cancelled).
//
// Working that out needs the whole stream, which the audit never holds: Replay's first
// read gathers what it needs (cancelScan: a record of 33 bytes for each copy of an input,
// each output's cause and each final outcome, written out past a small buffer, and each
// job's first cancel) and concludes where each cancel goes (cancelPlan), before the
// second read replays anything. A cancel applied before the stream holds it is kept from
// the first read, compressed, until then.

// cancelScan is what the first read gathers for the cancels' places. It does not depend
// on the order it is handed the messages in (a replay from Since reads what precedes
// Since last).
//
// Which jobs are cancelled is known only once the read ends, so what a cancel may need is
// logged for every job: a map by input id of them held 60 MB at 2.5 minutes of a
// 1,000,000-AC audit, growing with the events read. The log is a temporary file (a buffer
// in memory, then appended); the conclusion reads it back only when the read met a
// cancel, sorting it by id through spillsort: the heap holds the buffer and the cancels.
type cancelScan struct {
	batch string
	seed  maphash.Seed
	log   *scanLog
	// cancels are each job's first cancel, by job.
	cancels map[uint64]*scannedCancel
	// saved is a codec of its own, not a field the plan would point into: a pointer
	// to a field keeps the whole scan alive through the second read.
	saved *dictzstd.Codec
}

// A scan record: its kind, an event id (the input's, or the cause an output or outcome
// names), the job's hash (inputs and outcomes) and a sequence, little-endian.
const (
	scanInput   byte = iota + 1 // a copy of an input (a dead letter repeats its original)
	scanCaused                  // an output naming its cause
	scanOutcome                 // a job's final outcome naming its cause
	scanRecord  = 1 + 16 + 8 + 8
)

func scanEntry(kind byte, id stepKey, job, seq uint64) [scanRecord]byte {
	var b [scanRecord]byte
	b[0] = kind
	copy(b[1:17], id[:])
	binary.LittleEndian.PutUint64(b[17:25], job)
	binary.LittleEndian.PutUint64(b[25:33], seq)
	return b
}

func readScanEntry(b []byte) (kind byte, id stepKey, job, seq uint64) {
	copy(id[:], b[1:17])
	return b[0], id, binary.LittleEndian.Uint64(b[17:25]), binary.LittleEndian.Uint64(b[25:33])
}

type scannedOutcome struct {
	seq   uint64
	cause stepKey
}

// scannedCancel is a job's first cancel, kept whole (compressed) until the first read
// ends, for the case it is applied before the stream holds it.
type scannedCancel struct {
	bk                             batchKey
	seq                            uint64
	id                             stepKey
	subject, msgID, reason, origin string
	stored                         time.Time
	raw                            []byte
}

func newCancelScan(batch string) *cancelScan {
	return &cancelScan{batch: batch, seed: maphash.MakeSeed(), log: &scanLog{dir: os.TempDir()},
		cancels: map[uint64]*scannedCancel{}, saved: &dictzstd.Codec{}}
}

func jobHash(seed maphash.Seed, tenant, batch, job string) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	h.WriteString(tenant)
	h.WriteByte(0)
	h.WriteString(batch)
	h.WriteByte(0)
	h.WriteString(job)
	return h.Sum64()
}

// add notes one decodable message of the first read (not history, not a rejudge's).
func (s *cancelScan) add(r *Recorded) {
	ev := r.Event
	if s.batch != "" && ev.BatchID != s.batch {
		return
	}
	if r.DeadLetter == "" && isOutput(r) && ev.CausationID != "" {
		cause := keyOf(ev.CausationID)
		s.log.add(scanEntry(scanCaused, cause, 0, 0))
		if isOutcome(ev) && ev.Attempt == 0 {
			s.log.add(scanEntry(scanOutcome, cause, jobHash(s.seed, ev.Tenant, ev.BatchID, ev.JobID), r.Seq))
		}
	}
	if !isAggregatorInput(r) || rulebook.BatchWide(ev) {
		return
	}
	tenant, batch, job := rulebook.JobOf(ev)
	k := jobHash(s.seed, tenant, batch, job)
	if _, ok := ev.Payload.(*events.JobCancelRequested); ok {
		if c := s.cancels[k]; c == nil || r.Seq < c.seq {
			s.cancels[k] = &scannedCancel{bk: batchKey{tenant, batch}, seq: r.Seq, id: keyOf(ev.ID), subject: r.Subject, msgID: r.MsgID, reason: r.Reason,
				origin: r.OriginalSubject, stored: r.Stored, raw: s.saved.Encode(r.Raw, true)}
		}
		return
	}
	s.log.add(scanEntry(scanInput, keyOf(ev.ID), k, r.Seq))
}

// scannedInput is one input of a job: its copies' first and last places and whether the
// aggregator published anything from it.
type scannedInput struct {
	job         uint64
	first, last uint64
	caused      bool
}

// inputs reads the log back for the cancelled jobs: each one's first outcome, and the
// inputs of those jobs (and those the outcomes name), by id.
func (s *cancelScan) inputs() (map[uint64]scannedOutcome, map[stepKey]scannedInput, error) {
	outcomes := map[uint64]scannedOutcome{}
	sorter := spillsort.New(nil)
	sorter.Dir = s.log.dir
	defer sorter.Close()
	err := s.log.each(func(b []byte) {
		kind, id, job, seq := readScanEntry(b)
		if kind != scanOutcome {
			sorter.Add(id[:], b)
			return
		}
		if s.cancels[job] == nil {
			return
		}
		if o, ok := outcomes[job]; !ok || seq < o.seq {
			outcomes[job] = scannedOutcome{seq: seq, cause: id}
		}
	})
	if err != nil {
		return nil, nil, err
	}
	named := map[stepKey]bool{}
	for _, o := range outcomes {
		named[o.cause] = true
	}
	inputs := map[stepKey]scannedInput{}
	var cur stepKey
	var in scannedInput
	var isInput, started bool
	keep := func() {
		if started && isInput && (s.cancels[in.job] != nil || named[cur]) {
			inputs[cur] = in
		}
	}
	err = sorter.Each(func(key, val []byte) error {
		kind, _, job, seq := readScanEntry(val)
		if k := stepKey(key); !started || k != cur {
			keep()
			cur, in, isInput, started = k, scannedInput{}, false, true
		}
		switch kind {
		case scanCaused:
			in.caused = true
		case scanInput:
			if !isInput {
				in.job, in.first, in.last, isInput = job, seq, seq, true
			}
			in.first, in.last = min(in.first, seq), max(in.last, seq)
		}
		return nil
	})
	keep()
	return outcomes, inputs, err
}

// cancelPlan is where the second read applies the cancels that do not go where the
// stream holds them.
type cancelPlan struct {
	seed maphash.Seed
	// first are the cancels that go before any other input of their job, by job; anchored
	// those that go right after an input, by its sequence; bySeq every placed cancel, by
	// its own sequence.
	first    map[uint64]*placedCancel
	anchored map[uint64]*placedCancel
	bySeq    map[uint64]*placedCancel
	codec    *dictzstd.Codec
}

// placedCancel is one cancel applied elsewhere than the stream holds it.
type placedCancel struct {
	// bk is the cancelled job's batch: the one audit the cancel's place concerns.
	bk     batchKey
	seq    uint64
	anchor uint64
	// early is the cancel as the first read kept it, for an application before the
	// second read reaches it; rec the cancel once the second read held it for a later
	// anchor.
	early   *scannedCancel
	rec     *Recorded
	applied bool
}

// conclude works out where each job's cancel goes and releases what the scan gathered.
func (s *cancelScan) conclude() *cancelPlan {
	p := &cancelPlan{seed: s.seed, first: map[uint64]*placedCancel{}, anchored: map[uint64]*placedCancel{},
		bySeq: map[uint64]*placedCancel{}, codec: s.saved}
	defer s.log.close()
	if len(s.cancels) == 0 {
		return p
	}
	outcomes, inputs, err := s.inputs()
	if err != nil {
		// The scan's own file, written by it: a failed read is a broken machine.
		panic("audit: the cancels' scan does not read back: " + err.Error())
	}
	// Each cancelled job's last input with outputs and its first input.
	type span struct{ lastCaused, firstInput uint64 }
	spans := map[uint64]span{}
	for _, in := range inputs {
		if s.cancels[in.job] == nil {
			continue
		}
		sp := spans[in.job]
		if in.caused {
			sp.lastCaused = max(sp.lastCaused, in.last)
		}
		if sp.firstInput == 0 || in.first < sp.firstInput {
			sp.firstInput = in.first
		}
		spans[in.job] = sp
	}
	for job, c := range s.cancels {
		out, ok := outcomes[job]
		if !ok {
			continue // no outcome recorded (the batch is still running): as stored
		}
		pc := &placedCancel{bk: c.bk, seq: c.seq}
		switch sp := spans[job]; {
		case out.cause == c.id && sp.lastCaused == 0:
			// The cancel overtook every input of the job.
			if sp.firstInput == 0 || sp.firstInput > c.seq {
				continue // none is stored before it: as stored
			}
			pc.early = c
			p.first[job] = pc
		case out.cause == c.id:
			pc.anchor = sp.lastCaused
		default:
			in, ok := inputs[out.cause]
			if !ok || in.job != job || in.last <= c.seq {
				continue // the job was decided before the cancel was stored: as stored
			}
			pc.anchor = in.last
		}
		if pc.anchor != 0 {
			if pc.anchor < c.seq {
				pc.early = c
			}
			p.anchored[pc.anchor] = pc
		}
		p.bySeq[c.seq] = pc
	}
	s.cancels = nil
	return p
}

// jobInput reports whether r is one of a job's inputs the job's cancel is placed among.
func jobInput(r *Recorded) bool {
	return !r.History && r.OK() && !isCancel(r) && isAggregatorInput(r) && !rulebook.BatchWide(r.Event)
}

// before returns the cancel to apply before r: the job's cancel overtook r.
func (p *cancelPlan) before(r *Recorded) *Recorded {
	if p == nil || len(p.first) == 0 || !jobInput(r) {
		return nil
	}
	tenant, batch, job := rulebook.JobOf(r.Event)
	k := jobHash(p.seed, tenant, batch, job)
	pc := p.first[k]
	if pc == nil {
		return nil
	}
	delete(p.first, k)
	if pc.applied {
		return nil
	}
	return p.take(pc)
}

// after returns the cancel to apply right after r.
func (p *cancelPlan) after(r *Recorded) *Recorded {
	if p == nil || len(p.anchored) == 0 || !jobInput(r) {
		return nil
	}
	pc := p.anchored[r.Seq]
	if pc == nil {
		return nil
	}
	delete(p.anchored, r.Seq)
	if pc.applied {
		return nil
	}
	return p.take(pc)
}

// held reports whether r is a cancel applied elsewhere: already, or after an input the
// stream holds later (r is then kept until that input is applied).
func (p *cancelPlan) held(r *Recorded) bool {
	if p == nil || len(p.bySeq) == 0 || r.History || !r.OK() {
		return false
	}
	if _, ok := r.Event.Payload.(*events.JobCancelRequested); !ok {
		return false
	}
	pc := p.bySeq[r.Seq]
	if pc == nil {
		return false
	}
	if pc.applied {
		delete(p.bySeq, r.Seq)
		return true
	}
	if pc.anchor > r.Seq {
		pc.rec = kept(r)
		return true
	}
	// Its place was never reached (an anchor outside the replay): where the stream holds it.
	pc.applied, pc.early = true, nil
	delete(p.bySeq, r.Seq)
	return false
}

// take marks a placed cancel applied and returns it, decoding it from what the first
// read kept when the second has not reached it yet.
func (p *cancelPlan) take(pc *placedCancel) *Recorded {
	pc.applied = true
	if pc.rec != nil {
		r := pc.rec
		pc.rec = nil
		delete(p.bySeq, pc.seq)
		return r
	}
	c := pc.early
	pc.early = nil
	if c == nil {
		return nil
	}
	raw, err := p.codec.Decode(c.raw)
	if err != nil {
		panic("audit: a cancel kept compressed does not decompress: " + err.Error())
	}
	r := NewRecorded(c.seq, c.subject, c.stored, raw, c.msgID, c.reason)
	r.OriginalSubject, r.Raw = c.origin, nil
	return &r
}

// done concludes the first read: the cancels' places.
func (h *ahead) done() {
	if h.scan != nil {
		h.cancels = h.scan.conclude()
		h.scan = nil
	}
	h.reviews.done()
}

// scanLog is an append-only log of scan records: a buffer of scanBuffer bytes in memory,
// then a temporary file (removed at once) it is appended to. A file that cannot be
// created or written keeps the log in memory from then on, with a warning: the scan
// still concludes right, only bigger.
type scanLog struct {
	dir      string
	buf      []byte
	f        *os.File
	end      int64
	inMemory bool
}

// scanBuffer is the log's buffer (tests lower it).
var scanBuffer = 1 << 20

func (l *scanLog) add(rec [scanRecord]byte) {
	l.buf = append(l.buf, rec[:]...)
	if len(l.buf) >= scanBuffer && !l.inMemory {
		l.flush()
	}
}

func (l *scanLog) flush() {
	if l.f == nil {
		f, err := os.CreateTemp(l.dir, "tribunal-cancels-*")
		if err != nil {
			slog.Warn("audit: the cancels' scan kept in memory: no log file", "dir", l.dir, "err", err)
			l.inMemory = true
			return
		}
		os.Remove(f.Name())
		l.f = f
		// Closed by close (conclude), or when the scan is collected unconcluded (an
		// audit given up).
		runtime.AddCleanup(l, func(f *os.File) { f.Close() }, f)
	}
	if _, err := l.f.WriteAt(l.buf, l.end); err != nil {
		slog.Warn("audit: the cancels' scan kept in memory from now on: the log file failed", "file", l.f.Name(), "err", err)
		l.inMemory = true
		return
	}
	l.end += int64(len(l.buf))
	l.buf = l.buf[:0]
}

// each calls fn with every record, in the order added; rec is valid only during the call.
func (l *scanLog) each(fn func(rec []byte)) error {
	if l.f != nil {
		r := bufio.NewReaderSize(io.NewSectionReader(l.f, 0, l.end), 64<<10)
		var rec [scanRecord]byte
		for range l.end / scanRecord {
			if _, err := io.ReadFull(r, rec[:]); err != nil {
				return fmt.Errorf("read %s: %w", l.f.Name(), err)
			}
			fn(rec[:])
		}
	}
	for i := 0; i < len(l.buf); i += scanRecord {
		fn(l.buf[i : i+scanRecord])
	}
	return nil
}

func (l *scanLog) close() {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	l.buf = nil
}
