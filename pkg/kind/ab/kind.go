package ab

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/stage"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// Kind is the `ab` judge kind.
type Kind struct{}

var _ kind.Kind = Kind{}

// Name implements kind.Kind.
func (Kind) Name() events.Kind { return events.KindAB }

// Result is an ab job's derived result, kept on its record: the comparison in the seed's
// manifest shape and the votes it was derived from.
type Result struct {
	Comparison Comparison    `json:"comparison"`
	Votes      []events.Vote `json:"votes,omitempty"`
}

// ResultOf reads an ab job's result; nil when the job has none yet.
func ResultOf(j *records.Job) (*Result, error) {
	return kind.Unmarshal[Result](j, j.Result, "ab result")
}

func setResult(j *records.Job, r Result) error { return kind.Marshal(j, &j.Result, "ab result", r) }

// ResolveThreshold picks the `ab` threshold: the batch's own, else TRIBUNAL_AB_THRESHOLD,
// else CFN_AB_CRITIC_THRESHOLD (the seed's variable), else 0.75.
func ResolveThreshold(b *batch.Batch) (float64, error) {
	if b.Threshold != nil {
		return *b.Threshold, nil
	}
	for _, name := range []string{"TRIBUNAL_AB_THRESHOLD", "CFN_AB_CRITIC_THRESHOLD"} {
		if v := os.Getenv(name); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || CheckThreshold(f) != nil {
				return 0, fmt.Errorf("%s=%q: want a number in [0,1]", name, v)
			}
			return f, nil
		}
	}
	return DefaultThreshold, nil
}

// Plan implements kind.Kind: one job comparing the AC's two artifacts, resolved through
// the batch's verify map when the entry names none.
func (Kind) Plan(_ context.Context, env *stage.PlanEnv, ac batch.AC) ([]stage.Plan, error) {
	b := env.Batch
	t, err := env.Once("ab.threshold", func() (any, error) { return ResolveThreshold(b) })
	if err != nil {
		return nil, err
	}
	v, verr := env.Once("ab.verify", func() (any, error) { return LoadVerifyMap(b) })
	verify, _ := v.(map[string]Pair)
	spec := events.JobSpec{Kind: events.KindAB, ACID: ac.ID, Criterion: ac.Criterion}
	as := &events.ABSpec{Threshold: t.(float64), Positions: firstNonEmpty(ac.Positions, firstNonEmpty(b.Positions, "single")), Judges: ac.Judges}
	if len(as.Judges) == 0 {
		as.Judges = b.Judges
	}
	if as.Positions == events.PositionsAuto {
		// The rule is recorded with the job, so its verdicts say what they were asked under.
		var conf, flips *float64
		if b.AutoSwap != nil {
			conf, flips = b.AutoSwap.Confidence, b.AutoSwap.FlipRate
		}
		as.AutoSwap = ResolveAutoSwap(conf, flips)
	}
	// problem is what is wrong with the entry itself; the job carries it as its Problem
	// (the renderer blocks with it as it is) and on its sources.
	problem := ac.Problem
	if problem == "" && verr != nil {
		problem = "verify map unusable: " + verr.Error()
	}
	pair, _, rerr := Resolve(ac.ID, Pair{Ours: ac.Ours, Reference: ac.Reference}, verify)
	if problem == "" && rerr != nil {
		problem = stage.Problem(ac, rerr.Error())
	}
	if problem != "" {
		as.Ours = stage.BlockedSource(firstNonEmpty(pair.Ours, ac.Ours), problem)
		as.Reference = stage.BlockedSource(firstNonEmpty(pair.Reference, ac.Reference), problem)
		spec.AB, spec.Problem = as, problem
		return []stage.Plan{{JobID: ac.ID, Build: func(map[string]events.Source) events.JobSpec { return spec }}}, nil
	}
	return []stage.Plan{{JobID: ac.ID, Names: []string{pair.Ours, pair.Reference}, Build: func(up map[string]events.Source) events.JobSpec {
		as.Ours, as.Reference = up[pair.Ours], up[pair.Reference]
		spec.AB = as
		return spec
	}}}, nil
}

