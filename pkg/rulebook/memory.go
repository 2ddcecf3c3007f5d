package rulebook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"iter"
	"math"
	"slices"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/dictzstd"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/spillsort"
	"github.com/tribunal-dev/tribunal/pkg/spillwords"
)

// Memory runs the rules over events in memory, the way the aggregator service runs them
// over its buckets: the same Runner (load, Apply, store, the claim's hold and its
// release) over a store in memory, the same completion counting, the same redrive
// bookkeeping. The audit replays a stream through it and compares what it would publish
// with what the stream holds; tests drive it to write honest streams.
//
// Job records are kept encoded (their key-value JSON, compressed, see pkg/dictzstd) and
// decoded when a rule or a reader needs one, so replaying a 100,000-job batch holds about
// half a kilobyte per job rather than 100,000 decoded records; a completion folds its
// jobs (Fold) when it happens. With SpillDir, a final record (which the rules change
// again only on a redrive or a person's review) leaves memory for a file with its key,
// and the records in flight are held in a log of a fixed budget (heldLog, 32 MiB), the
// least recently written going to the file when it is full and read back from it by
// offset when a rule touches them again. What is held per job is then about 1.5
// bytes of its key's entry in jobIndex (a pkg/stepset set, its newest entries in memory,
// the rest in the spill dir) and a bit for its final index: where the file or the log
// has its record and its index and place in its batch's order are words, in
// pkg/spillwords arrays that keep the newest pages in memory (atBudget, orderBudget) and
// the rest in the spill dir. No key string is held, so neither the heap nor the
// collector's work grows with the jobs replayed, nor with the jobs in flight, but for
// those words.
type Memory struct {
	// Now is the aggregator's clock (time.Now when nil).
	Now func() time.Time
	// Documents reads a blob a looping job's state is read with
	// (kind.Looping.StateDocuments). Without it such a job's loop steps fail.
	Documents func(tenant string, b events.Blob) ([]byte, error)
	// Claim decides which job of a batch holds its claim (kind.Looping.Claiming), given
	// the job asking; nil gives it to the first job that asks, as the aggregator's create
	// does.
	Claim func(tenant, batch, job string) string
	// LoadPlan reads a page of a batch's plan (BatchResult.NeedPage). Without it a
	// cancel's steps fail.
	LoadPlan func(tenant string, page events.Blob) (*records.PlanPage, error)
	// SpillDir, when set, is where final job records are kept (compressed, as in
	// memory) in a temporary file of their own, removed at once (on systems that can
	// remove an open file) or when the Memory is collected, and the records in flight
	// past the log's budget: the audit's heap then holds neither every job it has read
	// nor every job in flight, but a few words a job and the budget. The file holds
	// every version written to it (about 0.6 KB a job's final record, as much again
	// for each time a job in flight was written out). "" holds every record in memory.
	// A file that cannot be created or written keeps the records in memory.
	SpillDir string
	// BeforeComplete, when set, is called when a job's outcome completes its batch (or
	// the redrive of attempt), before the batch's jobs are folded: the audit applies
	// there the people's answers the aggregator's completion folded in though the stream
	// holds them after the input that completed it (events.BatchCompleted.ReviewSeqs).
	BeforeComplete func(tenant, batch string, attempt int)
	// IndexSlots is how many entries of the key index (jobs' keys to their places) are
	// kept in memory, the rest written to SpillDir: 0 is 131,072 (4 MiB). The audit's
	// tests lower it with its step tables', to make a small batch's index span runs.
	IndexSlots int

	// index finds a job's place (its number, from 0, in the order jobs were first
	// stored) by key; at is where each place's record is: spilled (spillAt.pack), in
	// the log of records in flight (heldWord) or, for 0, held, with its key, in memory
	// (without a spill file, or one that failed, or too large a record). A record is in
	// one of the three.
	index   jobIndex
	at      *spillwords.Words
	held    map[uint32]heldJob
	spilled int
	spill   *spillFile
	log     heldLog
	// evicted counts the records in flight the log wrote out.
	evicted int
	// budget is the log's, defaultHeldBudget unless a test sets it; wordBudget the
	// places' words' in memory, atBudget unless a test sets it.
	budget, wordBudget int
	codec              dictzstd.Codec
	states             map[string][]byte
	batches            map[string]*memBatch
	claims             map[string]string
	runner             Runner
}

