package rulebook_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// casStore is a rulebook.Store in memory with revisions, whose writes fail the way a
// key-value bucket's compare-and-set does when another writer came first. writer, when
// set, runs once just before the next write of a job: another aggregator's write.
type casStore struct {
	jobs    map[string][]byte
	revs    map[string]uint64
	headers map[string]*records.Batch
	writer  func(*casStore)
	loads   int
	done    []string
	// headerRevs are the headers' revisions; headerWriter, when set, runs once just
	// before the next header write: another aggregator's. blobs are the manifests and
	// indexes stored, by address.
	headerRevs   map[string]uint64
	headerWriter func(*casStore)
	blobs        map[string][]byte
	// completer, when set, is Done: it completes the batch the way the aggregator does.
	completer func(*casStore, *records.Job) ([]events.Event, error)
}

func newCASStore() *casStore {
	return &casStore{jobs: map[string][]byte{}, revs: map[string]uint64{}, headers: map[string]*records.Batch{},
		headerRevs: map[string]uint64{}, blobs: map[string][]byte{}}
}

func (s *casStore) Job(_ context.Context, tenant, batch, job string) (*records.Job, uint64, error) {
	s.loads++
	key := records.JobKey(tenant, batch, job)
	data, ok := s.jobs[key]
	if !ok {
		return nil, 0, nil
	}
	j, err := records.DecodeJob(data)
	return j, s.revs[key], err
}

func (s *casStore) put(j *records.Job) {
	data, _ := json.Marshal(j)
	s.jobs[j.Key()], s.revs[j.Key()] = data, s.revs[j.Key()]+1
}

func (s *casStore) interfere() {
	if w := s.writer; w != nil {
		s.writer = nil
		w(s)
	}
}

func (s *casStore) CreateJob(_ context.Context, j *records.Job, h *records.Batch) (bool, error) {
	s.interfere()
	if _, ok := s.jobs[j.Key()]; ok {
		return false, nil
	}
	if h != nil && s.headers[records.BatchKey(h.Tenant, h.Batch)] == nil {
		s.headers[records.BatchKey(h.Tenant, h.Batch)] = h
	}
	s.put(j)
	return true, nil
}

func (s *casStore) PutJob(_ context.Context, j *records.Job, rev uint64) (bool, error) {
	s.interfere()
	if s.revs[j.Key()] != rev {
		return false, nil
	}
	s.put(j)
	return true, nil
}

func (s *casStore) State(context.Context, string) ([]byte, uint64, error)          { return nil, 0, nil }
func (s *casStore) PutState(context.Context, string, []byte, uint64) (bool, error) { return true, nil }
func (s *casStore) Document(context.Context, string, events.Blob) ([]byte, error)  { return nil, nil }
func (s *casStore) Claim(context.Context, string, string) (string, error)          { return "", nil }
func (s *casStore) TakeClaim(_ context.Context, _, _, job string) (string, error)  { return job, nil }
func (s *casStore) PlanPage(context.Context, string, events.Blob) (*records.PlanPage, error) {
	return nil, nil
}

func (s *casStore) UpdateHeader(_ context.Context, tenant, batch string, change func(*records.Batch) *records.Batch) error {
	if next := change(s.headers[records.BatchKey(tenant, batch)]); next != nil {
		s.headers[records.BatchKey(tenant, batch)] = next
		s.headerRevs[records.BatchKey(tenant, batch)]++
	}
	return nil
}

func (s *casStore) Header(_ context.Context, tenant, batch string) (*records.Batch, uint64, error) {
	key := records.BatchKey(tenant, batch)
	h := s.headers[key]
	if h == nil {
		return nil, 0, nil
	}
	c := *h
	return &c, s.headerRevs[key], nil
}

func (s *casStore) PutHeader(_ context.Context, h *records.Batch, rev uint64) (bool, error) {
	if w := s.headerWriter; w != nil {
		s.headerWriter = nil
		w(s)
	}
	key := records.BatchKey(h.Tenant, h.Batch)
	if s.headerRevs[key] != rev {
		return false, nil
	}
	c := *h
	s.headers[key], s.headerRevs[key] = &c, rev+1
	return true, nil
}

