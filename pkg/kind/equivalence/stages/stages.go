// Package stages is the equivalence kind's stages: planning a job from its entry (its
// transfer set and an imported baseline), running both documents on every case (the
// renderer is the runner, DocumentRunner), pairing the transcripts and asking the judge
// about each pair. The kind's rules (pkg/kind/equivalence) derive the outcome.
package stages

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind/equivalence"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/localfile"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// Kind is the equivalence kind with its stages.
type Kind struct{ equivalence.Kind }

var _ stage.Kind = Kind{}

// Plan implements stage.Stages: one job comparing two versions of a document over the AC's
// transfer set.
func (Kind) Plan(ctx context.Context, env *stage.PlanEnv, ac batch.AC) ([]stage.Plan, error) {
	b := env.Batch
	spec := events.JobSpec{Kind: events.KindEquivalence, ACID: ac.ID, Criterion: ac.Criterion}
	e, d := entryOf(ac), defaultsOf(b)
	es := &equivalence.Spec{Variant: cmp.Or(e.Variant, events.VariantSkill), Round: max(e.Round, 1),
		MinCases: firstPositive(e.MinCases, d.MinCases, equivalence.DefaultMinCases), RunnerModel: cmp.Or(e.RunnerModel, d.RunnerModel)}
	problem := ac.Problem()
	cases, cerr := loadCases(ctx, b, ac)
	if problem == "" && cerr != nil {
		problem = stage.Problem(ac, cerr.Error())
	}
	if problem == "" && (e.Original == "" || e.Candidate == "") {
		problem = stage.Problem(ac, "missing input: an equivalence AC needs original and candidate")
	}
	if problem == "" && e.Baseline != "" {
		if err := importBaseline(ctx, env, ac, cases); err != nil {
			problem = stage.Problem(ac, "baseline: "+err.Error())
		}
	}
	if problem != "" {
		es.Original, es.Candidate = stage.BlockedSource(e.Original, problem), stage.BlockedSource(e.Candidate, problem)
		spec.KindPart, spec.Problem = es, problem
		return []stage.Plan{{JobID: ac.ID, Build: func(map[string]events.Source) events.JobSpec { return spec }}}, nil
	}
	es.Cases = cases
	return []stage.Plan{{JobID: ac.ID, Names: []string{e.Original, e.Candidate}, Build: func(up map[string]events.Source) events.JobSpec {
		es.Original, es.Candidate = up[e.Original], up[e.Candidate]
		spec.KindPart = es
		return spec
	}}}, nil
}

// importBaseline reads the AC's baseline import (ParseBaseline), stores each teacher
// transcript as the runner stores its own and marks its case with it, so the runner does
// not capture that teacher again.
func importBaseline(ctx context.Context, env *stage.PlanEnv, ac batch.AC, cases []events.Case) error {
	e := entryOf(ac)
	p, err := env.Batch.LocalPath(e.Baseline, env.AllowOutside)
	if err != nil {
		return err
	}
	data, err := localfile.ReadFile(ctx, p)
	if err != nil {
		return err
	}
	imported, err := equivalence.ParseBaseline(data, cases)
	if err != nil {
		return fmt.Errorf("%s: %w", e.Baseline, err)
	}
	for i := range cases {
		t, ok := imported[cases[i].ID]
		if !ok {
			continue
		}
		data, err := json.Marshal(t)
		if err != nil {
			return err
		}
		a, err := blob.PutBytes(ctx, env.Store, env.Tenant, data, "application/json")
		if err != nil {
			return fmt.Errorf("store the teacher transcript of case %s: %w", cases[i].ID, err)
		}
		cases[i].Baseline = &events.Blob{SHA256: a.Ref.SHA256, MediaType: "application/json", Size: a.Size}
	}
	return nil
}

