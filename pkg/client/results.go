package client

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/ab"
	"github.com/tribunal-dev/tribunal/pkg/argus"
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

// Watch reports progress every interval until the batch completes or ctx ends.
func Watch(ctx context.Context, b bus.Buckets, tenant, batchID string, interval time.Duration, report func(Progress)) (*aggregator.Completion, error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		h, _, err := aggregator.LoadHeader(ctx, b.Batches, tenant, batchID)
		if err != nil {
			return nil, err
		}
		if h != nil {
			p := Progress{Total: h.Size, Completion: h.Completion}
			if h.Completion != nil {
				p.Done = h.Size
			} else if p.Done, err = aggregator.Progress(ctx, b.Batches, tenant, batchID, h.Size); err != nil {
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
	// SignOffs are the rubric views signed off in this batch, by feature, in the seed's
	// signoff.json shape.
	SignOffs map[string][]argus.SignOff `json:"-"`
	// Candidates are the HE-1 candidate renders, PNG bytes by their path under the
	// output folder: <feature>/candidates/<target>-<state>-<appearance>.png.
	Candidates map[string][]byte `json:"-"`
}

// rubricFiles collects a rubric view's sign-off and HE-1 candidate for Write, as the
// seed keeps them under .argus-runs/: signoff.json and candidates/.
func (r *Results) rubricFiles(ctx context.Context, store blob.Store, rec *aggregator.JobRecord) error {
	rs, rr := rec.Spec.Rubric, rec.Rubric
	if rs == nil || rr == nil || rs.Feature == "" {
		return nil
	}
	if rr.SignOff != nil {
		if r.SignOffs == nil {
			r.SignOffs = map[string][]argus.SignOff{}
		}
		r.SignOffs[rs.Feature] = append(r.SignOffs[rs.Feature], *rr.SignOff)
	}
	if rr.Candidate != nil {
		data, _, err := blob.ReadAll(ctx, store, blob.Ref{Tenant: r.Tenant, SHA256: rr.Candidate.SHA256})
		if err != nil {
			return fmt.Errorf("read the candidate of %s: %w", rec.ACID, err)
		}
		if r.Candidates == nil {
			r.Candidates = map[string][]byte{}
		}
		r.Candidates[path.Join(rs.Feature, "candidates", rs.Target+"-"+rs.State+"-"+rs.Appearance+".png")] = data
	}
	return nil
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
		if err := res.rubricFiles(ctx, store, r); err != nil {
			return nil, err
		}
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
	// Rubric features: <feature>/signoff.json and <feature>/candidates/*.png, the files
	// the seed keeps under .argus-runs/. Feature, target, state and appearance are slugs
	// or spec strings: each path is checked to stay inside the output folder.
	for feature, list := range r.SignOffs {
		if err := writeInside(out, path.Join(feature, "signoff.json"), func(p string) error { return write(p, list) }); err != nil {
			return "", fmt.Errorf("write signoff.json of %s: %w", feature, err)
		}
	}
	for rel, png := range r.Candidates {
		if err := writeInside(out, rel, func(p string) error { return os.WriteFile(filepath.Join(out, p), png, 0o644) }); err != nil {
			return "", fmt.Errorf("write candidate %s: %w", rel, err)
		}
	}
	return out, nil
}

// writeInside creates rel's folder under out and calls write with rel, refusing a path
// that would leave out.
func writeInside(out, rel string, write func(rel string) error) error {
	p := filepath.FromSlash(rel)
	if !filepath.IsLocal(p) {
		return fmt.Errorf("%q is not a path inside the output folder", rel)
	}
	if err := os.MkdirAll(filepath.Join(out, filepath.Dir(p)), 0o755); err != nil {
		return err
	}
	return write(p)
}

// CFNManifestDir is where the seed's vote step looks for ab manifests, under the
// project root: its discovery glob lists .cfn-cache/manifests/cfn-ab-critic-*.json.
const CFNManifestDir = ".cfn-cache/manifests"

// WriteCFN writes the batch's ab manifest where and as the seed (cfn-ab-critic) emits it,
// so the seed's vote step picks it up: root/.cfn-cache/manifests/cfn-ab-critic-<ns>.json
// with review_id "ab-critic-<ns>" and source "cfn-ab-critic", <ns> being the nanosecond
// timestamp of the write. Everything else is the batch's manifest unchanged. It returns
// the file written, or "" when the batch has no ab manifest (no ab AC).
func (r *Results) WriteCFN(root string, now time.Time) (string, error) {
	if r.Manifest == nil {
		return "", nil
	}
	ns := strconv.FormatInt(now.UnixNano(), 10)
	m := *r.Manifest
	m.ReviewID, m.Source = "ab-critic-"+ns, "cfn-ab-critic"
	dir := filepath.Join(root, filepath.FromSlash(CFNManifestDir))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("cfn manifest folder: %w", err)
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return "", fmt.Errorf("cfn manifest: %w", err)
	}
	path := filepath.Join(dir, "cfn-ab-critic-"+ns+".json")
	// O_EXCL: two writes in the same nanosecond must not overwrite each other.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", fmt.Errorf("write cfn manifest: %w", err)
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return "", fmt.Errorf("write cfn manifest %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write cfn manifest %s: %w", path, err)
	}
	return path, nil
}
