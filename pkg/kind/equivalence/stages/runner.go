package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/artifact"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind/equivalence"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/kv"
)

// DocumentRunner is the equivalence sensor: an LLM applies each document to each case
// input. The teacher (original) transcript of a case is captured once per baseline key
// and reused by every later round and every renderer instance (the baseline cache lives
// in JetStream KV): only the candidate runs again.
type DocumentRunner struct {
	Store    blob.Store
	Provider judge.Provider
	// Baseline is the shared baseline cache.
	Baseline kv.KV
	Params   judge.Params
	Instance string
	Log      *slog.Logger
}

// baselineEntry is a cached teacher transcript.
type baselineEntry struct {
	Blob   events.Blob      `json:"blob"`
	Runner events.JudgeInfo `json:"runner"`
}

// Run applies both documents to every case and stores the transcripts. A blocked reason
// says why it could not (a document that is missing or not text, a runner that failed);
// an error is an infrastructure failure worth a retry.
func (r *DocumentRunner) Run(ctx context.Context, ev events.Event, spec *equivalence.Spec) ([]events.Transcript, string, error) {
	// Runner calls count against the tenant's share of the provider, like verdicts.
	ctx = judge.WithTenant(ctx, ev.Tenant)
	docs := map[string]string{}
	shas := map[string]string{}
	for side, src := range map[string]events.Source{"original": spec.Original, "candidate": spec.Candidate} {
		text, sha, blocked, err := r.document(ctx, ev.Tenant, src)
		if err != nil {
			return nil, "", fmt.Errorf("%s document: %w", side, err)
		}
		if blocked != "" {
			return nil, fmt.Sprintf("%s document %q: %s", side, src.Name, blocked), nil
		}
		docs[side], shas[side] = text, sha
	}
	model := spec.RunnerModel
	if model == "" {
		model = r.Provider.DefaultModel()
	}
	hash, err := equivalence.RunnerPromptHash(spec.Variant)
	if err != nil {
		return nil, "", fmt.Errorf("runner prompt: %w", err)
	}
	var out []events.Transcript
	for _, c := range spec.Cases {
		tc := equivalence.TransferCase{ID: c.ID, Input: c.Input, Tag: c.Tag}
		// KV keys allow no colons. The tenant is part of the key: a teacher transcript is a
		// blob under the tenant that captured it, and one team's runs never serve another.
		key := "runner." + ev.Tenant + "." + strings.ReplaceAll(equivalence.RunnerKey(shas["original"], tc.CacheID(), hash, model, r.Params), ":", ".")
		teacher, blocked, err := r.teacher(ctx, ev, spec, c, key, model, docs["original"])
		if err != nil || blocked != "" {
			return nil, blocked, err
		}
		out = append(out, teacher)
		// The candidate's key is apart from the teachers' (a candidate identical to its
		// original is still run as the candidate once).
		ckey := "runner." + ev.Tenant + ".candidate." + strings.ReplaceAll(equivalence.RunnerKey(shas["candidate"], tc.CacheID(), hash, model, r.Params), ":", ".")
		cand, blocked, err := r.captured(ctx, ev, spec, c, "candidate", ckey, model, docs["candidate"])
		if err != nil || blocked != "" {
			return nil, blocked, err
		}
		out = append(out, cand)
	}
	return out, "", nil
}

// teacher returns the case's baseline transcript: the one the batch handed in, else the
// one captured (see captured).
func (r *DocumentRunner) teacher(ctx context.Context, ev events.Event, spec *equivalence.Spec, c events.Case, key, model, doc string) (events.Transcript, string, error) {
	if c.Baseline != nil {
		return r.imported(ctx, c, key, model)
	}
	return r.captured(ctx, ev, spec, c, "original", key, model, doc)
}

// captured returns a side's transcript of the case, running the document only when no
// instance has captured it under key yet. A teacher transcript taken from the cache is
// marked Baseline; a candidate's, Cached.
func (r *DocumentRunner) captured(ctx context.Context, ev events.Event, spec *equivalence.Spec, c events.Case, side, key, model, doc string) (events.Transcript, string, error) {
	if r.Baseline != nil {
		if e, err := r.Baseline.Get(ctx, key); err == nil {
			var b baselineEntry
			if json.Unmarshal(e.Value(), &b) == nil {
				t := events.Transcript{CaseID: c.ID, Side: side, Blob: b.Blob, Runner: events.RunnerInfo{Judge: b.Runner, Baseline: side == "original"}}
				t.Runner.Judge.Cached = side != "original"
				return t, "", nil
			}
		} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return events.Transcript{}, "", fmt.Errorf("baseline cache: %w", err)
		}
	}
	t, blocked, err := r.run(ctx, ev, spec, c, side, model, doc)
	if err != nil || blocked != "" || r.Baseline == nil {
		return t, blocked, err
	}
	data, _ := json.Marshal(baselineEntry{Blob: t.Blob, Runner: t.Runner.Judge})
	if _, err := r.Baseline.Create(ctx, key, data); err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return events.Transcript{}, "", fmt.Errorf("baseline cache: %w", err)
		}
		// Another instance captured it first: use theirs, so every round compares
		// against one and the same teacher transcript.
		return r.captured(ctx, ev, spec, c, side, key, model, doc)
	}
	return t, "", nil
}

