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

	"github.com/tribunal-dev/tribunal/pkg/ab"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/services/aggregator"
)

// Progress is a snapshot of a batch.
type Progress struct {
	Total, Done int
	Completion  *aggregator.Completion
}

// Watch reports progress every interval until the batch completes or ctx ends. A read
// that fails while NATS is briefly unreachable (a server restarting, a cluster electing a
// leader after losing a node) is tried again at the next interval.
func Watch(ctx context.Context, b bus.Buckets, tenant, batchID string, interval time.Duration, report func(Progress)) (*aggregator.Completion, error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		h, _, err := aggregator.LoadHeader(ctx, b.Batches, tenant, batchID)
		if err != nil && !bus.IsTransient(err) {
			return nil, err
		}
		if h != nil {
			p := Progress{Total: h.Size, Completion: h.Completion}
			if h.Completion != nil {
				p.Done = h.Size
			} else if p.Done, err = aggregator.Progress(ctx, b.Batches, tenant, batchID, h.Size); err != nil && !bus.IsTransient(err) {
				return nil, err
			}
			if err == nil {
				report(p)
			}
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

// Row is one AC's result as people read it.
type Row struct {
	ACID            string   `json:"ac_id"`
	Kind            string   `json:"kind"`
	Status          string   `json:"status"`
	Winner          string   `json:"winner,omitempty"`
	Confidence      *float64 `json:"confidence,omitempty"`
	Tag             string   `json:"tag,omitempty"`
	Impact          string   `json:"impact,omitempty"`
	LabelAssignment string   `json:"label_assignment,omitempty"`
	RawWinner       string   `json:"raw_winner,omitempty"`
	BiggestGap      string   `json:"biggest_gap,omitempty"`
	Agreement       string   `json:"agreement,omitempty"`
	// Verdict is the kind's own verdict: pass, revise or reject for critic; pass or fail
	// for equivalence.
	Verdict string `json:"verdict,omitempty"`
	// Quality is the critic's derived quality.
	Quality *int `json:"quality,omitempty"`
	// Detail summarises an equivalence report or a critic rationale.
	Detail string `json:"detail,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Judge names who produced the verdict ("scripted/fixed-A", "openai/gpt-4o", ...).
	Judge  string `json:"judge,omitempty"`
	Cached bool   `json:"cached,omitempty"`
}

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
	h, _, err := aggregator.LoadHeader(ctx, b.Batches, tenant, batchID)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("batch %s/%s: not found", tenant, batchID)
	}
	if h.Completion == nil {
		return nil, fmt.Errorf("batch %s/%s: not complete yet", tenant, batchID)
	}
	recs, err := aggregator.LoadJobs(ctx, b.Jobs, tenant, batchID)
	if err != nil {
		return nil, err
	}
	res := &Results{Tenant: tenant, BatchID: batchID, Source: h.Source, Summary: h.Completion.Summary}
	judges := map[string]bool{}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Index < recs[j].Index })
	for _, r := range recs {
		row := Row{ACID: r.ACID, Kind: r.Spec.Kind, Status: r.Status, Reason: r.BlockReason}
		if r.Decided != nil && r.Decided.AB != nil {
			d := r.Decided.AB
			row.Winner, row.Tag, row.Impact, row.LabelAssignment, row.RawWinner, row.BiggestGap, row.Agreement =
				d.Winner, d.Tag, d.Impact, d.LabelAssignment, d.RawWinner, d.BiggestGap, d.Agreement
			if r.Status == aggregator.StatusCompared {
				c := d.Confidence
				row.Confidence = &c
			}
		}
		if r.Status == aggregator.StatusSchemaViolation && r.Comparison != nil {
			row.Reason = r.Comparison.BlockedReason
		}
		if c := r.Critic; c != nil {
			if c.Verdict != "" {
				q := c.Quality
				row.Verdict, row.Quality = c.Verdict, &q
				row.Detail = fmt.Sprintf("correctness %d, slop %d, scope %d: %s", c.Correctness, c.Slop, c.Scope, c.Rationale)
			} else if row.Reason == "" {
				row.Reason = c.Reason
			}
		}
		if rb := r.Rubric; rb != nil && rb.Decision != nil {
			d := rb.Decision
			row.Verdict = d.Outcome
			row.Detail = fmt.Sprintf("view %s, loop iteration %d", d.View, d.LoopIteration)
			if len(d.FixDimensions) > 0 {
				row.Detail += fmt.Sprintf("; fix %v", d.FixDimensions)
			}
			if len(d.FailingGates) > 0 {
				row.Detail += fmt.Sprintf("; failing gates %v", d.FailingGates)
			}
			if len(d.Frozen) > 0 {
				row.Detail += fmt.Sprintf("; frozen %v", d.Frozen)
			}
			if rb.SignOff != nil {
				row.Detail += "; signed off, human spot-check " + rb.SignOff.HumanSpotcheck
			}
		}
		if e := r.Equivalence; e != nil {
			row.Verdict = "fail"
			if e.Summary.Pass {
				row.Verdict = "pass"
			}
			row.Detail = fmt.Sprintf("%d regressed, %d diverged, %d equivalent", e.Summary.Regressions, e.Summary.Divergences, e.Summary.Equivalents)
			if n := e.Summary.SchemaViolations + e.Summary.Blocked; n > 0 {
				row.Detail += fmt.Sprintf(", %d without a valid verdict", n)
			}
			if !e.Coverage.Complete {
				row.Detail += fmt.Sprintf("; thin coverage (%d cases, min %d, missing %v)", e.Coverage.Cases, e.Coverage.MinCases, e.Coverage.MissingTags)
			}
		}
		var names []string
		seen := map[string]bool{}
		for _, n := range r.Judges {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
			judges[n] = true
		}
		for _, v := range r.Votes {
			n := v.Judge.Provider + "/" + v.Judge.Model
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
			judges[n] = true
			row.Cached = row.Cached || v.Judge.Cached
		}
		row.Judge = strings.Join(names, ",")
		res.Rows = append(res.Rows, row)
	}
	for j := range judges {
		res.Judges = append(res.Judges, j)
	}
	sort.Strings(res.Judges)
	for kind, ref := range h.Completion.Manifests {
		if kind == "ab" {
			continue
		}
		data, _, err := blob.ReadAll(ctx, store, blob.Ref{Tenant: tenant, SHA256: ref.SHA256})
		if err != nil {
			return nil, fmt.Errorf("read %s manifest of %s/%s: %w", kind, tenant, batchID, err)
		}
		if res.Manifests == nil {
			res.Manifests = map[string]json.RawMessage{}
		}
		res.Manifests[kind] = data
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