// atBudget is the most bytes of the places' words (Memory.at) in memory: a rule touches
// the jobs in flight, recent places mostly, and 4 MiB holds half a million of them.
const atBudget = 4 << 20

type memBatch struct {
	header records.Batch
	// order are the batch's jobs in the order they were recorded, a memJob a word
	// (written out past orderBudget, in the Memory's SpillDir: spillDir); wide the
	// indices of those whose index does not fit in memJob, by place.
	order    *spillwords.Words
	spillDir string
	wide     map[uint32]int
	final    finals
	// inRange counts the final indices within [0, counted), counted the size they were
	// counted against: a job's outcome then counts in constant time.
	inRange, counted int
	// completed is the attempt of the last completion, -1 for none.
	completed int
}

// memJob is a job of a batch's order: its index in the batch (what the completion's fold
// sorts by) and its place, which names its record and key. An index outside an int32
// (only a stream that disagrees with itself has one) is wideIndex, and the batch's wide
// holds it.
type memJob struct {
	index int32
	place uint32
}

const wideIndex = math.MinInt32

// orderBudget is the most bytes of a batch's order in memory: its jobs are appended in
// the order recorded and read back in that order, so the pages resident are the last
// and those a reading walks through.
const orderBudget = 256 << 10

// add appends the job at place p, of index i, to the batch's order.
func (b *memBatch) add(i int, p uint32) {
	o := memJob{index: int32(i), place: p}
	if i <= wideIndex || i > math.MaxInt32 {
		if b.wide == nil {
			b.wide = map[uint32]int{}
		}
		o.index, b.wide[p] = wideIndex, i
	}
	if b.order == nil {
		b.order = spillwords.New(b.spillDir, orderBudget)
	}
	b.order.Append(uint64(uint32(o.index))<<32 | uint64(o.place))
}

// jobs is how many jobs the batch's order holds.
func (b *memBatch) jobs() int {
	if b.order == nil {
		return 0
	}
	return b.order.Len()
}

// job is the k-th job of the batch's order.
func (b *memBatch) job(k int) memJob {
	w := b.order.Get(k)
	return memJob{index: int32(uint32(w >> 32)), place: uint32(w)}
}

// each is the batch's order, in the order recorded.
func (b *memBatch) each() iter.Seq[memJob] {
	return func(yield func(memJob) bool) {
		for k := range b.jobs() {
			if !yield(b.job(k)) {
				return
			}
		}
	}
}

func (b *memBatch) indexOf(o memJob) int {
	if o.index == wideIndex {
		return b.wide[o.place]
	}
	return int(o.index)
}

// byIndex is the batch's order sorted by index, stably: the order itself when it is
// sorted already (the jobs recorded in batch order), so that a completion copies nothing,
// else sorted through a spillsort.Sorter in the spill dir (in memory without one).
func (b *memBatch) byIndex() iter.Seq[memJob] {
	sorted := true
	for k := 1; k < b.jobs() && sorted; k++ {
		sorted = b.indexOf(b.job(k-1)) <= b.indexOf(b.job(k))
	}
	if sorted {
		return b.each()
	}
	if b.spillDir == "" {
		order := slices.Collect(b.each())
		slices.SortStableFunc(order, func(x, y memJob) int { return cmp.Compare(b.indexOf(x), b.indexOf(y)) })
		return slices.Values(order)
	}
	return func(yield func(memJob) bool) {
		s := spillsort.New(nil)
		s.Dir = b.spillDir
		defer s.Close()
		var key []byte
		for o := range b.each() {
			key = spillsort.IntKey(key[:0], b.indexOf(o))
			s.Add(key, binary.BigEndian.AppendUint32(nil, o.place))
		}
		stop := errors.New("stop")
		err := s.Each(func(key, val []byte) error {
			// The index of a wide job is in b.wide, by its place.
			i := int(binary.BigEndian.Uint64(key) ^ (1 << 63))
			o := memJob{index: int32(i), place: binary.BigEndian.Uint32(val)}
			if i <= wideIndex || i > math.MaxInt32 {
				o.index = wideIndex
			}
			if !yield(o) {
				return stop
			}
			return nil
		})
		if err != nil && err != stop {
			// Its own sort's files, written by it: a failed read is a broken machine.
			panic("rulebook: the batch order's sort does not read back: " + err.Error())
		}
	}
}

