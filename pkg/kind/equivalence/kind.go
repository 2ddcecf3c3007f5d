package equivalence

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/localfile"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/stage"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// Kind is the `equivalence` judge kind.
type Kind struct{}

var _ kind.Kind = Kind{}

// Name implements kind.Kind.
func (Kind) Name() events.Kind { return events.KindEquivalence }

// Result is an equivalence job's derived result, kept on its record: the seed's report
// and the runner transcripts it compared, for reviewers.
type Result struct {
	Report      Report              `json:"report"`
	Transcripts []events.Transcript `json:"transcripts,omitempty"`
}

// ResultOf reads an equivalence job's result; nil when the job has none yet.
func ResultOf(j *records.Job) (*Result, error) {
	return kind.Unmarshal[Result](j, j.Result, "equivalence result")
}

func setResult(j *records.Job, r Result) error {
	return kind.Marshal(j, &j.Result, "equivalence result", r)
}

// Plan implements kind.Kind: one job comparing two versions of a document over the AC's
// transfer set.
func (Kind) Plan(ctx context.Context, env *stage.PlanEnv, ac batch.AC) ([]stage.Plan, error) {
	b := env.Batch
	spec := events.JobSpec{Kind: events.KindEquivalence, ACID: ac.ID, Criterion: ac.Criterion}
	es := &events.EquivalenceSpec{Variant: cmp.Or(ac.Variant, events.VariantSkill), Round: max(ac.Round, 1),
		MinCases: firstPositive(ac.MinCases, b.MinCases, DefaultMinCases), RunnerModel: cmp.Or(ac.RunnerModel, b.RunnerModel)}
	problem := ac.Problem
	cases, cerr := loadCases(ctx, b, ac)
	if problem == "" && cerr != nil {
		problem = stage.Problem(ac, cerr.Error())
	}
	if problem == "" && (ac.Original == "" || ac.Candidate == "") {
		problem = stage.Problem(ac, "missing input: an equivalence AC needs original and candidate")
	}
	if problem == "" && ac.Baseline != "" {
		if err := importBaseline(ctx, env, ac, cases); err != nil {
			problem = stage.Problem(ac, "baseline: "+err.Error())
		}
	}
	if problem != "" {
		es.Original, es.Candidate = stage.BlockedSource(ac.Original, problem), stage.BlockedSource(ac.Candidate, problem)
		spec.Equivalence, spec.Problem = es, problem
		return []stage.Plan{{JobID: ac.ID, Build: func(map[string]events.Source) events.JobSpec { return spec }}}, nil
	}
	es.Cases = cases
	return []stage.Plan{{JobID: ac.ID, Names: []string{ac.Original, ac.Candidate}, Build: func(up map[string]events.Source) events.JobSpec {
		es.Original, es.Candidate = up[ac.Original], up[ac.Candidate]
		spec.Equivalence = es
		return spec
	}}}, nil
}

