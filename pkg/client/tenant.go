package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// BatchTenants lists the tenants whose state holds a batch with this id (its header,
// "<tenant>.<batch>" in the batches bucket): a reader given a batch id alone finds whose
// it is instead of assuming the default tenant.
func BatchTenants(ctx context.Context, b bus.Buckets, batchID string) ([]string, error) {
	if err := events.ValidateName(batchID); err != nil {
		return nil, fmt.Errorf("batch id %w", err)
	}
	l, err := b.Batches.ListKeysFiltered(ctx, "*."+batchID)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the batches named %s: %w", batchID, err)
	}
	defer func() { _ = l.Stop() }()
	var out []string
	for k := range l.Keys() {
		if tenant, batch, ok := strings.Cut(k, "."); ok && batch == batchID {
			out = append(out, tenant)
		}
	}
	sort.Strings(out)
	return out, nil
}

// ResolveTenant is the tenant of batch batchID when the caller named none (""): the one
// tenant whose state holds it, else "default" (whose lookup then says not found). Two
// tenants holding the same id is an error naming them, to be told apart with --tenant.
func ResolveTenant(ctx context.Context, b bus.Buckets, tenant, batchID string) (string, error) {
	if tenant != "" {
		return tenant, nil
	}
	ts, err := BatchTenants(ctx, b, batchID)
	if err != nil {
		return "", err
	}
	switch len(ts) {
	case 0:
		return "default", nil
	case 1:
		return ts[0], nil
	}
	return "", fmt.Errorf("batch %s is held by tenants %s: name one with --tenant", batchID, strings.Join(ts, ", "))
}

// BatchRef names one batch of the state.
type BatchRef struct {
	Tenant, Batch string
}

// ListBatches lists every batch the state holds (their headers' keys), by tenant and id.
func ListBatches(ctx context.Context, b bus.Buckets) ([]BatchRef, error) {
	l, err := b.Batches.ListKeysFiltered(ctx, "*.*")
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list batches: %w", err)
	}
	defer func() { _ = l.Stop() }()
	var out []BatchRef
	for k := range l.Keys() {
		// Completion shards and the HE-2 marker have three tokens; the filter keeps two.
		if tenant, batch, ok := strings.Cut(k, "."); ok && !strings.Contains(batch, ".") {
			out = append(out, BatchRef{Tenant: tenant, Batch: batch})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Tenant != out[j].Tenant {
			return out[i].Tenant < out[j].Tenant
		}
		return out[i].Batch < out[j].Batch
	})
	return out, nil
}
