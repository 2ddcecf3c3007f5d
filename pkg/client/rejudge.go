package client

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/aggregate"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/services/aggregator"
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
	recs, err := audit.Replay(ctx, js, audit.Filter{Tenant: tenant, BatchID: batchID})
	if err != nil {
		return 0, err
	}
	latest := map[string]events.Event{}
	for _, r := range recs {
		if !r.OK() || r.Event.Type != events.TypeGatesDone || r.Event.Rejudge != "" {
			continue
		}
		if prev, ok := latest[r.Event.JobID]; !ok || r.Event.Attempt >= prev.Attempt {
			latest[r.Event.JobID] = r.Event
		}
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
// own rules, next to the job's recorded decision.
func RejudgeResults(ctx context.Context, js jetstream.JetStream, b bus.Buckets, tenant, batchID, model string, want int) ([]RejudgeRow, error) {
	jobs, err := aggregator.LoadJobs(ctx, b.Jobs, tenant, batchID)
	if err != nil {
		return nil, err
	}
	byID := map[string]*aggregator.JobRecord{}
	for _, j := range jobs {
		byID[j.ACID] = j
	}
	for {
		recs, err := audit.Replay(ctx, js, audit.Filter{Tenant: tenant, BatchID: batchID})
		if err != nil {
			return nil, err
		}
		var rows []RejudgeRow
		for _, r := range recs {
			if !r.OK() || r.Event.Type != events.TypeVerdictEmitted || r.Event.Rejudge != model {
				continue
			}
			j := byID[r.Event.JobID]
			if j == nil {
				continue
			}
			rows = append(rows, rejudgeRow(j, r.Event))
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

func rejudgeRow(j *aggregator.JobRecord, ev events.Event) RejudgeRow {
	v := ev.Payload.(*events.VerdictEmitted)
	row := RejudgeRow{ACID: j.ACID, Kind: j.Spec.Kind, Original: outcome(j)}
	switch v.Kind {
	case events.KindAB:
		d := aggregate.DeriveAB(j.Spec, ev.Iteration, v.Votes)
		row.Rejudged, row.Judge = abOutcome(d.Decided, d.Blocked), judgesOf(d.Decided)
	case events.KindCritic:
		d := aggregate.DeriveCritic(j.Spec, v.Critic)
		row.Rejudged, row.Judge = d.Status, judgesOf(d.Decided)
		if d.Status == aggregate.StatusCompared {
			row.Rejudged = d.Result.Verdict
		}
	case events.KindEquivalence:
		d := aggregate.DeriveEquivalence(j.Spec, v.Cases)
		row.Rejudged, row.Judge = d.Status, judgesOf(d.Decided)
		if d.Status == aggregate.StatusCompared {
			row.Rejudged = map[bool]string{true: "pass", false: "fail"}[d.Report.Summary.Pass]
		}
	default:
		row.Rejudged = "not derived for " + v.Kind
	}
	row.Agree = row.Original == row.Rejudged
	return row
}

func outcome(j *aggregator.JobRecord) string {
	switch {
	case j.Status != aggregator.StatusCompared:
		return j.Status
	case j.Critic != nil:
		return j.Critic.Verdict
	case j.Equivalence != nil:
		return map[bool]string{true: "pass", false: "fail"}[j.Equivalence.Summary.Pass]
	}
	return abOutcome(j.Decided, "")
}

func abOutcome(d *events.IterationDecided, blocked string) string {
	if blocked != "" {
		return aggregator.StatusBlocked
	}
	if d == nil || d.AB == nil {
		if d != nil {
			return d.Status
		}
		return ""
	}
	if d.Status != aggregate.StatusCompared {
		return d.Status
	}
	return d.AB.Winner
}

func judgesOf(d *events.IterationDecided) string {
	if d == nil || len(d.Judges) == 0 {
		return ""
	}
	return d.Judges[0]
}
