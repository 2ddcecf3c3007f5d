// Package stages is the ab kind's stages: planning a comparison from its batch entry,
// ingesting both artifacts, the artifact gates and the blind placement, and asking the
// judge in one or both orders. The kind's rules (pkg/kind/ab) decide what the answers come
// to; this package does the I/O around them.
package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab/commands"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/kv"
	"github.com/tribunal-dev/tribunal/pkg/localfile"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// Kind is the ab kind with its stages.
type Kind struct{ ab.Kind }

var (
	_ stage.Kind            = Kind{}
	_ stage.Commanding      = Kind{}
	_ stage.StateCommanding = Kind{}
	_ stage.GoldExporting   = Kind{}
)

// Commands are ab's own subcommands: `shuffle`.
func (Kind) Commands() []*cobra.Command { return commands.Commands() }

// StateCommands are ab's subcommands over the CLI's env: `calibrate`, `cfn-ab-critic`.
func (Kind) StateCommands(env stage.CommandEnv) []*cobra.Command {
	return commands.StateCommands(env)
}

// ExportGold writes the batch's reviewed ab jobs as a calibration set
// (`tribunal review --export-gold`).
func (Kind) ExportGold(ctx context.Context, store blob.Store, jobs []*records.Job, dir string) (stage.GoldExport, error) {
	return commands.ExportGold(ctx, store, jobs, dir)
}

// ResolveThreshold picks the `ab` threshold: the batch's own, else TRIBUNAL_AB_THRESHOLD,
// else CFN_AB_CRITIC_THRESHOLD (the seed's variable), else 0.75.
func ResolveThreshold(b *batch.Batch) (float64, error) {
	if d := defaultsOf(b); d.Threshold != nil {
		return *d.Threshold, nil
	}
	for _, name := range []string{"TRIBUNAL_AB_THRESHOLD", "CFN_AB_CRITIC_THRESHOLD"} {
		if v := os.Getenv(name); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || ab.CheckThreshold(f) != nil {
				return 0, fmt.Errorf("%s=%q: want a number in [0,1]", name, v)
			}
			return f, nil
		}
	}
	return ab.DefaultThreshold, nil
}

// Plan implements stage.Stages: one job comparing the AC's two artifacts, resolved through
// the batch's verify map when the entry names none.
func (Kind) Plan(_ context.Context, env *stage.PlanEnv, ac batch.AC) ([]stage.Plan, error) {
	b := env.Batch
	t, err := env.Once("ab.threshold", func() (any, error) { return ResolveThreshold(b) })
	if err != nil {
		return nil, err
	}
	v, verr := env.Once("ab.verify", func() (any, error) { return LoadVerifyMap(b) })
	verify, _ := v.(map[string]ab.Pair)
	spec := events.JobSpec{Kind: events.KindAB, ACID: ac.ID, Criterion: ac.Criterion}
	as := &ab.Spec{Threshold: t.(float64), Positions: firstNonEmpty(ab.PositionsOf(entryOf(ac), defaultsOf(b)), "single"), Judges: ac.Judges()}
	if len(as.Judges) == 0 {
		as.Judges = b.Judges
	}
	if as.Positions == events.PositionsAuto {
		// The rule is recorded with the job, so its verdicts say what they were asked under.
		var conf, flips *float64
		if a := defaultsOf(b).AutoSwap; a != nil {
			conf, flips = a.Confidence, a.FlipRate
		}
		as.AutoSwap = ab.ResolveAutoSwap(conf, flips)
	}
	// problem is what is wrong with the entry itself; the job carries it as its Problem
	// (the renderer blocks with it as it is) and on its sources.
	problem := ac.Problem()
	if problem == "" && verr != nil {
		problem = "verify map unusable: " + verr.Error()
	}
	pair, _, rerr := ab.Resolve(ac.ID, ab.Pair{Ours: ac.Ours, Reference: ac.Reference}, verify)
	if problem == "" && rerr != nil {
		problem = stage.Problem(ac, rerr.Error())
	}
	if problem != "" {
		as.Ours = stage.BlockedSource(firstNonEmpty(pair.Ours, ac.Ours), problem)
		as.Reference = stage.BlockedSource(firstNonEmpty(pair.Reference, ac.Reference), problem)
		spec.KindPart, spec.Problem = as, problem
		return []stage.Plan{{JobID: ac.ID, Build: func(map[string]events.Source) events.JobSpec { return spec }}}, nil
	}
	return []stage.Plan{{JobID: ac.ID, Names: []string{pair.Ours, pair.Reference}, Build: func(up map[string]events.Source) events.JobSpec {
		as.Ours, as.Reference = up[pair.Ours], up[pair.Reference]
		spec.KindPart = as
		return spec
	}}}, nil
}

