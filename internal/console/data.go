package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/price"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// maxBatches bounds the index page; the newest batches come first.
const maxBatches = 300

// batchRow is one batch on the index page.
type batchRow struct {
	batchHead
	Summary *events.BatchCompleted `json:"summary,omitempty"`
	Href    string                 `json:"href"`
	// AwaitingHref links the view whose sign-off waits for a person (HE-2), if any.
	AwaitingHref string `json:"awaiting_href,omitempty"`
	// Cost is what the batch's judge calls cost, from its completion.
	Cost *price.Sum `json:"cost,omitempty"`
}

// batchHead is what the index row and the batch page both say of a batch, read from its
// header.
type batchHead struct {
	Tenant    string    `json:"tenant"`
	Batch     string    `json:"batch"`
	Source    string    `json:"source,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Done      int       `json:"done"`
	Total     int       `json:"total"`
	Complete  bool      `json:"complete"`
	// KindMix is the jobs by kind ("4 ab, 1 critic"); Judges the judges that answered.
	// Batches completed before completions kept them have neither.
	KindMix string   `json:"kind_mix,omitempty"`
	Judges  []string `json:"judges,omitempty"`
}

// headOf reads the head of a batch from its header: a completed batch is done whole.
func headOf(tenant, batch string, h *records.Batch) batchHead {
	d := batchHead{Tenant: tenant, Batch: batch, Source: h.Source, CreatedAt: h.CreatedAt, Total: h.Size}
	if h.Completion != nil {
		d.Complete, d.Done = true, h.Size
		d.KindMix, d.Judges = kindMix(h.Completion.Kinds), h.Completion.Judges
	}
	return d
}

func batchHref(tenant, batch string) string { return "/t/" + tenant + "/b/" + batch }

func jobHref(tenant, batch, job string) string { return batchHref(tenant, batch) + "/j/" + job }

func blobHref(tenant, sha string) string { return "/blob/" + tenant + "/" + sha }

// listBatches reads the batch headers the caller may see. Headers are the two-token keys
// "<tenant>.<batch>" of the batches bucket; completion shards ("<tenant>.<batch>.s<k>")
// and the HE-2 marker ("<tenant>.<batch>.spotcheck") have three tokens and are skipped
// by the filter itself. Only, is "" for every visible tenant.
func (s *server) listBatches(ctx context.Context, c caller, only string) ([]batchRow, int, error) {
	filter := "*.*"
	switch {
	case only != "":
		filter = only + ".*"
	case !c.all:
		filter = c.tenant + ".*"
	}
	w, err := s.cfg.Buckets.Batches.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, 0, fmt.Errorf("list batches: %w", err)
	}
	defer w.Stop()
	var rows []batchRow
	for e := range w.Updates() {
		if e == nil {
			break
		}
		tenant, batch, ok := strings.Cut(e.Key(), ".")
		if !ok || strings.Contains(batch, ".") || !c.sees(tenant) {
			continue
		}
		var h records.Batch
		if err := json.Unmarshal(e.Value(), &h); err != nil {
			s.log.Warn("corrupt batch header", "key", e.Key(), "err", err)
			continue
		}
		if h.Tenant == "" {
			h.Tenant, h.Batch = tenant, batch
		}
		rows = append(rows, batchRow{batchHead: headOf(tenant, batch, &h), Href: batchHref(tenant, batch)})
		if h.Completion != nil {
			r := &rows[len(rows)-1]
			sum := h.Completion.Summary
			r.Summary, r.Cost = &sum, h.Completion.Cost
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if !rows[i].CreatedAt.Equal(rows[j].CreatedAt) {
			return rows[i].CreatedAt.After(rows[j].CreatedAt)
		}
		return rows[i].Batch > rows[j].Batch
	})
	total := len(rows)
	if len(rows) > maxBatches {
		rows = rows[:maxBatches]
	}
	for i := range rows {
		if rows[i].Complete {
			continue
		}
		if rows[i].Done, err = records.New(s.cfg.Buckets).Progress(ctx, rows[i].Tenant, rows[i].Batch, rows[i].Total); err != nil {
			return nil, 0, err
		}
		if job := s.awaiting(ctx, rows[i].Tenant, rows[i].Batch); job != "" {
			rows[i].AwaitingHref = jobHref(rows[i].Tenant, rows[i].Batch, job)
		}
	}
	return rows, total, nil
}

// awaiting names the job of a running batch whose sign-off waits for a person. The
// aggregator marks a batch's first interactive sign-off under "<tenant>.<batch>.spotcheck"
// (the value is the job id); the job's status says whether it still waits.
func (s *server) awaiting(ctx context.Context, tenant, batch string) string {
	job, err := records.New(s.cfg.Buckets).Spotcheck(ctx, tenant, batch)
	if err != nil || job == "" || events.ValidateName(job) != nil {
		return ""
	}
	rec, err := s.loadJob(ctx, tenant, batch, job)
	if err != nil || rec == nil || rec.Status != events.StatusAwaitingSpotcheck {
		return ""
	}
	return job
}

// loadJob reads one job record, nil when there is none.
func (s *server) loadJob(ctx context.Context, tenant, batch, job string) (*records.Job, error) {
	rec, _, err := records.New(s.cfg.Buckets).Job(ctx, tenant, batch, job)
	if errors.Is(err, records.ErrNotRecorded) {
		return nil, nil
	}
	return rec, err
}

// viewHistory lists the runs of one view of a looping kind (a rubric view) in a tenant's
// batches, newest first:
// the job key is "<tenant>.<batch>.<job>" and a view's job id is the same in every
// batch, so one wildcard filter finds them.
func (s *server) viewHistory(ctx context.Context, rec *records.Job) ([]*records.Job, error) {
	// The runs of one view are the jobs whose state is kept under the same key.
	lk, ok := kind.LoopingOf(rec.Spec.Kind)
	if !ok {
		return nil, nil
	}
	key := lk.StateKey(rec.Tenant, rec.Spec)
	if key == "" {
		return nil, nil
	}
	w, err := s.cfg.Buckets.Jobs.Watch(ctx, rec.Tenant+".*."+rec.ACID, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("view history of %s: %w", rec.ACID, err)
	}
	defer w.Stop()
	var out []*records.Job
	for e := range w.Updates() {
		if e == nil {
			break
		}
		r, err := records.DecodeJob(e.Value())
		if err != nil || r.Spec.Kind != rec.Spec.Kind || lk.StateKey(r.Tenant, r.Spec) != key {
			continue
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SubmittedAt.After(out[j].SubmittedAt) })
	if len(out) > 30 {
		out = out[:30]
	}
	return out, nil
}