// heldJob is a record held in memory: its key and its encoded bytes.
type heldJob struct {
	key string
	enc []byte
}

// Completion is a batch's completion as the completing aggregator saw it: the job whose
// outcome completed it, the redrive attempt, and its jobs folded as they were at that
// moment (a later redrive changes the records, never what this completion was built
// from).
type Completion struct {
	Tenant, Batch string
	By            *records.Job
	Attempt       int
	fold          *Fold
}

// Fold is the completion's jobs, folded in batch order when the batch completed.
func (c *Completion) Fold() *Fold { return c.fold }

func (m *Memory) init() {
	if m.held == nil {
		m.runner = Runner{Store: memStore{m}, Now: m.now}
		m.held, m.states, m.batches, m.claims = map[uint32]heldJob{}, map[string][]byte{}, map[string]*memBatch{}, map[string]string{}
		m.index.init(m.SpillDir, cmp.Or(m.IndexSlots, keySlots))
		m.at = spillwords.New(m.SpillDir, cmp.Or(m.wordBudget, atBudget))
		if m.SpillDir != "" {
			m.spill = newSpillFile(m, m.SpillDir)
		}
		if m.budget == 0 {
			m.budget = defaultHeldBudget
		}
		m.log.segCap = m.budget / heldSegments
	}
}

func (m *Memory) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now().UTC()
}

// decode returns the record stored under key, nil for none.
func (m *Memory) decode(key string) *records.Job {
	data := m.jobJSON(key)
	if data == nil {
		return nil
	}
	return decodeJob(data)
}

// decodeAt returns the record at place p.
func (m *Memory) decodeAt(p uint32) *records.Job {
	_, enc := m.record(p)
	return decodeJob(m.decompress(enc))
}

// decodeJob decodes a record Memory encoded itself, so it always decodes.
func decodeJob(data []byte) *records.Job {
	j, err := records.DecodeJob(data)
	if err != nil {
		panic("rulebook: a job record Memory stored does not decode: " + err.Error())
	}
	return j
}

func (m *Memory) jobJSON(key string) []byte {
	_, enc, ok := m.find(key)
	if !ok {
		return nil
	}
	return m.decompress(enc)
}

func (m *Memory) decompress(enc []byte) []byte {
	data, err := m.codec.Decode(enc)
	if err != nil {
		panic("rulebook: a job record Memory stored does not decompress: " + err.Error())
	}
	if len(data) > 0 && &data[len(data)-1] == &enc[len(enc)-1] {
		// A record stored before the codec had its dictionary decodes to its own bytes,
		// which the log overwrites once their segment is reused.
		data = bytes.Clone(data)
	}
	return data
}

// record returns the key and encoded record at place p, read back from the spill file
// when it is there. A record in the log is its bytes there: the caller uses them before
// it stores anything.
func (m *Memory) record(p uint32) (key, enc []byte) {
	switch at := m.at.Get(int(p)); {
	case isHeld(at):
		return m.log.read(at)
	case at != 0:
		return m.spill.read(unpackSpillAt(at))
	}
	h := m.held[p]
	return []byte(h.key), h.enc
}

// find returns the place of the record stored under key and its encoded bytes. The index
// keeps a part of the key's hash only, so each place it offers is checked against the
// key its record was stored under: another job's record is never taken for this one.
func (m *Memory) find(key string) (place uint32, enc []byte, ok bool) {
	for p := range m.index.candidates(key) {
		if k, e := m.record(p); string(k) == key {
			return p, e, true
		}
	}
	return 0, nil, false
}

// store stores j at its place (a new one when it has none yet) and returns the place.
func (m *Memory) store(j *records.Job) uint32 {
	key := j.Key()
	p, _, ok := m.find(key)
	if !ok {
		p = m.newPlace(key)
	}
	m.put(p, key, j)
	return p
}

// newPlace gives key, which has none, the next place.
func (m *Memory) newPlace(key string) uint32 {
	if m.at.Len() >= maxPlaces {
		panic("rulebook: Memory holds as many job records as it can number")
	}
	p := uint32(m.at.Len())
	m.at.Append(0)
	m.index.add(key, p)
	return p
}