// importBaseline reads the AC's baseline import (ParseBaseline), stores each teacher
// transcript as the runner stores its own and marks its case with it, so the runner does
// not capture that teacher again.
func importBaseline(ctx context.Context, env *stage.PlanEnv, ac batch.AC, cases []events.Case) error {
	p, err := env.Batch.LocalPath(ac.Baseline, env.AllowOutside)
	if err != nil {
		return err
	}
	data, err := localfile.ReadFile(ctx, p)
	if err != nil {
		return err
	}
	imported, err := ParseBaseline(data, cases)
	if err != nil {
		return fmt.Errorf("%s: %w", ac.Baseline, err)
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
	list := ac.Cases
	if ac.CasesFile != "" {
		if len(list) > 0 {
			return nil, fmt.Errorf("give cases or cases_file, not both")
		}
		p, err := b.LocalPath(ac.CasesFile, false)
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
			return nil, fmt.Errorf("cases_file %s: %s", ac.CasesFile, batch.YAMLErrorText(err))
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

// Render implements kind.Kind: the runner applies both documents to every case.
func (Kind) Render(ctx context.Context, env *stage.RenderEnv, ev events.Event, spec events.JobSpec) (*events.RenderDone, error) {
	done := &events.RenderDone{Spec: spec}
	if env.Provider == nil {
		done.Blocked = "no runner configured for equivalence jobs"
		return done, nil
	}
	r := &DocumentRunner{Store: env.Store, Provider: env.Provider, Baseline: env.Cache, Params: env.Params, Instance: env.Instance, Log: env.Log}
	ts, blocked, err := r.Run(ctx, ev, spec.Equivalence)
	if err != nil {
		return nil, err
	}
	done.Transcripts, done.Blocked = ts, blocked
	return done, nil
}

// Gate implements kind.Kind: every case has both transcripts, readable and intact; the
// pairs go to the judge, never the documents or their diff.
func (Kind) Gate(ctx context.Context, env *stage.GateEnv, ev events.Event, rd *events.RenderDone) (events.Payload, error) {
	bySide := map[string]events.Transcript{}
	for _, t := range rd.Transcripts {
		bySide[t.Side+"/"+t.CaseID] = t
	}
	var pairs []events.CasePair
	var gates []events.Gate
	for _, c := range rd.Spec.Equivalence.Cases {
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
	return &events.GatesDone{Kind: events.KindEquivalence, Gates: stage.Blind(gates), Cases: pairs}, nil
}

// Judge implements kind.Kind: one call per case comparing its two transcripts.
func (Kind) Judge(ctx context.Context, env *stage.JudgeEnv, ev events.Event, gd *events.GatesDone) (*events.VerdictEmitted, error) {
	model := env.Model(gd)
	out := &events.VerdictEmitted{Kind: events.KindEquivalence}
	for _, c := range gd.Cases {
		orig, err := transcript(ctx, env.Store, ev.Tenant, c.Original)
		if err != nil {
			return nil, fmt.Errorf("case %s original transcript: %w", c.CaseID, err)
		}
		cand, err := transcript(ctx, env.Store, ev.Tenant, c.Candidate)
		if err != nil {
			return nil, fmt.Errorf("case %s candidate transcript: %w", c.CaseID, err)
		}
		key := env.CacheKey(events.KindEquivalence, ev.Tenant, model, PromptHash(), c.Input, c.Original.Blob.SHA256, c.Candidate.Blob.SHA256)
		o, cached, err := stage.CachedCall(ctx, env, ev.Tenant, key, func(p judge.Provider) judge.Outcome[Answer] {
			return Judge(ctx, p, model, env.Instance, Input{Key: ev.JobID + "/" + c.CaseID, CaseInput: c.Input, Original: orig, Candidate: cand}, env.Params)
		})
		if err != nil {
			return nil, err
		}
		origBlob, candBlob := c.Original.Blob, c.Candidate.Blob
		v := events.CaseVote{CaseID: c.CaseID, Judge: o.Usage.JudgeInfo(), Status: o.Status, Error: o.Error, Raw: o.Raw, Original: &origBlob, Candidate: &candBlob}
		v.Judge.Instance, v.Judge.Cached = env.Instance, cached
		telemetry.JudgeCall(events.KindEquivalence, v.Judge, v.Status)
		if o.Status == events.VoteOK {
			v.Verdict, v.BehaviourDelta = o.Answer.Verdict, o.Answer.BehaviourDelta
			e := o.Answer.EfficiencySignal
			v.Efficiency = events.EfficiencySignal{OriginalDirectness: e.OriginalDirectness, CandidateDirectness: e.CandidateDirectness, InterpretationNotes: e.InterpretationNotes}
		}
		out.Cases = append(out.Cases, v)
	}
	return out, nil
}

func transcript(ctx context.Context, store blob.Store, tenant string, a events.Artifact) (Transcript, error) {
	data, _, err := blob.ReadAll(ctx, store, blob.Ref{Tenant: tenant, SHA256: a.Blob.SHA256})
	if err != nil {
		return Transcript{}, err
	}
	return ParseRunnerOutput(data)
}

// Decide implements kind.Kind: the seed's output (cases and summary, pass iff no case
// regressed), the coverage flag and the efficiency report, from the per-case answers.
func (Kind) Decide(st *kind.Step) error {
	ve, ok := st.Event.Payload.(*events.VerdictEmitted)
	if !ok || st.Job.Spec.Equivalence == nil {
		return fmt.Errorf("%w: an equivalence job takes equivalence verdicts, not %s", kind.ErrNotForKind, st.Event.Type)
	}
	j := st.Job
	d := Derive(j.Spec, ve.Cases)
	j.Status, j.Decided, j.Judges = d.Status, d.Decided, d.Decided.Judges
	if d.Blocked != "" {
		j.BlockStage, j.BlockReason = "judge", d.Blocked
	}
	res := Result{Report: d.Report}
	for _, c := range ve.Cases {
		if c.Original != nil && c.Candidate != nil {
			res.Transcripts = append(res.Transcripts, events.Transcript{CaseID: c.CaseID, Side: "original", Blob: *c.Original},
				events.Transcript{CaseID: c.CaseID, Side: "candidate", Blob: *c.Candidate})
		}
	}
	return setResult(j, res)
}

// Blocked implements kind.Kind: a blocked job has no report.
func (Kind) Blocked(*records.Job) {}

// Outcome implements kind.Kind: a pass is clean, anything else a finding.
func (Kind) Outcome(j *records.Job) kind.Outcome {
	if r, err := ResultOf(j); err == nil && r != nil && r.Report.Summary.Pass {
		return kind.OutcomeClean
	}
	return kind.OutcomeFinding
}

// Manifest implements kind.Kind: one result per AC, in batch order.
func (Kind) Manifest(_, batch string) kind.Manifest {
	return kind.NewListFold(events.KindEquivalence, batch, func(j *records.Job) ManifestRow {
		row := ManifestRow{ManifestEntry: kind.EntryOf(j)}
		if r, _ := ResultOf(j); r != nil {
			row.Equivalence = &r.Report
		}
		return row
	})
}

// Manifest is the equivalence kind's manifest: one result per AC, in batch order.
type Manifest = kind.ListManifest[ManifestRow]

// ManifestRow is one AC of the equivalence manifest.
type ManifestRow struct {
	kind.ManifestEntry
	Equivalence *Report `json:"equivalence,omitempty"`
}

// Row implements kind.Kind.
func (Kind) Row(j *records.Job) kind.Row {
	row := kind.BaseRow(j)
	r, _ := ResultOf(j)
	if r == nil {
		return row
	}
	e := r.Report
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
	return row
}

func firstPositive(v ...int) int {
	for _, x := range v {
		if x > 0 {
			return x
		}
	}
	return 0
}

// Estimate implements kind.Kind: every case runs both documents (the original's run is
// cached for later rounds) and is judged once.
func (Kind) Estimate(spec events.JobSpec) kind.Estimate {
	es := spec.Equivalence
	if es == nil {
		return kind.Estimate{}
	}
	e := kind.Estimate{Sources: []kind.Source{{Role: "original", Src: es.Original, Document: true}, {Role: "candidate", Src: es.Candidate, Document: true}},
		Cases: len(es.Cases), JudgeCalls: len(es.Cases), MaxJudgeCalls: len(es.Cases), RunnerCalls: 2 * len(es.Cases)}
	if es.Round > 1 {
		e.RunnerCalls = len(es.Cases)
		return e
	}
	for _, c := range es.Cases {
		if c.Baseline != nil {
			e.RunnerCalls-- // an imported teacher is not run
		}
	}
	return e
}