func (s *casStore) EachJob(_ context.Context, tenant, batch string, fn func(*records.Job) error) error {
	for key, data := range s.jobs {
		if !strings.HasPrefix(key, records.BatchPrefix(tenant, batch)) {
			continue
		}
		j, err := records.DecodeJob(data)
		if err != nil {
			return err
		}
		if err := fn(j); err != nil {
			return err
		}
	}
	return nil
}

func (s *casStore) PutCompleted(_ context.Context, _, _ string, c *rulebook.Completed) error {
	for k, data := range c.Manifests {
		s.blobs[c.Completion.Manifests[k].SHA256] = data
	}
	if c.Index != nil {
		s.blobs[c.Completion.Index.SHA256] = c.Index
	}
	return nil
}

func (s *casStore) Done(_ context.Context, j *records.Job) ([]events.Event, *rulebook.Completion, error) {
	s.done = append(s.done, j.ACID)
	if s.completer != nil {
		evs, err := s.completer(s, j)
		return evs, nil, err
	}
	return nil, nil, nil
}

// TestRunnerDecidesAgainOnAConflict: the runner the aggregator and the audit share loads
// what the rules read, applies them and stores by compare-and-set; when another writer
// came first it loads again and decides on what that writer stored, never over it. Here
// the other writer decides the same job first (another aggregator handling a redelivered
// verdict), so the runner's decision is that job's outcome announced again, and the job
// is counted once per decision.
func TestRunnerDecidesAgainOnAConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newCASStore()
	r := rulebook.Runner{Store: s}
	spec := abSpec("AC-1")
	if res, err := r.Apply(ctx, in(submit(spec, 0, 1))); err != nil || res.Job == nil || !res.Created || len(res.Publish) != 1 {
		t.Fatalf("submission: %+v %v", res, err)
	}
	if s.headers[records.BatchKey(tenant, batch)] == nil {
		t.Fatal("the job was created without its batch's header")
	}
	// A repeated submission, decided on no record first (a submission is nearly always
	// new), finds the job at its create and decides again on it: the render is asked for
	// again under the same id, nothing is stored.
	again, err := r.Apply(ctx, in(submit(spec, 0, 1)))
	if err != nil || again.Job != nil || len(again.Publish) != 1 || again.Publish[0].Type != events.TypeRenderRequested {
		t.Fatalf("repeated submission: %+v %v", again, err)
	}

	verdict := in(abVerdict("AC-1", "A", 0.9, 0))
	s.writer = func(s *casStore) {
		other, _, _ := s.Job(ctx, tenant, batch, "AC-1")
		s.loads--
		res, err := rulebook.Apply(rulebook.State{Job: other}, verdict)
		if err != nil || res.Job == nil {
			t.Fatalf("the other writer: %+v %v", res, err)
		}
		s.put(res.Job)
	}
	loads := s.loads
	res, err := r.Apply(ctx, verdict)
	if err != nil {
		t.Fatal(err)
	}
	if s.loads-loads != 2 {
		t.Errorf("the runner loaded the job %d times; want twice, once more after the conflict", s.loads-loads)
	}
	if res.Job != nil || !res.Done || len(res.Publish) != 1 || res.Publish[0].Type != events.TypeIterationDecided {
		t.Fatalf("after the conflict: %+v; want the other writer's outcome announced again", res)
	}
	stored, _, _ := s.Job(ctx, tenant, batch, "AC-1")
	if stored.Status != events.StatusCompared || s.revs[stored.Key()] != 2 {
		t.Fatalf("stored %s at revision %d; want the other writer's decision, written once", stored.Status, s.revs[stored.Key()])
	}
	if len(s.done) != 1 {
		t.Errorf("the job was counted %d times toward its batch", len(s.done))
	}
}