func (m *Memory) put(p uint32, key string, j *records.Job) {
	data, err := json.Marshal(j)
	if err != nil {
		panic("rulebook: a job record that does not encode: " + err.Error())
	}
	// A final record is a typical one: the first becomes the dictionary.
	enc := m.codec.Encode(data, j.Final())
	if m.spill != nil {
		if j.Final() {
			if at, ok := m.spill.write(key, enc); ok {
				m.setAt(p, at.pack())
				return
			}
		} else if w, ok := m.log.add(p, key, enc, m.evict); ok {
			m.setAt(p, w)
			return
		}
	}
	m.hold(p, key, enc)
}

// setAt moves place p's record to w, a word of the spill file or the log.
func (m *Memory) setAt(p uint32, w uint64) {
	switch old := m.at.Get(int(p)); {
	case old == 0:
		delete(m.held, p)
	case isHeld(old):
		m.log.drop(old)
	default:
		m.spilled--
	}
	if !isHeld(w) {
		m.spilled++
	}
	m.at.Set(int(p), w)
}

// hold keeps place p's record in memory with its key.
func (m *Memory) hold(p uint32, key string, enc []byte) {
	switch old := m.at.Get(int(p)); {
	case isHeld(old):
		m.log.drop(old)
	case old != 0:
		m.spilled--
	}
	m.at.Set(int(p), 0)
	m.held[p] = heldJob{key: key, enc: enc}
}

// evict empties the log's segment seg before it is reused: each record whose live
// version is there goes to the spill file (appended as the log holds it, up to
// evictBatch bytes of them in one write), or, when the file fails, into memory.
func (m *Memory) evict(seg int) {
	s := m.spill
	m.log.each(seg, func(p uint32, w uint64, entry []byte) {
		if m.at.Get(int(p)) != w {
			return // stored over since, or final
		}
		if len(s.batch)+len(entry) > evictBatch {
			m.flushEvicted()
		}
		s.batch = append(s.batch, entry...)
		s.batched = append(s.batched, batchedEntry{place: p, n: len(entry)})
	})
	m.flushEvicted()
}

// evictBatch is the most bytes of records written out in one write: a few hundred
// records, where one write each cost a system call each. A test makes it smaller.
var evictBatch = 256 << 10

// flushEvicted writes the records evict batched and moves their places to the file.
func (m *Memory) flushEvicted() {
	s := m.spill
	if len(s.batch) == 0 {
		return
	}
	at, ok := s.writeEntry(s.batch)
	rel := 0
	for _, e := range s.batched {
		if ok {
			m.setAt(e.place, spillAt{off: at.off + int64(rel), n: e.n}.pack())
			m.evicted++
		} else {
			key, enc, _ := splitEntry(s.batch[rel : rel+e.n])
			m.hold(e.place, string(key), bytes.Clone(enc))
		}
		rel += e.n
	}
	s.batch, s.batched = s.batch[:0], s.batched[:0]
}

// Job returns a job's record, nil when it is not recorded.
func (m *Memory) Job(tenant, batch, job string) *records.Job {
	m.init()
	return m.decode(records.JobKey(tenant, batch, job))
}

// JobJSON returns a job's record in its key-value form (the JSON the aggregator stores),
// nil when it is not recorded.
func (m *Memory) JobJSON(tenant, batch, job string) []byte {
	m.init()
	return m.jobJSON(records.JobKey(tenant, batch, job))
}

// Jobs returns a batch's job records in the order they were recorded.
func (m *Memory) Jobs(tenant, batch string) []*records.Job {
	var out []*records.Job
	m.EachJob(tenant, batch, func(j *records.Job) { out = append(out, j) })
	return out
}

// EachJob calls fn with each of a batch's job records in the order they were recorded,
// decoding one at a time.
func (m *Memory) EachJob(tenant, batch string, fn func(*records.Job)) {
	m.init()
	b := m.batches[records.BatchKey(tenant, batch)]
	if b == nil {
		return
	}
	for o := range b.each() {
		fn(m.decodeAt(o.place))
	}
}

// Place is a job's place in a Memory: a number no other job recorded in it has, below
// Places. A reader that keeps a set of a Memory's jobs (the audit's key-value comparison
// marks each job whose record it met) keeps it as bits over these, not as keys.
type Place uint32

// Places is how many places the Memory's jobs have taken, each below this.
func (m *Memory) Places() int {
	m.init()
	return m.at.Len()
}

// JobPlace is JobJSON and the place of the job's record; ok is false, with nil, when the
// job is not recorded.
func (m *Memory) JobPlace(tenant, batch, job string) (data []byte, p Place, ok bool) {
	m.init()
	place, enc, ok := m.find(records.JobKey(tenant, batch, job))
	if !ok {
		return nil, 0, false
	}
	return m.decompress(enc), Place(place), true
}