// Render implements kind.Kind: both sides are ingested by the same rules. The first
// blocked side blocks the job; both reasons are reported when both sides are blocked.
func (Kind) Render(ctx context.Context, env *stage.RenderEnv, ev events.Event, spec events.JobSpec) (*events.RenderDone, error) {
	done := &events.RenderDone{Spec: spec}
	arts := map[string]events.Artifact{}
	var reasons []string
	for _, side := range []struct {
		role string
		src  events.Source
	}{{string(Ours), spec.AB.Ours}, {string(Reference), spec.AB.Reference}} {
		a, blocked, err := stage.Ingest(ctx, env, ev.Tenant, side.src)
		if err != nil {
			return nil, fmt.Errorf("ingest %s artifact %q: %w", side.role, side.src.Name, err)
		}
		if blocked != "" {
			reasons = append(reasons, fmt.Sprintf("%s artifact %q: %s", side.role, side.src.Name, blocked))
			continue
		}
		arts[side.role] = a
	}
	if len(reasons) > 0 {
		done.Blocked = strings.Join(reasons, "; ")
		return done, nil
	}
	done.Artifacts = arts
	return done, nil
}

// Gate implements kind.Kind: both artifacts must be readable and intact; then they are
// placed in slots A and B by the seed's deterministic shuffle, with no role label.
func (Kind) Gate(ctx context.Context, env *stage.GateEnv, ev events.Event, rd *events.RenderDone) (events.Payload, error) {
	gates, err := stage.ArtifactGates(ctx, env.Store, ev.Tenant, rd.Artifacts, string(Ours), string(Reference))
	if err != nil {
		return nil, err
	}
	if !stage.AllGreen(gates) {
		return &events.GatesFailed{Kind: events.KindAB, ACID: rd.Spec.ACID, Gates: gates}, nil
	}
	assign := Assign(rd.Spec.ACID, ev.Iteration)
	slot := func(r Role) events.Artifact { return rd.Artifacts[string(r)] }
	return &events.GatesDone{
		Kind:      events.KindAB,
		Criterion: rd.Spec.Criterion,
		Gates:     stage.Blind(gates),
		Slots:     []events.Slot{{Name: "A", Artifact: slot(assign.A)}, {Name: "B", Artifact: slot(assign.B)}},
		Positions: rd.Spec.AB.Positions,
		Judges:    rd.Spec.AB.Judges,
		AutoSwap:  rd.Spec.AB.AutoSwap,
	}, nil
}

// Judge implements kind.Kind: one call per panel model, and per order when the AC asks for
// a position swap (for positions auto, only where autoSwap says it pays); unchanged
// comparisons are answered from the judge-call cache.
func (Kind) Judge(ctx context.Context, env *stage.JudgeEnv, ev events.Event, gd *events.GatesDone) (*events.VerdictEmitted, error) {
	slots := map[string]Material{}
	for _, sl := range gd.Slots {
		data, _, err := blob.ReadAll(ctx, env.Store, blob.Ref{Tenant: ev.Tenant, SHA256: sl.Artifact.Blob.SHA256})
		if err != nil {
			return nil, fmt.Errorf("read slot %s: %w", sl.Name, err)
		}
		slots[sl.Name] = Material{Class: sl.Artifact.Class, MediaType: sl.Artifact.Blob.MediaType, Data: data}
	}
	models := gd.Judges
	if len(models) == 0 {
		models = []string{""}
	}
	log := env.Log
	if log == nil {
		log = slog.Default()
	}
	var history FlipHistory
	if gd.Positions == events.PositionsAuto {
		h, _, err := LoadFlipHistory(ctx, env.Cache, ev.Tenant)
		if err != nil {
			// Without the history every judge counts as unmeasured: auto swaps, the
			// careful choice, and says why in the log.
			log.WarnContext(ctx, "positions auto: flip history unreadable, swapping every AC", "err", err)
		}
		history = h
	}
	var votes []events.Vote
	for _, model := range models {
		if model == "" {
			model = env.Provider.DefaultModel()
		}
		first, err := judgeOrder(ctx, env, ev, gd, slots, model, "AB")
		if err != nil {
			return nil, err
		}
		votes = append(votes, first)
		swap := gd.Positions == events.PositionsSwap
		if gd.Positions == events.PositionsAuto {
			rule := events.AutoSwap{Confidence: DefaultAutoConfidence, FlipRate: DefaultAutoFlipRate}
			if gd.AutoSwap != nil {
				rule = *gd.AutoSwap
			}
			var why string
			swap, why = autoSwap(first, history.Count(env.Provider.Name()+"/"+model), rule)
			log.DebugContext(ctx, "positions auto", "job", ev.JobID, "model", model, "swap", swap, "why", why)
		}
		if swap {
			second, err := judgeOrder(ctx, env, ev, gd, slots, model, "BA")
			if err != nil {
				return nil, err
			}
			votes = append(votes, second)
		}
	}
	return &events.VerdictEmitted{Kind: events.KindAB, Votes: votes}, nil
}

