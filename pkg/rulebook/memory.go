package rulebook

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/dictzstd"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
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
// again only on a redrive or a person's review) leaves memory for a file, and what is
// held per job is its key and where the file has it.
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
	// remove an open file) or when the Memory is collected: the audit's heap then grows
	// with the jobs in flight, not with every job it has read. "" holds every record in
	// memory. A file that cannot be created or written keeps the records in memory.
	SpillDir string
	// BeforeComplete, when set, is called when a job's outcome completes its batch (or
	// the redrive of attempt), before the batch's jobs are folded: the audit applies
	// there the people's answers the aggregator's completion folded in though the stream
	// holds them after the input that completed it (events.BatchCompleted.ReviewSeqs).
	BeforeComplete func(tenant, batch string, attempt int)

	// jobs are the records held in memory, spilled those written to the spill file;
	// a record is in one of the two.
	jobs    map[string][]byte
	spilled map[string]spillAt
	spill   *spillFile
	codec   dictzstd.Codec
	states  map[string][]byte
	batches map[string]*memBatch
	claims  map[string]string
	runner  Runner
}

type memBatch struct {
	header records.Batch
	// order are the batch's jobs in the order they were recorded.
	order []memJob
	final map[int]bool
	// inRange counts the final indices within [0, counted), counted the size they were
	// counted against: a job's outcome then counts in constant time.
	inRange, counted int
	// completed is the attempt of the last completion, -1 for none.
	completed int
}

type memJob struct {
	key   string
	index int
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
	if m.jobs == nil {
		m.runner = Runner{Store: memStore{m}, Now: m.now}
		m.jobs, m.states, m.batches, m.claims = map[string][]byte{}, map[string][]byte{}, map[string]*memBatch{}, map[string]string{}
		m.spilled = map[string]spillAt{}
		if m.SpillDir != "" {
			m.spill = newSpillFile(m, m.SpillDir)
		}
	}
}

func (m *Memory) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now().UTC()
}

// decode returns the record stored under key, nil for none. Memory encoded it itself, so
// it always decodes.
func (m *Memory) decode(key string) *records.Job {
	data := m.jobJSON(key)
	if data == nil {
		return nil
	}
	j, err := records.DecodeJob(data)
	if err != nil {
		panic("rulebook: a job record Memory stored does not decode: " + err.Error())
	}
	return j
}

func (m *Memory) jobJSON(key string) []byte {
	enc, ok := m.jobs[key]
	if !ok {
		at, spilled := m.spilled[key]
		if !spilled {
			return nil
		}
		enc = m.spill.read(at)
	}
	data, err := m.codec.Decode(enc)
	if err != nil {
		panic("rulebook: a job record Memory stored does not decompress: " + err.Error())
	}
	return data
}

func (m *Memory) store(j *records.Job) {
	data, err := json.Marshal(j)
	if err != nil {
		panic("rulebook: a job record that does not encode: " + err.Error())
	}
	// A final record is a typical one: the first becomes the dictionary.
	enc := m.codec.Encode(data, j.Final())
	key := j.Key()
	if j.Final() && m.spill != nil {
		if at, ok := m.spill.write(enc); ok {
			delete(m.jobs, key)
			m.spilled[key] = at
			return
		}
	}
	delete(m.spilled, key)
	m.jobs[key] = enc
}

// has reports whether a record is held under key, in memory or spilled.
func (m *Memory) has(key string) bool {
	if _, ok := m.jobs[key]; ok {
		return true
	}
	_, ok := m.spilled[key]
	return ok
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
	for _, o := range b.order {
		fn(m.decode(o.key))
	}
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
		b = &memBatch{header: records.Batch{Tenant: tenant, Batch: batch, Size: size}, final: map[int]bool{}, completed: -1}
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
	if m.has(key) {
		return false, nil
	}
	b := m.batch(j.Tenant, j.Batch, j.BatchSize)
	if header != nil && b.header.Source == "" {
		b.header.Source, b.header.CreatedAt = header.Source, header.CreatedAt
	}
	b.order = append(b.order, memJob{key: key, index: j.Index})
	m.store(j)
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
	for _, o := range b.order {
		if err := fn(s.m.decode(o.key)); err != nil {
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
	if !b.final[j.Index] {
		b.final[j.Index] = true
		if j.Index >= 0 && j.Index < b.counted {
			b.inRange++
		}
	}
	if b.counted != b.header.Size {
		// The size became known (or changed): count again, once, rather than at every job.
		b.counted, b.inRange = b.header.Size, 0
		for i := range b.final {
			if i >= 0 && i < b.counted {
				b.inRange++
			}
		}
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
	order := append([]memJob(nil), b.order...)
	sort.SliceStable(order, func(x, y int) bool { return order[x].index < order[y].index })
	c := &Completion{Tenant: b.header.Tenant, Batch: b.header.Batch, By: by.Clone(), Attempt: attempt, fold: NewFold(b.header.Tenant, b.header.Batch)}
	for _, o := range order {
		c.fold.Add(m.decode(o.key))
	}
	b.header.Completion = &records.Completion{By: by.ACID, Attempt: attempt}
	return c
}