// PlaceOf is the place of a job's record, reading no record when the job is in flight;
// ok is false when the job is not recorded.
func (m *Memory) PlaceOf(tenant, batch, job string) (p Place, ok bool) {
	m.init()
	place, _, ok := m.find(records.JobKey(tenant, batch, job))
	return Place(place), ok
}

// EachPlace calls fn with the place of each of a batch's jobs in the order they were
// recorded, reading no record.
func (m *Memory) EachPlace(tenant, batch string, fn func(Place)) {
	m.init()
	b := m.batches[records.BatchKey(tenant, batch)]
	if b == nil {
		return
	}
	for o := range b.each() {
		fn(Place(o.place))
	}
}

// JobAt returns the record at place p (EachPlace, JobPlace).
func (m *Memory) JobAt(p Place) *records.Job {
	m.init()
	return m.decodeAt(uint32(p))
}

// Header returns a batch's header, nil for an unknown batch.
func (m *Memory) Header(tenant, batch string) *records.Batch {
	m.init()
	if b := m.batches[records.BatchKey(tenant, batch)]; b != nil {
		h := b.header
		return &h
	}
	return nil
}

// State returns a looping job's own state as the state bucket would hold it, stored
// under key (kind.Looping.StateKey); nil for a state never stored.
func (m *Memory) State(key string) []byte {
	m.init()
	return m.states[key]
}

// StartRedrive records a redrive of jobs as attempt, as `tribunal redrive` records it on
// the batch header before it sends the jobs through again.
func (m *Memory) StartRedrive(tenant, batch string, attempt int, jobs []string) {
	m.init()
	b := m.batch(tenant, batch, 0)
	b.header.Redrive = &records.Redrive{Attempt: attempt, Pending: append([]string(nil), jobs...)}
}

func (m *Memory) batch(tenant, batch string, size int) *memBatch {
	key := records.BatchKey(tenant, batch)
	b := m.batches[key]
	if b == nil {
		b = &memBatch{header: records.Batch{Tenant: tenant, Batch: batch, Size: size}, completed: -1, spillDir: m.SpillDir}
		m.batches[key] = b
	}
	if b.header.Size == 0 {
		b.header.Size = size
	}
	return b
}

// Apply applies one input with the aggregator's runner (Runner) over the records held in
// memory, and reports what it did.
func (m *Memory) Apply(in Input) (Applied, error) {
	m.init()
	return m.runner.Apply(context.Background(), in)
}

// memStore is the runner's store in memory (Store). One runner applies one input at a
// time, so no write ever conflicts.
type memStore struct{ m *Memory }

func (s memStore) Job(_ context.Context, tenant, batch, job string) (*records.Job, uint64, error) {
	j := s.m.decode(records.JobKey(tenant, batch, job))
	if j == nil {
		return nil, 0, nil
	}
	return j, 1, nil
}

// CreateJob records the job in its batch's order; the batch's header takes the source
// and creation time of its first recorded job that has a source.
func (s memStore) CreateJob(_ context.Context, j *records.Job, header *records.Batch) (bool, error) {
	m := s.m
	key := j.Key()
	if _, _, ok := m.find(key); ok {
		return false, nil
	}
	b := m.batch(j.Tenant, j.Batch, j.BatchSize)
	if header != nil && b.header.Source == "" {
		b.header.Source, b.header.CreatedAt = header.Source, header.CreatedAt
	}
	p := m.newPlace(key)
	b.add(j.Index, p)
	m.put(p, key, j)
	return true, nil
}

func (s memStore) PutJob(_ context.Context, j *records.Job, _ uint64) (bool, error) {
	s.m.store(j)
	return true, nil
}

func (s memStore) State(_ context.Context, key string) ([]byte, uint64, error) {
	data, ok := s.m.states[key]
	if !ok {
		return nil, 0, nil
	}
	return data, 1, nil
}

func (s memStore) PutState(_ context.Context, key string, data []byte, _ uint64) (bool, error) {
	s.m.states[key] = data
	return true, nil
}

func (s memStore) Document(_ context.Context, tenant string, b events.Blob) ([]byte, error) {
	if s.m.Documents == nil {
		return nil, errors.New("rulebook: a looping job and no document reader")
	}
	return s.m.Documents(tenant, b)
}