// loadCases returns an equivalence AC's transfer set, inline or from its cases file.
func loadCases(ctx context.Context, b *batch.Batch, ac batch.AC) ([]events.Case, error) {
	e := entryOf(ac)
	list := e.Cases
	if e.CasesFile != "" {
		if len(list) > 0 {
			return nil, fmt.Errorf("give cases or cases_file, not both")
		}
		p, err := b.LocalPath(e.CasesFile, false)
		if err != nil {
			return nil, fmt.Errorf("cases_file: %w", err)
		}
		data, err := localfile.ReadFile(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("cases_file: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true) // a misspelled key must not silently drop a case's input
		if err := dec.Decode(&list); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("cases_file %s: %s", e.CasesFile, batch.YAMLErrorText(err))
		}
	}
	out := make([]events.Case, 0, len(list))
	for i, c := range list {
		ev := events.Case{ID: c.ID, Input: c.Input, Tag: c.Tag}
		if err := events.ValidateName(c.ID); err != nil {
			return nil, fmt.Errorf("cases[%d].id: %w", i, err)
		}
		found := false
		for _, t := range events.TaxonomyTags {
			found = found || t == c.Tag
		}
		if !found {
			return nil, fmt.Errorf("cases[%d].tag: want happy, edge, adversarial or composition, got %q", i, c.Tag)
		}
		out = append(out, ev)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the transfer set has no cases")
	}
	return out, nil
}

// Render implements stage.Stages: the runner applies both documents to every case.
func (Kind) Render(ctx context.Context, env *stage.RenderEnv, ev events.Event, spec events.JobSpec) (*events.RenderDone, error) {
	done := &events.RenderDone{Spec: spec}
	if env.Provider == nil {
		done.Blocked = "no runner configured for equivalence jobs"
		return done, nil
	}
	r := &DocumentRunner{Store: env.Store, Provider: env.Provider, Baseline: env.Cache, Params: env.Params, Instance: env.Instance, Log: env.Log}
	ts, blocked, err := r.Run(ctx, ev, equivalence.SpecOf(spec.KindPart))
	if err != nil {
		return nil, err
	}
	done.Transcripts, done.Blocked, done.ChargeRuns = ts, blocked, true
	return done, nil
}

// Gate implements stage.Stages: every case has both transcripts, readable and intact; the
// pairs go to the judge, never the documents or their diff.
func (Kind) Gate(ctx context.Context, env *stage.GateEnv, ev events.Event, rd *events.RenderDone) (events.Payload, error) {
	bySide := map[string]events.Transcript{}
	for _, t := range rd.Transcripts {
		bySide[t.Side+"/"+t.CaseID] = t
	}
	var pairs []events.CasePair
	var gates []events.Gate
	for _, c := range equivalence.SpecOf(rd.Spec.KindPart).Cases {
		pair := events.CasePair{CaseID: c.ID, Tag: c.Tag, Input: c.Input}
		for _, side := range []string{"original", "candidate"} {
			t, ok := bySide[side+"/"+c.ID]
			g, err := stage.ReadableGate(ctx, env.Store, ev.Tenant, "transcript_readable:"+side+"/"+c.ID, t.Blob.SHA256, ok)
			if err != nil {
				return nil, err
			}
			gates = append(gates, g)
			if !ok {
				continue
			}
			a := events.Artifact{Blob: t.Blob, Class: "text"}
			if side == "original" {
				pair.Original = a
			} else {
				pair.Candidate = a
			}
		}
		pairs = append(pairs, pair)
	}
	if !stage.AllGreen(gates) {
		return &events.GatesFailed{Kind: events.KindEquivalence, ACID: rd.Spec.ACID, Gates: gates}, nil
	}
	var runs []events.RunnerRun
	for _, t := range rd.Transcripts {
		if rd.ChargeRuns {
			runs = append(runs, events.RunnerRun{CaseID: t.CaseID, Side: t.Side, Runner: t.Runner})
		}
	}
	return &events.GatesDone{Kind: events.KindEquivalence, Gates: stage.Blind(gates), Cases: pairs, Runs: runs}, nil
}

// Judge implements stage.Stages: one call per case comparing its two transcripts.
func (Kind) Judge(ctx context.Context, env *stage.JudgeEnv, ev events.Event, gd *events.GatesDone) (*events.VerdictEmitted, error) {
	model := env.Model(gd)
	out := &events.VerdictEmitted{Kind: events.KindEquivalence, Runs: gd.Runs}
	// Every trial asks again for every case; each its own cache entry and seed.
	for t := range gd.Repeats.K() {
		params := stage.TrialParams(env.Params, t)
		for _, c := range gd.Cases {
			v, err := judgeCase(ctx, env, ev, c, model, t, params)
			if err != nil {
				return nil, err
			}
			out.Cases = append(out.Cases, v)
		}
	}
	return out, nil
}

// judgeCase asks model about one case's transcript pair, as trial t.
func judgeCase(ctx context.Context, env *stage.JudgeEnv, ev events.Event, c events.CasePair, model string, t int, params judge.Params) (events.CaseVote, error) {
	orig, err := transcript(ctx, env.Store, ev.Tenant, c.Original)
	if err != nil {
		return events.CaseVote{}, fmt.Errorf("case %s original transcript: %w", c.CaseID, err)
	}
	cand, err := transcript(ctx, env.Store, ev.Tenant, c.Candidate)
	if err != nil {
		return events.CaseVote{}, fmt.Errorf("case %s candidate transcript: %w", c.CaseID, err)
	}
	parts := []string{c.Input, c.Original.Blob.SHA256, c.Candidate.Blob.SHA256}
	if t > 0 {
		parts = append(parts, "trial", strconv.Itoa(t))
	}
	key := env.CacheKey(events.KindEquivalence, ev.Tenant, model, equivalence.PromptHash(), parts...)
	o, cached, err := stage.CachedCall(ctx, env, ev.Tenant, key, func(p judge.Provider) judge.Outcome[equivalence.Answer] {
		return equivalence.Judge(ctx, p, model, env.Instance, equivalence.Input{Key: ev.JobID + "/" + c.CaseID, CaseInput: c.Input, Original: orig, Candidate: cand}, params)
	})
	if err != nil {
		return events.CaseVote{}, err
	}
	origBlob, candBlob := c.Original.Blob, c.Candidate.Blob
	v := events.CaseVote{CaseID: c.CaseID, Judge: o.Usage.JudgeInfo(), Status: o.Status, Error: o.Error, Raw: o.Raw, Original: &origBlob, Candidate: &candBlob, Trial: t}
	v.Judge.Instance, v.Judge.Cached = env.Instance, cached
	telemetry.JudgeCall(events.KindEquivalence, v.Judge, v.Status)
	if o.Status == events.VoteOK {
		v.Verdict, v.BehaviourDelta = o.Answer.Verdict, o.Answer.BehaviourDelta
		e := o.Answer.EfficiencySignal
		v.Efficiency = events.EfficiencySignal{OriginalDirectness: e.OriginalDirectness, CandidateDirectness: e.CandidateDirectness, InterpretationNotes: e.InterpretationNotes}
	}
	return v, nil
}

func transcript(ctx context.Context, store blob.Store, tenant string, a events.Artifact) (equivalence.Transcript, error) {
	data, _, err := blob.ReadAll(ctx, store, blob.Ref{Tenant: tenant, SHA256: a.Blob.SHA256})
	if err != nil {
		return equivalence.Transcript{}, err
	}
	return equivalence.ParseRunnerOutput(data)
}

func firstPositive(v ...int) int {
	for _, x := range v {
		if x > 0 {
			return x
		}
	}
	return 0
}
