package client

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kinds"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// Progress is a snapshot of a batch.
type Progress struct {
	Total, Done int
	Completion  *records.Completion
}

// Watch reports progress every interval until the batch completes or ctx ends.
func Watch(ctx context.Context, b bus.Buckets, tenant, batchID string, interval time.Duration, report func(Progress)) (*records.Completion, error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	store := records.New(b)
	for {
		h, _, err := store.Header(ctx, tenant, batchID)
		if err != nil {
			return nil, err
		}
		if h != nil {
			p := Progress{Total: h.Size, Completion: h.Completion}
			if h.Completion != nil {
				p.Done = h.Size
			} else if p.Done, err = store.Progress(ctx, tenant, batchID, h.Size); err != nil {
				return nil, err
			}
			report(p)
			if h.Completion != nil {
				return h.Completion, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// Row is one AC's result as people read it; its kind fills it (kind.Kind.Row).
type Row = kind.Row

// Results is a completed batch as written to results.json.
type Results struct {
	Tenant   string                `json:"tenant"`
	BatchID  string                `json:"batch_id"`
	Source   string                `json:"source,omitempty"`
	Summary  events.BatchCompleted `json:"summary"`
	Judges   []string              `json:"judges"`
	Rows     []Row                 `json:"results"`
	Manifest *ab.Manifest          `json:"-"`
	// Manifests are the critic and equivalence manifests, raw, by kind.
	Manifests map[string]json.RawMessage `json:"-"`
}

// Load reads a batch's results: its completion, every job record and its manifest.
func Load(ctx context.Context, b bus.Buckets, store blob.Store, tenant, batchID string) (*Results, error) {
	recStore := records.New(b)
	h, _, err := recStore.Header(ctx, tenant, batchID)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("batch %s/%s: not found", tenant, batchID)
	}
	if h.Completion == nil {
		return nil, fmt.Errorf("batch %s/%s: not complete yet", tenant, batchID)
	}
	recs, err := recStore.LoadJobs(ctx, tenant, batchID)
	if err != nil {
		return nil, err
	}
	res := &Results{Tenant: tenant, BatchID: batchID, Source: h.Source, Summary: h.Completion.Summary}
	judges := map[string]bool{}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Index < recs[j].Index })
	for _, r := range recs {
		row := Row{ACID: r.ACID, Kind: string(r.Spec.Kind), Status: string(r.Status), Reason: r.BlockReason}
		if k, err := kinds.Lookup(r.Spec.Kind); err == nil {
			row = k.Row(r)
		}
		for _, n := range strings.Split(row.Judge, ",") {
			if n != "" {
				judges[n] = true
			}
		}
		res.Rows = append(res.Rows, row)
	}
	for j := range judges {
		res.Judges = append(res.Judges, j)
	}
	sort.Strings(res.Judges)
	for kind, ref := range h.Completion.Manifests {
		if kind == events.KindAB {
			continue
		}
		data, _, err := blob.ReadAll(ctx, store, blob.Ref{Tenant: tenant, SHA256: ref.SHA256})
		if err != nil {
			return nil, fmt.Errorf("read %s manifest of %s/%s: %w", kind, tenant, batchID, err)
		}
		if res.Manifests == nil {
			res.Manifests = map[string]json.RawMessage{}
		}
		res.Manifests[string(kind)] = data
	}
	if ref := h.Completion.ManifestRef; ref != nil {
		data, _, err := blob.ReadAll(ctx, store, blob.Ref{Tenant: tenant, SHA256: ref.SHA256})
		if err != nil {
			return nil, fmt.Errorf("read manifest of %s/%s: %w", tenant, batchID, err)
		}
		var m ab.Manifest
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("manifest of %s/%s: %w", tenant, batchID, err)
		}
		res.Manifest = &m
	}
	return res, nil
}

// Write stores results.json and manifest.json under dir/<batch id>/ and returns that
// folder.
func (r *Results) Write(dir string) (string, error) {
	out := filepath.Join(dir, r.BatchID)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("output folder: %w", err)
	}
	write := func(name string, v any) error {
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(out, name), append(data, '\n'), 0o644)
	}
	if err := write("results.json", r); err != nil {
		return "", fmt.Errorf("write results: %w", err)
	}
	if r.Manifest != nil {
		if err := write("manifest.json", r.Manifest); err != nil {
			return "", fmt.Errorf("write manifest: %w", err)
		}
	}
	for kind, m := range r.Manifests {
		if err := os.WriteFile(filepath.Join(out, "manifest-"+kind+".json"), m, 0o644); err != nil {
			return "", fmt.Errorf("write %s manifest: %w", kind, err)
		}
	}
	return out, nil
}