// Render implements stage.Stages: both sides are ingested by the same rules. The first
// blocked side blocks the job; both reasons are reported when both sides are blocked.
func (Kind) Render(ctx context.Context, env *stage.RenderEnv, ev events.Event, spec events.JobSpec) (*events.RenderDone, error) {
	done := &events.RenderDone{Spec: spec}
	arts := map[string]events.Artifact{}
	var reasons []string
	for _, side := range []struct {
		role string
		src  events.Source
	}{{string(ab.Ours), ab.SpecOf(spec.KindPart).Ours}, {string(ab.Reference), ab.SpecOf(spec.KindPart).Reference}} {
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

// Gate implements stage.Stages: both artifacts must be readable and intact; then they are
// placed in slots A and B by the seed's deterministic shuffle, with no role label.
func (Kind) Gate(ctx context.Context, env *stage.GateEnv, ev events.Event, rd *events.RenderDone) (events.Payload, error) {
	gates, err := stage.ArtifactGates(ctx, env.Store, ev.Tenant, rd.Artifacts, string(ab.Ours), string(ab.Reference))
	if err != nil {
		return nil, err
	}
	if !stage.AllGreen(gates) {
		return &events.GatesFailed{Kind: events.KindAB, ACID: rd.Spec.ACID, Gates: gates}, nil
	}
	assign := ab.Assign(rd.Spec.ACID, ev.Iteration)
	slot := func(r ab.Role) events.Artifact { return rd.Artifacts[string(r)] }
	return &events.GatesDone{
		Kind:      events.KindAB,
		Criterion: rd.Spec.Criterion,
		Gates:     stage.Blind(gates),
		Slots:     []events.Slot{{Name: "A", Artifact: slot(assign.A)}, {Name: "B", Artifact: slot(assign.B)}},
		Positions: ab.SpecOf(rd.Spec.KindPart).Positions,
		Judges:    ab.SpecOf(rd.Spec.KindPart).Judges,
		AutoSwap:  ab.SpecOf(rd.Spec.KindPart).AutoSwap,
	}, nil
}

// Judge implements stage.Stages: one call per panel model, and per order when the AC asks for
// a position swap (for positions auto, only where autoSwap says it pays); unchanged
// comparisons are answered from the judge-call cache.
func (Kind) Judge(ctx context.Context, env *stage.JudgeEnv, ev events.Event, gd *events.GatesDone) (*events.VerdictEmitted, error) {
	slots := map[string]ab.Material{}
	for _, sl := range gd.Slots {
		data, _, err := blob.ReadAll(ctx, env.Store, blob.Ref{Tenant: ev.Tenant, SHA256: sl.Artifact.Blob.SHA256})
		if err != nil {
			return nil, fmt.Errorf("read slot %s: %w", sl.Name, err)
		}
		slots[sl.Name] = ab.Material{Class: sl.Artifact.Class, MediaType: sl.Artifact.Blob.MediaType, Data: data}
	}
	models := gd.Judges
	if len(models) == 0 {
		models = []string{""}
	}
	log := env.Log
	if log == nil {
		log = slog.Default()
	}
	var history ab.FlipHistory
	if gd.Positions == events.PositionsAuto {
		h, _, err := LoadFlipHistory(ctx, env.Cache, ev.Tenant)
		if err != nil {
			// Without the history every judge counts as unmeasured: auto swaps, the
			// careful choice, and says why in the log.
			log.WarnContext(ctx, "positions auto: flip history unreadable, swapping every AC", "err", err)
		}
		history = h
	}
	// Every trial asks each model (in each order) again; a ladder's next rung is asked
	// only when the rung below escalates by the rule the aggregator derives with.
	rep := gd.Repeats
	rungs := rep.Rungs()
	var votes []events.Vote
	for r, rungModel := range rungs {
		asked := models
		if rungModel != "" {
			asked = []string{rungModel}
		}
		var rungVotes []events.Vote
		for t := range rep.K() {
			for _, model := range asked {
				if model == "" {
					model = env.Provider.DefaultModel()
				}
				add := func(v events.Vote) {
					v.Trial, v.Rung = t, r
					rungVotes = append(rungVotes, v)
				}
				first, err := judgeOrder(ctx, env, ev, gd, slots, model, "AB", t)
				if err != nil {
					return nil, err
				}
				add(first)
				swap := gd.Positions == events.PositionsSwap
				if gd.Positions == events.PositionsAuto {
					rule := events.AutoSwap{Confidence: ab.DefaultAutoConfidence, FlipRate: ab.DefaultAutoFlipRate}
					if gd.AutoSwap != nil {
						rule = *gd.AutoSwap
					}
					var why string
					swap, why = ab.DecideSwap(first, history.Count(env.Provider.Name()+"/"+model), rule)
					log.DebugContext(ctx, "positions auto", "job", ev.JobID, "model", model, "swap", swap, "why", why)
				}
				if swap {
					second, err := judgeOrder(ctx, env, ev, gd, slots, model, "BA", t)
					if err != nil {
						return nil, err
					}
					add(second)
				}
			}
		}
		votes = append(votes, rungVotes...)
		if r == len(rungs)-1 {
			break
		}
		up, why := ab.Escalates(ev.JobID, ev.Iteration, rep, rungVotes)
		if !up {
			break
		}
		log.DebugContext(ctx, "ladder: escalated", "job", ev.JobID, "from", rungs[r], "to", rungs[r+1], "why", why)
	}
	return &events.VerdictEmitted{Kind: events.KindAB, Votes: votes}, nil
}

// judgeOrder asks model about the gated job in one order ("AB" as the slots were
// placed, "BA" exchanged), from the judge-call cache when the same comparison was
// answered before. An error means the service is shutting down.
//
// A later trial (trial > 0) is its own question: its own cache entry, and the seed moved
// by the trial's number, so trial 2 is neither trial 1's cache hit nor, on a server that
// honours the seed, its replay.
func judgeOrder(ctx context.Context, env *stage.JudgeEnv, ev events.Event, gd *events.GatesDone, slots map[string]ab.Material, model, order string, trial int) (events.Vote, error) {
	in := ab.Input{Key: ev.JobID, Criterion: gd.Criterion, A: slots["A"], B: slots["B"]}
	if order == "BA" {
		in.A, in.B = in.B, in.A
	}
	parts := []string{order, gd.Criterion}
	for _, sl := range gd.Slots {
		parts = append(parts, sl.Name, sl.Artifact.Blob.SHA256, sl.Artifact.Blob.MediaType)
	}
	params := env.Params
	if trial > 0 {
		parts = append(parts, "trial", strconv.Itoa(trial))
		params = stage.TrialParams(params, trial)
	}
	key := env.CacheKey(events.KindAB, ev.Tenant, model, ab.PromptHash(), parts...)
	var v events.Vote
	if env.Cached(ctx, key, &v) {
		v.Judge.FromCache(env.Instance)
	} else {
		rec := env.Recorder()
		v = ab.Judge(ctx, rec, model, env.Instance, in, params)
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

// LoadVerifyMap loads a batch's verify map, if it names one: the seed's map from AC ids to
// the ours/reference pair, in JSON or the markdown line grammar.
func LoadVerifyMap(b *batch.Batch) (map[string]ab.Pair, error) {
	if b.Verify == "" {
		return nil, nil
	}
	p := b.Verify
	if !filepath.IsAbs(p) {
		p = filepath.Join(b.Dir, p)
	}
	data, err := localfile.ReadFile(context.Background(), p)
	if err != nil {
		return nil, fmt.Errorf("%s: verify: %w", b.Path, err)
	}
	m, err := ab.ParseVerifyMap(data)
	if err != nil {
		return nil, fmt.Errorf("%s: verify %s: %w", b.Path, b.Verify, err)
	}
	return m, nil
}

// LoadFlipHistory reads a tenant's flip history from kv; a missing one is empty. The
// revision is for an update by compare-and-set (0 when there is none).
func LoadFlipHistory(ctx context.Context, kv kv.KV, tenant string) (ab.FlipHistory, uint64, error) {
	var h ab.FlipHistory
	if kv == nil {
		return h, 0, nil
	}
	e, err := kv.Get(ctx, ab.FlipHistoryKey(tenant))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return h, 0, nil
	}
	if err != nil {
		return h, 0, fmt.Errorf("read flip history of %s: %w", tenant, err)
	}
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		return ab.FlipHistory{}, e.Revision(), fmt.Errorf("flip history of %s: %w", tenant, err)
	}
	return h, e.Revision(), nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
