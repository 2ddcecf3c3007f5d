package app

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/judge/batchmode"
	"github.com/tribunal-dev/tribunal/pkg/judge/instrument"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

func (m *JudgeModes) waiting() int {
	if m == nil || m.Waiting <= 0 {
		return DefaultBatchWaiting
	}
	return m.Waiting
}

// batchProvider is the judge's batch-mode provider over o.Provider's batch API, its state
// in the provider batches' bucket (created here, replicated like the others), measured
// like every provider call; nil when this process runs no judge, its modes never batch,
// or (when batch is only allowed, not the default) its provider has no batch API.
func (o Options) batchProvider(ctx context.Context, js jetstream.JetStream) (judge.Provider, func(), error) {
	m := o.JudgeModes
	if m == nil || !m.Policy.Enabled() || !slices.Contains(o.Services, bus.Judge) || o.Provider == nil {
		return nil, nil, nil
	}
	if m.Waiting < 0 {
		return nil, nil, errors.New("app options: JudgeModes.Waiting must not be negative")
	}
	b, ok := judge.Find[batchmode.Batching](o.Provider)
	var api batchmode.Backend
	var err error
	if ok {
		api, err = b.BatchAPI()
	} else {
		err = fmt.Errorf("provider %s has no batch API", o.Provider.Name())
	}
	if err != nil {
		if m.Policy.Default == "batch" {
			return nil, nil, fmt.Errorf("judge mode batch: %w (the batch mode needs --judge openai)", err)
		}
		o.Logger.Debug("judge mode batch is allowed but cannot be offered: jobs asking for it are judged directly", "err", err)
		return nil, nil, nil
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: batchmode.Bucket, Description: "provider batches of the batch judge mode",
		History: 1, TTL: batchmode.BucketTTL, Replicas: max(o.Bus.Replicas, 1)})
	if err != nil {
		if m.Policy.Default != "batch" {
			// Only allowed, not asked for: a judge whose NATS user predates the bucket's
			// rights still starts, and judges the batches asking for it directly.
			o.Logger.Warn("judge mode batch cannot be offered: its state bucket is not available; jobs asking for it are judged directly", "bucket", batchmode.Bucket, "err", err)
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("bucket %s: %w", batchmode.Bucket, err)
	}
	cfg := m.Batch
	if cfg.Logger == nil {
		cfg.Logger = o.Logger
	}
	cfg.MaxRequests = min(max(cfg.MaxRequests, 0), m.waiting())
	if cfg.MaxRequests == 0 {
		cfg.MaxRequests = min(batchmode.DefaultMaxRequests, m.waiting())
	}
	bp, err := batchmode.New(o.Provider, api, kv, cfg)
	if err != nil {
		return nil, nil, err
	}
	telemetry.PrimeBatchMode(bp.Name(), bp.DefaultModel())
	// Priced like the direct calls, at the table's batch discount (Response.Batch), and
	// held to the same budgets, its reservations lasting as long as a call may be parked.
	p, err := o.budgeted(ctx, js, instrument.Provider(judge.Priced(bp, o.priceTable())), cfg.HoldFor())
	if err != nil {
		bp.Close()
		return nil, nil, err
	}
	return p, bp.Close, nil
}
