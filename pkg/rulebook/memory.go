package rulebook

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/dictzstd"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// Memory runs the rules over events in memory, the way the aggregator service runs them
// over its buckets: the same Apply, the same completion counting, the same redrive
// bookkeeping. The audit replays a stream through it and compares what it would publish
// with what the stream holds; tests drive it to write honest streams.
//
// Job records are kept encoded (their key-value JSON, compressed, see pkg/dictzstd) and
// decoded when a rule or a reader needs one, so replaying a 100,000-job batch holds about
// half a kilobyte per job rather than 100,000 decoded records; a completion folds its
// jobs (Fold) when it happens.
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

	jobs    map[string][]byte
	codec   dictzstd.Codec
	states  map[string][]byte
	batches map[string]*memBatch
	claims  map[string]string
}

type memBatch struct {
	header records.Batch
	// order are the batch's jobs in the order they were recorded.
	order []memJob
	final map[int]bool
	// completed is the attempt of the last completion, -1 for none.
	completed int
}

type memJob struct {
	key   string
	index int
}

// Applied is what one input did in memory.
type Applied struct {
	Result
	// Complete is set when the input completed its batch, or the redrive it belongs to.
	Complete *Completion
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
		m.jobs, m.states, m.batches, m.claims = map[string][]byte{}, map[string][]byte{}, map[string]*memBatch{}, map[string]string{}
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
		return nil
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
	m.jobs[j.Key()] = m.codec.Encode(data, j.Final())
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

// Apply applies one input, stores what the rules decided and reports it.
func (m *Memory) Apply(in Input) (Applied, error) {
	m.init()
	if BatchWide(in.Event) {
		return m.applyBatch(in)
	}
	tenant, batch, job := JobOf(in.Event)
	st := State{Now: m.now(), Job: m.decode(records.JobKey(tenant, batch, job))}
	var stateKey string
	if st.Job != nil && NeedsState(st.Job, in.Event) {
		if lk, ok := kind.LoopingOf(st.Job.Spec.Kind); ok {
			if stateKey = lk.StateKey(tenant, st.Job.Spec); stateKey != "" {
				var docs [][]byte
				for _, b := range lk.StateDocuments(st.Job.Spec) {
					if m.Documents == nil {
						return Applied{}, errors.New("rulebook: a looping job and no document reader")
					}
					d, err := m.Documents(tenant, b)
					if err != nil {
						return Applied{}, fmt.Errorf("job %s: %w", st.Job.Key(), err)
					}
					docs = append(docs, d)
				}
				s, err := lk.LoadState(st.Job.Spec, m.states[stateKey], docs)
				if err != nil {
					return Applied{}, fmt.Errorf("job %s: %w", st.Job.Key(), err)
				}
				st.KindState = s
			}
			if lk.Claiming(st.Job.Spec) {
				st.Claim = m.claims[records.BatchKey(tenant, batch)]
				st.Holder = m.holder(st.Job, st.Claim)
			}
		}
	}
	res, err := Apply(st, in)
	if err == nil && res.WantsClaim {
		key := records.BatchKey(tenant, batch)
		if m.claims[key] == "" {
			holder := job
			if m.Claim != nil {
				holder = m.Claim(tenant, batch, job)
			}
			m.claims[key] = holder
		}
		st.Claim = m.claims[key]
		st.Holder = m.holder(st.Job, st.Claim)
		res, err = Apply(st, in)
	}
	if err != nil || res.NotRecorded {
		return Applied{Result: res}, err
	}
	if res.Hold {
		// The input waits on the spot-check holder's record, as the aggregator parks it.
		next, ok, err := Park(st.Holder, in)
		if err != nil {
			return Applied{}, err
		}
		if !ok {
			return Applied{}, fmt.Errorf("job %s: held for a claim whose holder has its outcome", st.Job.Key())
		}
		if next != nil {
			m.store(next)
		}
		return Applied{Result: res}, nil
	}
	out := Applied{Result: res}
	if res.Job != nil {
		key := res.Job.Key()
		if res.Created {
			if _, ok := m.jobs[key]; ok {
				return out, nil
			}
			b := m.batch(tenant, batch, res.Job.BatchSize)
			if res.Batch != nil && b.header.Source == "" {
				b.header.Source, b.header.CreatedAt = res.Batch.Source, res.Batch.CreatedAt
			}
			b.order = append(b.order, memJob{key: key, index: res.Job.Index})
		}
		m.store(res.Job)
	}
	if res.KindState != nil {
		data, err := res.KindState.Encode()
		if err != nil {
			return out, fmt.Errorf("job %s: encode its state: %w", st.Job.Key(), err)
		}
		m.states[stateKey] = data
	}
	if res.Done {
		j := res.Job
		if j == nil {
			j = st.Job
		}
		out.Complete = m.done(j)
	}
	for _, rin := range res.Release {
		// Each input the job held for another job is applied to its own now. Only what
		// changes a job is the release's to publish: an input applied before announces
		// nothing new.
		sub, err := m.Apply(rin)
		if err != nil {
			again, skip := AfterRelease(rin, err)
			if skip {
				continue
			}
			if again != nil {
				sub, err = m.Apply(*again)
			}
		}
		if err != nil {
			return out, fmt.Errorf("release %s %s: %w", rin.Event.Type, rin.Event.ID, err)
		}
		if sub.Job != nil {
			out.Publish = append(out.Publish, sub.Publish...)
		}
		if sub.Complete != nil {
			out.Complete = sub.Complete
		}
	}
	return out, nil
}

// holder is the record of the job holding the batch's claim, when the rules read it for
// an input of j (NeedsHolder).
func (m *Memory) holder(j *records.Job, claim string) *records.Job {
	if !NeedsHolder(j, claim) {
		return nil
	}
	return m.decode(records.JobKey(j.Tenant, j.Batch, claim))
}

// applyBatch applies a batch-wide input to the batch's header, as the aggregator does.
func (m *Memory) applyBatch(in Input) (Applied, error) {
	ev := in.Event
	key := records.BatchKey(ev.Tenant, ev.BatchID)
	st := BatchState{Now: m.now()}
	if b := m.batches[key]; b != nil {
		h := b.header
		st.Header = &h
	}
	res, err := ApplyBatch(st, in)
	if err == nil && res.NeedPage != nil {
		if m.LoadPlan == nil {
			return Applied{}, errors.New("rulebook: a cancel and no plan loader")
		}
		if st.Page, err = m.LoadPlan(ev.Tenant, *res.NeedPage); err != nil {
			return Applied{}, fmt.Errorf("batch %s: %w", key, err)
		}
		res, err = ApplyBatch(st, in)
	}
	if err != nil {
		return Applied{}, err
	}
	if res.NotRecorded {
		return Applied{Result: Result{NotRecorded: true}}, nil
	}
	if res.Header != nil {
		m.batch(ev.Tenant, ev.BatchID, res.Header.Size).header = *res.Header
	}
	return Applied{Result: Result{Publish: res.Publish}}, nil
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
		return m.complete(b, j, j.Attempt)
	}
	b.final[j.Index] = true
	n := 0
	for i := range b.final {
		if i >= 0 && i < b.header.Size {
			n++
		}
	}
	if n < b.header.Size || b.completed >= 0 {
		return nil
	}
	return m.complete(b, j, 0)
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