// judgeOrder asks model about the gated job in one order ("AB" as the slots were
// placed, "BA" exchanged), from the judge-call cache when the same comparison was
// answered before. An error means the service is shutting down.
func judgeOrder(ctx context.Context, env *stage.JudgeEnv, ev events.Event, gd *events.GatesDone, slots map[string]Material, model, order string) (events.Vote, error) {
	in := Input{Key: ev.JobID, Criterion: gd.Criterion, A: slots["A"], B: slots["B"]}
	if order == "BA" {
		in.A, in.B = in.B, in.A
	}
	parts := []string{order, gd.Criterion}
	for _, sl := range gd.Slots {
		parts = append(parts, sl.Name, sl.Artifact.Blob.SHA256, sl.Artifact.Blob.MediaType)
	}
	key := env.CacheKey(events.KindAB, ev.Tenant, model, PromptHash(), parts...)
	var v events.Vote
	if env.Cached(ctx, key, &v) {
		v.Judge.Cached, v.Judge.Instance = true, env.Instance
	} else {
		rec := env.Recorder()
		v = Judge(ctx, rec, model, env.Instance, in, env.Params)
		if ctx.Err() != nil {
			// Shutting down: hand the message back rather than record an outage.
			return v, ctx.Err()
		}
		v.Order = order
		v.Judge.Call = env.KeepCall(ctx, ev.Tenant, rec)
		env.Remember(ctx, key, v.Status, v)
	}
	telemetry.JudgeCall(events.KindAB, v.Judge, v.Status)
	return v, nil
}

// Decide implements kind.Kind: the votes are un-shuffled and combined (Derive), never
// trusting anything but each vote's raw answer.
func (Kind) Decide(st *kind.Step) error {
	v, ok := st.Event.Payload.(*events.VerdictEmitted)
	if !ok {
		return fmt.Errorf("%w: an ab job takes verdicts, not %s", kind.ErrNotForKind, st.Event.Type)
	}
	j := st.Job
	if j.Spec.AB == nil {
		return fmt.Errorf("%w: job %s has no ab spec", kind.ErrNotForKind, j.Key())
	}
	d := Derive(j.Spec, st.Event.Iteration, v.Votes)
	j.Decided = d.Decided
	if d.Decided != nil {
		j.Judges = d.Decided.Judges
	}
	switch {
	case d.Blocked != "":
		j.Status, j.BlockStage, j.BlockReason = events.StatusBlocked, "judge", d.Blocked
	case d.Decided.Status == events.StatusSchemaViolation:
		j.Status = events.StatusSchemaViolation
	default:
		j.Status = events.StatusCompared
	}
	return setResult(j, Result{Comparison: d.Comparison, Votes: v.Votes})
}

// Blocked implements kind.Kind: a blocked comparison keeps its place in the manifest.
func (Kind) Blocked(j *records.Job) {
	c := Blocked(j.ACID, PairOf(j.Spec), Assign(j.ACID, j.Iteration), j.BlockReason)
	_ = setResult(j, Result{Comparison: c})
}

// Outcome implements kind.Kind: a comparison's outcome against its threshold.
func (Kind) Outcome(j *records.Job) kind.Outcome {
	r, err := ResultOf(j)
	if err != nil || r == nil || j.Status != events.StatusCompared {
		return kind.OutcomeSchemaViolation
	}
	return r.Comparison.Outcome(threshold(j))
}