func (s memStore) Claim(_ context.Context, tenant, batch string) (string, error) {
	return s.m.claims[records.BatchKey(tenant, batch)], nil
}

// TakeClaim gives the claim to the job Memory.Claim names, else to the job asking.
func (s memStore) TakeClaim(_ context.Context, tenant, batch, job string) (string, error) {
	m := s.m
	key := records.BatchKey(tenant, batch)
	if m.claims[key] == "" {
		holder := job
		if m.Claim != nil {
			holder = m.Claim(tenant, batch, job)
		}
		m.claims[key] = holder
	}
	return m.claims[key], nil
}

func (s memStore) UpdateHeader(_ context.Context, tenant, batch string, change func(*records.Batch) *records.Batch) error {
	m := s.m
	var cur *records.Batch
	if b := m.batches[records.BatchKey(tenant, batch)]; b != nil {
		h := b.header
		cur = &h
	}
	if next := change(cur); next != nil {
		m.batch(tenant, batch, next.Size).header = *next
	}
	return nil
}

func (s memStore) PlanPage(_ context.Context, tenant string, page events.Blob) (*records.PlanPage, error) {
	if s.m.LoadPlan == nil {
		return nil, errors.New("rulebook: a cancel and no plan loader")
	}
	return s.m.LoadPlan(tenant, page)
}

func (s memStore) Header(_ context.Context, tenant, batch string) (*records.Batch, uint64, error) {
	if h := s.m.Header(tenant, batch); h != nil {
		return h, 1, nil
	}
	return nil, 0, nil
}

func (s memStore) PutHeader(_ context.Context, h *records.Batch, _ uint64) (bool, error) {
	s.m.batch(h.Tenant, h.Batch, h.Size).header = *h
	return true, nil
}

func (s memStore) EachJob(_ context.Context, tenant, batch string, fn func(*records.Job) error) error {
	b := s.m.batches[records.BatchKey(tenant, batch)]
	if b == nil {
		return nil
	}
	for o := range b.each() {
		if err := fn(s.m.decodeAt(o.place)); err != nil {
			return err
		}
	}
	return nil
}

// PutCompleted keeps nothing: Memory's readers compare completions, they do not read
// their manifests back.
func (s memStore) PutCompleted(context.Context, string, string, *Completed) error { return nil }

func (s memStore) Done(_ context.Context, j *records.Job) ([]events.Event, *Completion, error) {
	return nil, s.m.done(j), nil
}

// done counts a final job toward its batch's completion (or its redrive's), as the
// aggregator's shards and header do.
func (m *Memory) done(j *records.Job) *Completion {
	b := m.batch(j.Tenant, j.Batch, j.BatchSize)
	if j.Attempt > 0 {
		next, last := RedriveDone(&b.header, j.ACID, j.Attempt)
		if next != nil {
			b.header = *next
		}
		if !last || b.completed >= j.Attempt {
			return nil
		}
		m.beforeComplete(j, j.Attempt)
		return m.complete(b, j, j.Attempt)
	}
	if b.final.add(j.Index, b.jobs()) && j.Index >= 0 && j.Index < b.counted {
		b.inRange++
	}
	if b.counted != b.header.Size {
		// The size became known (or changed): count again, once, rather than at every job.
		b.counted = b.header.Size
		b.inRange = b.final.below(b.counted)
	}
	if b.inRange < b.header.Size || b.completed >= 0 {
		return nil
	}
	m.beforeComplete(j, 0)
	return m.complete(b, j, 0)
}

func (m *Memory) beforeComplete(j *records.Job, attempt int) {
	if m.BeforeComplete != nil {
		m.BeforeComplete(j.Tenant, j.Batch, attempt)
	}
}

// complete folds the batch's jobs as they are now, in batch order, one record decoded at a
// time.
func (m *Memory) complete(b *memBatch, by *records.Job, attempt int) *Completion {
	b.completed = attempt
	c := &Completion{Tenant: b.header.Tenant, Batch: b.header.Batch, By: by.Clone(), Attempt: attempt, fold: NewFold(b.header.Tenant, b.header.Batch)}
	for o := range b.byIndex() {
		c.fold.Add(m.decodeAt(o.place))
	}
	b.header.Completion = &records.Completion{By: by.ACID, Attempt: attempt}
	return c
}
