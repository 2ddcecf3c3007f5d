package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/index"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/registry"
)

// Progress is a snapshot of a batch.
type Progress struct {
	Total, Done int
	Completion  *records.Completion
}

// Watch reports progress every interval until the batch completes or ctx ends. A read
// that fails while NATS is briefly unreachable (a server restarting, a cluster electing a
// leader after losing a node) is tried again at the next interval.
func Watch(ctx context.Context, b bus.Buckets, tenant, batchID string, interval time.Duration, report func(Progress)) (*records.Completion, error) {
	read := func(ctx context.Context) (*Progress, error) { return ReadProgress(ctx, b, tenant, batchID) }
	// The header changes when the batch is opened and when it completes, and progress in
	// between is in other keys: a watch on the header wakes the wait the moment the batch
	// completes instead of at the next tick. Without it (the watch refused) the ticks
	// still find the completion.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wake := make(chan struct{}, 1)
	if w, err := b.Batches.Watch(wctx, records.BatchKey(tenant, batchID), jetstream.IgnoreDeletes(), jetstream.UpdatesOnly()); err == nil {
		defer func() { _ = w.Stop() }()
		go func() {
			for {
				select {
				case <-wctx.Done():
					return
				case _, ok := <-w.Updates():
					if !ok {
						return
					}
					select {
					case wake <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	return poll(ctx, interval, read, report, wake)
}

// ReadProgress is a batch's progress, nil while the batch is not recorded yet.
func ReadProgress(ctx context.Context, b bus.Buckets, tenant, batchID string) (*Progress, error) {
	store := records.New(b)
	h, _, err := store.Header(ctx, tenant, batchID)
	if err != nil || h == nil {
		return nil, err
	}
	p := Progress{Total: h.Size, Completion: h.Completion}
	if h.Completion != nil {
		p.Done = h.Size
	} else if p.Done, err = store.Progress(ctx, tenant, batchID, h.Size); err != nil {
		return nil, err
	}
	return &p, nil
}

// Poll reads progress every interval and reports it until the batch completes or ctx
// ends: Watch over any source of progress (the services' buckets, or an ingress). read
// returns nil while the batch is not recorded yet; a read that fails for the moment
// (bus.IsTransient) is tried again at the next interval.
func Poll(ctx context.Context, interval time.Duration, read func(context.Context) (*Progress, error), report func(Progress)) (*records.Completion, error) {
	return poll(ctx, interval, read, report, nil)
}

// poll is Poll that also reads whenever wake fires.
func poll(ctx context.Context, interval time.Duration, read func(context.Context) (*Progress, error), report func(Progress), wake <-chan struct{}) (*records.Completion, error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		p, err := read(ctx)
		if err != nil && !bus.IsTransient(err) {
			return nil, err
		}
		if err == nil && p != nil {
			report(*p)
			if p.Completion != nil {
				return p.Completion, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		case <-wake:
		}
	}
}

// Row is one AC's result as people read it; its kind fills it (kind.Kind.Row).
type Row = kind.Row

// Results is a completed batch as written to results.json.
type Results struct {
	Tenant  string                `json:"tenant"`
	BatchID string                `json:"batch_id"`
	Source  string                `json:"source,omitempty"`
	Summary events.BatchCompleted `json:"summary"`
	Judges  []string              `json:"judges"`
	// Revised says people's reviews decided outcomes after the batch completed, and
	// which review caused the stored completion's last revision (records.Completion).
	Revised *records.Revision `json:"revised,omitempty"`
	// Cost is what the batch's judge calls cost: in all, per judge, per kind.
	Cost     records.Costs `json:"cost"`
	Rows     []Row         `json:"results"`
	Manifest *ab.Manifest  `json:"-"`
	// Manifests are the critic and equivalence manifests, raw, by kind.
	Manifests map[string]json.RawMessage `json:"-"`
	// Lists are JSON files the kinds keep beside the results, each a list of items by its
	// path under the output folder (a rubric feature's signoff.json).
	Lists map[string][]any `json:"-"`
	// Blobs are files copied from blob storage, by their path under the output folder (a
	// rubric view's HE-1 candidate, <feature>/candidates/<target>-<state>-<appearance>.png,
	// and each iteration's gate-result.json).
	Blobs map[string][]byte `json:"-"`

	// reviewed is the batch's completion folded again from its records when a person's
	// review decided an outcome after the batch completed (see reviewedCompletion).
	reviewed *reviewedFold
	// beside maps a file's path under the output folder to where the batch asked to keep
	// it as well, relative to the batch's folder (kind.File.Beside); identity holds a
	// list's identity fields (kind.File.Identity).
	beside   map[string]string
	identity map[string][]string
	// Applied are the changes WriteBeside made to the batch's own files, one line each
	// ("file: op path value (why)").
	Applied []string `json:"-"`

	// changes are changes to the batch's own files (kind.File.Change), by the file's path
	// relative to the batch's folder, in job order.
	changes []fileChange
}

// fileChange is one planned change to a file of the batch's own.
type fileChange struct {
	file   string
	change kind.FileChange
	job    string
}

// kindFiles are the files a job's kind keeps beside the results (kind.Outputs), none for
// a kind that keeps none.
func kindFiles(rec *records.Job) []kind.File {
	k, err := registry.Lookup(rec.Spec.Kind)
	if err != nil {
		return nil
	}
	out, ok := k.(kind.Outputs)
	if !ok {
		return nil
	}
	return out.Files(rec)
}

// files collects the files a job's kind keeps beside the results (kind.Outputs): the seed
// files of a rubric view, its sign-off and HE-1 candidate, as the seed keeps them under
// .argus-runs/.
func (r *Results) files(ctx context.Context, store blob.Store, acid string, files []kind.File) error {
	for _, f := range files {
		if f.Change != nil {
			if f.Beside != "" {
				r.changes = append(r.changes, fileChange{file: f.Beside, change: f.Change, job: acid})
			}
			continue
		}
		if f.Beside != "" {
			if r.beside == nil {
				r.beside, r.identity = map[string]string{}, map[string][]string{}
			}
			r.beside[f.Path] = f.Beside
			if len(f.Identity) > 0 {
				r.identity[f.Path] = f.Identity
			}
		}
		switch {
		case f.Item != nil:
			if r.Lists == nil {
				r.Lists = map[string][]any{}
			}
			r.Lists[f.Path] = append(r.Lists[f.Path], f.Item)
		case f.Blob != nil:
			data, _, err := blob.ReadAll(ctx, store, blob.Ref{Tenant: r.Tenant, SHA256: f.Blob.SHA256})
			if err != nil {
				return fmt.Errorf("read %s of %s: %w", f.Path, acid, err)
			}
			if r.Blobs == nil {
				r.Blobs = map[string][]byte{}
			}
			r.Blobs[f.Path] = data
		case f.Doc != nil:
			data, err := json.MarshalIndent(f.Doc, "", "  ")
			if err != nil {
				return fmt.Errorf("encode %s of %s: %w", f.Path, acid, err)
			}
			if r.Blobs == nil {
				r.Blobs = map[string][]byte{}
			}
			r.Blobs[f.Path] = append(data, '\n')
		}
	}
	return nil
}

var (
	// ErrNotFound is a batch that is not recorded.
	ErrNotFound = errclass.New(errclass.NotFound, "not found")
	// ErrNotComplete is a batch that is recorded but not complete yet.
	ErrNotComplete = errclass.New(errclass.Unavailable, "not complete yet")
)

// Load reads a batch's results: its completion, every job record and its manifest.
func Load(ctx context.Context, b bus.Buckets, store blob.Store, tenant, batchID string) (*Results, error) {
	return LoadChecked(ctx, b, store, tenant, batchID, nil)
}

// LoadChecked is Load with check called on the batch's header and every job record as
// read, before the results are built from them; its error is Load's. A rerun whose
// results stand for an earlier batch's checks that batch so (internal/rerun.Stands).
func LoadChecked(ctx context.Context, b bus.Buckets, store blob.Store, tenant, batchID string, check func(*records.Batch, []*records.Job) error) (*Results, error) {
	recStore := records.New(b)
	h, _, err := recStore.Header(ctx, tenant, batchID)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("batch %s/%s: %w", tenant, batchID, ErrNotFound)
	}
	if h.Completion == nil {
		return nil, fmt.Errorf("batch %s/%s: %w", tenant, batchID, ErrNotComplete)
	}
	res := &Results{Tenant: tenant, BatchID: batchID, Source: h.Source, Summary: h.Completion.Summary, Revised: h.Completion.Revised}
	if check != nil {
		if err := res.fromAll(ctx, recStore, store, h, check); err != nil {
			return nil, err
		}
	} else if err := res.fromEach(ctx, recStore, store, h); err != nil {
		return nil, err
	}
	for kind, ref := range h.Completion.Manifests {
		if kind == events.KindAB {
			continue
		}
		data, err := res.manifest(ctx, store, kind, ref)
		if err != nil {
			return nil, fmt.Errorf("read %s manifest of %s/%s: %w", kind, tenant, batchID, err)
		}
		if res.Manifests == nil {
			res.Manifests = map[string]json.RawMessage{}
		}
		res.Manifests[string(kind)] = data
	}
	if ref := h.Completion.ManifestRef; ref != nil {
		data, err := res.manifest(ctx, store, events.KindAB, *ref)
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

// fromAll builds the results from every job record of the batch held at once, as check
// needs them (a rerun's, internal/rerun.Stands).
func (r *Results) fromAll(ctx context.Context, recStore records.Store, store blob.Store, h *records.Batch, check func(*records.Batch, []*records.Job) error) error {
	recs, err := recStore.LoadJobs(ctx, r.Tenant, r.BatchID)
	if err != nil {
		return err
	}
	if err := check(h, recs); err != nil {
		return fmt.Errorf("batch %s/%s: %w", r.Tenant, r.BatchID, err)
	}
	r.Cost = records.CostsOf(recs)
	if r.reviewed, err = reviewedCompletion(r.Tenant, r.BatchID, h.Completion, recs); err != nil {
		return err
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Index < recs[j].Index })
	judges := map[string]bool{}
	for _, rec := range recs {
		if err := r.files(ctx, store, rec.ACID, kindFiles(rec)); err != nil {
			return err
		}
		r.addRow(judges, index.Of(rec).Row)
	}
	r.setJudges(judges)
	return nil
}

// fromEach builds the results one job record at a time, holding a row for each and the
// files its kind keeps beside the results, never the records: `tribunal watch` of a
// 1,000,000-AC batch, which held every record at once, was killed by the kernel at 9 GiB
// (docs/benchmarks.md). The records are read again only when a person's review decided
// an outcome after the completion, to fold the completion again with it.
func (r *Results) fromEach(ctx context.Context, recStore records.Store, store blob.Store, h *records.Batch) error {
	type kept struct {
		index int
		acid  string
		files []kind.File
	}
	type row struct {
		index int
		row   Row
	}
	var rows []row
	var files []kept
	stale := false
	err := recStore.EachJob(ctx, r.Tenant, r.BatchID, func(rec *records.Job) error {
		r.Cost.Add(rec)
		stale = stale || reviewDecidedAfter(rec, h.Completion)
		if fs := kindFiles(rec); len(fs) > 0 {
			files = append(files, kept{rec.Index, rec.ACID, fs})
		}
		// The row the console's index holds too (index.Of): the same cached mark.
		rows = append(rows, row{rec.Index, index.Of(rec).Row})
		return nil
	})
	if err != nil {
		return err
	}
	if stale {
		if r.reviewed, err = refold(ctx, recStore, r.Tenant, r.BatchID, h.Completion); err != nil {
			return err
		}
	}
	// In the batch's order, as the results and the kinds' lists have always been.
	sort.SliceStable(files, func(i, j int) bool { return files[i].index < files[j].index })
	for _, f := range files {
		if err := r.files(ctx, store, f.acid, f.files); err != nil {
			return err
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].index < rows[j].index })
	judges := map[string]bool{}
	r.Rows = make([]Row, 0, len(rows))
	for _, rw := range rows {
		r.addRow(judges, rw.row)
	}
	r.setJudges(judges)
	return nil
}

// addRow appends one row and notes its judges.
func (r *Results) addRow(judges map[string]bool, row Row) {
	for _, n := range strings.Split(row.Judge, ",") {
		if n != "" {
			judges[n] = true
		}
	}
	r.Rows = append(r.Rows, row)
}

// setJudges lists the judges noted, sorted.
func (r *Results) setJudges(judges map[string]bool) {
	for j := range judges {
		r.Judges = append(r.Judges, j)
	}
	sort.Strings(r.Judges)
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
	for rel, list := range r.Lists {
		if err := writeInside(out, rel, func(p string) error { return write(p, list) }); err != nil {
			return "", fmt.Errorf("write %s: %w", rel, err)
		}
	}
	for rel, data := range r.Blobs {
		if err := writeInside(out, rel, func(p string) error { return os.WriteFile(filepath.Join(out, p), data, 0o644) }); err != nil {
			return "", fmt.Errorf("write %s: %w", rel, err)
		}
	}
	return out, nil
}

// WriteBeside writes the files the batch asked to keep beside its own files as well
// (kind.File.Beside: a rubric feature's .argus-runs/, the seed's place for signoff.json,
// each iteration's gate-result.json and the HE-1 candidates) under dir, the batch's
// folder, and returns the files written. A path that would leave dir is refused. A list
// is merged into the one already there, so .argus-runs/signoff.json keeps the sign-offs
// of earlier runs as the seed's appends do: an item replaces the earlier item with the
// same identity (the same view), the others stay. Then the batch's own files are changed
// as planned (kind.File.Change: the rubric kind's HE-1 sets a feature's canonical
// reference entry to candidate in its spec.json), each only while the file still needs
// it, and listed in Applied.
func (r *Results) WriteBeside(dir string) ([]string, error) {
	paths := make([]string, 0, len(r.beside))
	for p := range r.beside {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var written []string
	for _, p := range paths {
		rel := r.beside[p]
		var err error
		switch {
		case r.Lists[p] != nil:
			err = writeInside(dir, rel, func(local string) error {
				return mergeList(filepath.Join(dir, local), r.Lists[p], r.identity[p])
			})
		case r.Blobs[p] != nil:
			err = writeInside(dir, rel, func(local string) error {
				return os.WriteFile(filepath.Join(dir, local), r.Blobs[p], 0o644)
			})
		default:
			continue
		}
		if err != nil {
			return written, fmt.Errorf("write %s beside the batch: %w", rel, err)
		}
		written = append(written, filepath.Join(dir, filepath.FromSlash(rel)))
	}
	for _, c := range r.changes {
		changed := false
		err := writeInside(dir, c.file, func(local string) error {
			p := filepath.Join(dir, local)
			cur, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			next, applied, err := c.change.Apply(cur)
			if err != nil || !applied {
				return err
			}
			changed = true
			return os.WriteFile(p, next, 0o644)
		})
		if err != nil {
			what, why := c.change.Describe()
			return written, fmt.Errorf("change %s for %s (%s, %s): %w", c.file, c.job, why, what, err)
		}
		if changed {
			written = append(written, filepath.Join(dir, filepath.FromSlash(c.file)))
			what, why := c.change.Describe()
			r.Applied = append(r.Applied, fmt.Sprintf("%s: %s (%s, %s)", c.file, what, why, c.job))
		}
	}
	return written, nil
}

// mergeList writes items as the JSON list at file, keeping the items already there
// whose identity no new item has. A file that is not a JSON list is left alone with an
// error: it is someone's, not an earlier run's.
func mergeList(file string, items []any, identity []string) error {
	var kept []json.RawMessage
	old, err := os.ReadFile(file)
	switch {
	case err == nil:
		if err := json.Unmarshal(old, &kept); err != nil {
			return fmt.Errorf("%s is not a JSON list, not overwriting it: %w", file, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	key := func(raw []byte) string {
		var m map[string]any
		if len(identity) == 0 || json.Unmarshal(raw, &m) != nil {
			return ""
		}
		parts := make([]string, len(identity))
		for i, f := range identity {
			parts[i] = fmt.Sprint(m[f])
		}
		return strings.Join(parts, "\x00")
	}
	fresh := make([]json.RawMessage, 0, len(items))
	replaced := map[string]bool{}
	for _, it := range items {
		raw, err := json.Marshal(it)
		if err != nil {
			return err
		}
		fresh = append(fresh, raw)
		if k := key(raw); k != "" {
			replaced[k] = true
		}
	}
	out := make([]json.RawMessage, 0, len(kept)+len(fresh))
	for _, raw := range kept {
		if k := key(raw); k == "" || !replaced[k] {
			out = append(out, raw)
		}
	}
	data, err := json.MarshalIndent(append(out, fresh...), "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(data, '\n'), 0o644)
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
// timestamp of the write, and only the seed's comparison statuses (ab.Manifest.CFN).
// Everything else is the batch's manifest unchanged; root is the project root (CFNRoot).
// It returns
// the file written, or "" when the batch has no ab manifest (no ab AC).
func (r *Results) WriteCFN(root string, now time.Time) (string, error) {
	if r.Manifest == nil {
		return "", nil
	}
	ns := strconv.FormatInt(now.UnixNano(), 10)
	m := r.Manifest.CFN(ns)
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
