package app

import (
	"context"
	"fmt"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/judge/external"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	judgesvc "github.com/tribunal-dev/tribunal/services/judge"
)

// judgeService is the judge service these options run.
func (o Options) judgeService(buckets bus.Buckets, provider judge.Provider) *judgesvc.Service {
	var opts []judgesvc.Option
	if o.Spend != nil {
		opts = append(opts, judgesvc.WithSpend(*o.Spend))
	}
	if o.External != nil {
		opts = append(opts, judgesvc.WithExternal(o.External))
	}
	if o.JudgeModes != nil {
		opts = append(opts, judgesvc.WithBatchMode(o.JudgeModes.Policy, o.batch))
	}
	return judgesvc.New(stage.JudgeEnv{Store: o.Store, Provider: provider, Cache: buckets.Cache, ShareCache: o.ShareJudgeCache,
		Instance: o.Instance, Params: o.Params, Log: o.Logger}, opts...)
}

// ResumeExternal goes on with the jobs of a batch that the external judge parked and
// that have an answer now: for each, the judge step runs again from the gated event its
// prompt recorded (services/judge.Service.Resume), the verdict is published for the
// aggregator, and the calls are marked resumed. A job with a call still unanswered stays
// parked. It returns how many verdicts it published.
func (r *Running) ResumeExternal(ctx context.Context, tenant, batch string) (int, error) {
	x := r.opts.External
	if x == nil {
		return 0, fmt.Errorf("resume %s/%s: these services have no external judge", tenant, batch)
	}
	calls, err := x.Calls(ctx, tenant, batch)
	if err != nil {
		return 0, err
	}
	svc := r.opts.judgeService(r.Buckets, r.provider)
	n := 0
	for _, job := range external.Resumable(calls) {
		out, err := svc.Resume(ctx, job[0])
		if err != nil {
			return n, err
		}
		if len(out) == 0 {
			continue
		}
		if err := r.Pub.PublishEvents(out...); err != nil {
			return n, fmt.Errorf("resume %s: publish the verdict: %w", job[0].ID, err)
		}
		ids := make([]external.CallID, len(job))
		for i, c := range job {
			ids[i] = c.ID
		}
		if err := x.MarkResumed(ctx, time.Now().UTC(), ids...); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