func threshold(j *records.Job) float64 {
	if j.Spec.AB != nil {
		return j.Spec.AB.Threshold
	}
	return DefaultThreshold
}

// Manifest implements kind.Kind: the seed's vote manifest over the batch's comparisons.
func (Kind) Manifest(tenant, batch string) kind.Manifest {
	return &manifestFold{id: "ab-" + tenant + "-" + batch, threshold: DefaultThreshold}
}

type manifestFold struct {
	id        string
	threshold float64
	comps     []Comparison
}

func (m *manifestFold) Add(j *records.Job) {
	if j.Spec.AB != nil {
		m.threshold = j.Spec.AB.Threshold
	}
	if r, err := ResultOf(j); err == nil && r != nil {
		m.comps = append(m.comps, r.Comparison)
	}
}

func (m *manifestFold) Build(at time.Time) any {
	if len(m.comps) == 0 {
		return nil
	}
	man := BuildManifest(m.id, "tribunal", at, m.threshold, m.comps)
	return &man
}

// Row implements kind.Kind.
func (Kind) Row(j *records.Job) kind.Row {
	row := kind.BaseRow(j)
	if d := j.Decided; d != nil && d.AB != nil {
		a := d.AB
		row.Winner, row.Tag, row.Impact, row.LabelAssignment, row.RawWinner, row.BiggestGap, row.Agreement =
			a.Winner, a.Tag, a.Impact, a.LabelAssignment, a.RawWinner, a.BiggestGap, a.Agreement
		row.Consistent = a.Consistent
		if a.BiggestGap != "" {
			if as, err := ParseAssignment(a.LabelAssignment); err == nil {
				row.Slots = as.Legend()
			}
		}
		if j.Status == events.StatusCompared {
			// A panel's mean is a float sum ((0.8+0.9)/2 = 0.8500000000000001): people
			// read it rounded; the manifest and the decision keep the exact value.
			c := math.Round(a.Confidence*1e4) / 1e4
			row.Confidence = &c
		}
	}
	r, _ := ResultOf(j)
	if r == nil {
		return row
	}
	if j.Status == events.StatusSchemaViolation {
		row.Reason = r.Comparison.BlockedReason
	}
	names := strings.Split(row.Judge, ",")
	if row.Judge == "" {
		names = nil
	}
	for _, v := range r.Votes {
		names = kind.AddJudge(names, kind.JudgeName(v.Judge))
		row.Cached = row.Cached || v.Judge.Cached
		row.AddSampling(v.Judge)
	}
	row.Judge = strings.Join(names, ",")
	return row
}

// Estimate implements kind.Kind: one call per panel model, twice with a position swap.
func (Kind) Estimate(spec events.JobSpec) kind.Estimate {
	if spec.AB == nil {
		return kind.Estimate{}
	}
	e := kind.Estimate{Sources: []kind.Source{{Role: string(Ours), Src: spec.AB.Ours}, {Role: string(Reference), Src: spec.AB.Reference}},
		Judges: spec.AB.Judges, Positions: firstNonEmpty(spec.AB.Positions, "single")}
	e.JudgeCalls = max(len(e.Judges), 1)
	e.MaxJudgeCalls = e.JudgeCalls
	switch e.Positions {
	case events.PositionsSwap:
		e.JudgeCalls *= 2
		e.MaxJudgeCalls = e.JudgeCalls
	case events.PositionsAuto:
		// One order at least; both for a judge that has not shown a low flip rate or
		// an answer below the confidence rule.
		e.MaxJudgeCalls *= 2
	}
	return e
}

// SlotLegend implements kind.Unblinding: a call in order "BA" saw the slots exchanged.
func (Kind) SlotLegend(j *records.Job, c records.Call) string {
	as := Assign(j.ACID, j.Iteration)
	if d := j.Decided; d != nil && d.AB != nil {
		if parsed, err := ParseAssignment(d.AB.LabelAssignment); err == nil {
			as = parsed
		}
	}
	if c.Label == "BA" {
		as = as.Swapped()
	}
	return as.Legend()
}
