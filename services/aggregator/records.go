package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/ab"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/critic"
	"github.com/tribunal-dev/tribunal/pkg/equivalence"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// Job statuses. Everything but pending is final.
const (
	StatusPending         = "pending"
	StatusCompared        = "compared"
	StatusBlocked         = "blocked"
	StatusSchemaViolation = "schema_violation"
)

// JobRecord is the aggregator's state for one job, kept in the jobs bucket. A final record
// holds everything needed to re-emit its outputs, so a redelivered event republishes the
// same events (dropped as duplicates) instead of deciding again.
type JobRecord struct {
	Tenant        string         `json:"tenant"`
	Batch         string         `json:"batch"`
	ACID          string         `json:"ac_id"`
	Index         int            `json:"index"`
	BatchSize     int            `json:"batch_size"`
	BatchSource   string         `json:"batch_source,omitempty"`
	Spec          events.JobSpec `json:"spec"`
	Iteration     int            `json:"iteration"`
	CorrelationID string         `json:"correlation_id"`
	SubmittedAt   time.Time      `json:"submitted_at"`
	// Attempt is the redrive attempt the job's current outcome belongs to.
	Attempt int `json:"attempt,omitempty"`

	Status      string                   `json:"status"`
	BlockStage  string                   `json:"block_stage,omitempty"`
	BlockReason string                   `json:"block_reason,omitempty"`
	Decided     *events.IterationDecided `json:"decided,omitempty"`
	Comparison  *ab.Comparison           `json:"comparison,omitempty"`
	Votes       []events.Vote            `json:"votes,omitempty"`
	Critic      *critic.Result           `json:"critic,omitempty"`
	Equivalence *equivalence.Report      `json:"equivalence,omitempty"`
	// Judges names every judge that contributed, "provider/model".
	Judges []string `json:"judges,omitempty"`
	// Transcripts are an equivalence job's runner transcripts, for reviewers.
	Transcripts []events.Transcript `json:"transcripts,omitempty"`
	// Rubric is a rubric view's loop state in this batch.
	Rubric *RubricRecord `json:"rubric,omitempty"`
	// Inputs are the events the job's outcome was derived from, as "<event id>:<sha256
	// of its wire bytes>", in the order they were applied: the links of the digest chain
	// that manifests and sign-offs carry, so an auditor can prove what they rest on.
	Inputs []string `json:"inputs,omitempty"`
	// DecidedBy is the id of the event the final status was derived from.
	DecidedBy string    `json:"decided_by,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitempty"`
}

// Final reports whether the job has its outcome.
func (r *JobRecord) Final() bool {
	return r.Status != "" && r.Status != StatusPending && r.Status != StatusAwaitingSpotcheck
}

// JobKey is a job's key in the jobs bucket.
func JobKey(tenant, batch, ac string) string { return tenant + "." + batch + "." + ac }

// BatchPrefix matches every job key of one batch.
func BatchPrefix(tenant, batch string) string { return tenant + "." + batch + "." }

// errNotRecorded is a retryable condition: a later stage's event overtook the job's
// submission on another worker.
var errNotRecorded = errors.New("job not recorded yet")

// getJob loads a job record and its revision.
func getJob(ctx context.Context, kv jetstream.KeyValue, key string) (*JobRecord, uint64, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, fmt.Errorf("job %s: %w", key, errNotRecorded)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("load job %s: %w", key, err)
	}
	var r JobRecord
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return nil, 0, bus.Permanent(fmt.Errorf("job %s: corrupt record: %w", key, err))
	}
	return &r, e.Revision(), nil
}

// updateJob applies change to the job record with compare-and-set, reloading and
// re-applying on a conflict, so two aggregator instances never lose an update. change
// returns false when there is nothing to do (the record is already final).
func updateJob(ctx context.Context, kv jetstream.KeyValue, key string, change func(*JobRecord) bool) (*JobRecord, error) {
	for attempt := 0; ; attempt++ {
		rec, rev, err := getJob(ctx, kv, key)
		if err != nil {
			return nil, err
		}
		if !change(rec) {
			return rec, nil
		}
		data, err := json.Marshal(rec)
		if err != nil {
			return nil, fmt.Errorf("encode job %s: %w", key, err)
		}
		if _, err := kv.Update(ctx, key, data, rev); err == nil {
			return rec, nil
		} else if !bus.IsConflict(err) || attempt > 50 {
			return nil, fmt.Errorf("update job %s: %w", key, err)
		}
	}
}