// imported takes a teacher transcript handed in with the batch (a baseline import) as the
// case's baseline: it is kept in the baseline cache under the key this renderer would
// have captured it under, so later rounds reuse it without the import. The hard rule
// holds both ways: a key that already has a different teacher keeps it (every round
// compares against one teacher), and the case is blocked with the reason rather than
// compared against two.
func (r *DocumentRunner) imported(ctx context.Context, c events.Case, key, model string) (events.Transcript, string, error) {
	info := events.JudgeInfo{Provider: equivalence.ImportedRunner, Model: model}
	t := events.Transcript{CaseID: c.ID, Side: "original", Blob: *c.Baseline, Runner: events.RunnerInfo{Judge: info, Baseline: true}}
	if r.Baseline == nil {
		return t, "", nil
	}
	data, _ := json.Marshal(baselineEntry{Blob: *c.Baseline, Runner: info})
	_, err := r.Baseline.Create(ctx, key, data)
	if err == nil {
		return t, "", nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return events.Transcript{}, "", fmt.Errorf("baseline cache: %w", err)
	}
	e, err := r.Baseline.Get(ctx, key)
	if err != nil {
		return events.Transcript{}, "", fmt.Errorf("baseline cache: %w", err)
	}
	var have baselineEntry
	if json.Unmarshal(e.Value(), &have) == nil && have.Blob.SHA256 == c.Baseline.SHA256 {
		return events.Transcript{CaseID: c.ID, Side: "original", Blob: have.Blob, Runner: events.RunnerInfo{Judge: have.Runner, Baseline: true}}, "", nil
	}
	return events.Transcript{}, fmt.Sprintf("case %s: the imported teacher transcript differs from the baseline already captured for this document, case and runner (%s/%s); every round compares against one teacher, so drop the import or change the document",
		c.ID, have.Runner.Provider, have.Runner.Model), nil
}

func (r *DocumentRunner) run(ctx context.Context, ev events.Event, spec *equivalence.Spec, c events.Case, side, model, doc string) (events.Transcript, string, error) {
	rec := judge.Record(r.Provider)
	tr, info, err := equivalence.RunDocument(ctx, rec, model, equivalence.RunnerInput{
		Key: ev.JobID + "/" + c.ID + "/" + side, Variant: spec.Variant, Document: doc, CaseInput: c.Input,
	}, r.Params)
	info.Usage.Call = stage.KeepCall(ctx, r.Store, r.Log, ev.Tenant, rec)
	if err != nil {
		if ctx.Err() != nil {
			return events.Transcript{}, "", ctx.Err()
		}
		return events.Transcript{}, fmt.Sprintf("runner failed on case %s (%s): %v", c.ID, side, err), nil
	}
	data, err := json.Marshal(tr)
	if err != nil {
		return events.Transcript{}, "", err
	}
	attrs, err := blob.PutBytes(ctx, r.Store, ev.Tenant, data, "application/json")
	if err != nil {
		return events.Transcript{}, "", fmt.Errorf("store transcript: %w", err)
	}
	ji := info.Usage.JudgeInfo()
	ji.Instance = r.Instance
	return events.Transcript{CaseID: c.ID, Side: side, Blob: events.Blob{SHA256: attrs.Ref.SHA256, MediaType: "application/json", Size: attrs.Size},
		Runner: events.RunnerInfo{Judge: ji}}, "", nil
}

func (r *DocumentRunner) document(ctx context.Context, tenant string, src events.Source) (text, sha, blocked string, err error) {
	switch {
	case src.Error != "":
		return "", "", src.Error, nil
	case src.Blob == nil:
		return "", "", "missing input", nil
	}
	data, _, err := blob.ReadAll(ctx, r.Store, blob.Ref{Tenant: tenant, SHA256: src.Blob.SHA256})
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return "", "", artifact.ReasonNotStored, nil
	case errors.Is(err, blob.ErrDigestMismatch):
		return "", "", artifact.ReasonStoredBad, nil
	case err != nil:
		return "", "", "", err
	}
	if !utf8.Valid(data) {
		return "", "", artifact.CauseUnsupported + ": a document must be text", nil
	}
	return string(data), src.Blob.SHA256, "", nil
}
