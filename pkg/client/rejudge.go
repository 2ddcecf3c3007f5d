package client

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/registry"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
	"github.com/tribunal-dev/tribunal/pkg/verdicts"
)

// Rejudge asks another judge model about a completed batch without rendering or gating
// anything again: every job's stored gates.done (the blinded slots, the transcripts, the
// rendered view) is published again for that model. The verdicts stand next to the
// original ones in the stream; the aggregator changes no decision for them. It returns
// the number of jobs sent.
func Rejudge(ctx context.Context, js jetstream.JetStream, pub Publisher, tenant, batchID, model string) (int, error) {
	if model == "" {
		return 0, fmt.Errorf("rejudge needs a model")
	}
	latest := map[string]events.Event{}
	err := audit.ReplayOwn(ctx, js, audit.Filter{Tenant: tenant, BatchID: batchID}, func(r *audit.Recorded) error {
		if !r.OK() || r.Event.Type != events.TypeGatesDone || r.Event.Rejudge != "" {
			return nil
		}
		if prev, ok := latest[r.Event.JobID]; !ok || r.Event.Attempt >= prev.Attempt {
			latest[r.Event.JobID] = r.Event
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if len(latest) == 0 {
		return 0, fmt.Errorf("batch %s/%s: no judged jobs in the stream", tenant, batchID)
	}
	var msgs []*message.Message
	for _, ev := range latest {
		gd := *ev.Payload.(*events.GatesDone)
		gd.Judges = []string{model}
		cause := ev.Envelope
		cause.Rejudge = model
		m, err := bus.Messages(events.New(&gd, tenant, batchID, ev.JobID, ev.Iteration, "", &cause))
		if err != nil {
			return 0, fmt.Errorf("job %s: %w", ev.JobID, err)
		}
		msgs = append(msgs, m...)
	}
	if err := pub.Publish("", msgs...); err != nil {
		return 0, fmt.Errorf("rejudge %s/%s: %w", tenant, batchID, err)
	}
	return len(latest), nil
}

// RejudgeRow compares one job's decision with a rejudge's.
type RejudgeRow struct {
	ACID     string `json:"ac_id"`
	Kind     string `json:"kind"`
	Original string `json:"original"`
	Rejudged string `json:"rejudged"`
	Judge    string `json:"judge"`
	Agree    bool   `json:"agree"`
}

// RejudgeResults waits for a rejudge's verdicts and derives each with the aggregator's
// own rules (rulebook.Apply on the job as it was before its outcome), next to the job's
// recorded decision.
func RejudgeResults(ctx context.Context, js jetstream.JetStream, b bus.Buckets, tenant, batchID, model string, want int) ([]RejudgeRow, error) {
	jobs, err := records.New(b).LoadJobs(ctx, tenant, batchID)
	if err != nil {
		return nil, err
	}
	byID := map[string]*records.Job{}
	for _, j := range jobs {
		byID[j.ACID] = j
	}
	for {
		var rows []RejudgeRow
		err := audit.ReplayOwn(ctx, js, audit.Filter{Tenant: tenant, BatchID: batchID}, func(r *audit.Recorded) error {
			if !r.OK() || r.Event.Type != events.TypeVerdictEmitted || r.Event.Rejudge != model {
				return nil
			}
			if j := byID[r.Event.JobID]; j != nil {
				rows = append(rows, rejudgeRow(j, r.Event))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(rows) >= want {
			sort.Slice(rows, func(a, b int) bool { return byID[rows[a].ACID].Index < byID[rows[b].ACID].Index })
			return rows, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("rejudge of %s/%s: %d of %d verdicts: %w", tenant, batchID, len(rows), want, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func rejudgeRow(j *records.Job, ev events.Event) RejudgeRow {
	row := RejudgeRow{ACID: j.ACID, Kind: string(j.Spec.Kind), Original: outcome(j)}
	if _, looping := registry.Looping(j.Spec.Kind); looping {
		row.Rejudged = "not derived for " + string(j.Spec.Kind)
		row.Agree = false
		return row
	}
	// The job as it stood before its outcome, decided by the same rules as the original.
	pending := j.Clone()
	pending.Status, pending.BlockStage, pending.BlockReason, pending.Decided, pending.Result = events.StatusPending, "", "", nil, nil
	ev.Rejudge, ev.Attempt = "", pending.Attempt
	res, err := rulebook.Apply(rulebook.State{Job: pending, Now: j.DecidedAt}, rulebook.Input{Event: ev})
	switch {
	case err != nil:
		row.Rejudged = "not derived: " + err.Error()
	case res.Job == nil:
		row.Rejudged = "not derived"
	default:
		row.Rejudged = outcome(res.Job)
		if res.Job.Decided != nil && len(res.Job.Decided.Judges) > 0 {
			row.Judge = res.Job.Decided.Judges[0]
		} else if len(res.Job.Judges) > 0 {
			row.Judge = res.Job.Judges[0]
		}
	}
	row.Agree = row.Original == row.Rejudged
	return row
}

// outcome is what a job came to, in one word (verdicts.OutcomeOf, as the console and
// the CI outputs say it): its status, or for a compared job the winner or the kind's
// verdict.
func outcome(j *records.Job) string {
	k, err := registry.Lookup(j.Spec.Kind)
	if err != nil {
		return string(j.Status)
	}
	return verdicts.OutcomeOf(k.Row(j))
}
