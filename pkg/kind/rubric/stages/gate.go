package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/views"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/sensor/command"
)

// Gate implements stage.Stages: the deterministic floor over a fresh render: token contrast,
// the a11y id contract, the operator's platform gates, the snapshot baseline, and
// unchanged-render detection. all_green is derived from the gates, never taken from
// anyone's word. Red gates never reach a judge; an unchanged confirmation render after a
// pass confirms it without one.
func (Kind) Gate(ctx context.Context, env *stage.GateEnv, ev events.Event, rd *events.RenderDone) (events.Payload, error) {
	rs := rubricwire.SpecOf(rd.Spec.KindPart)
	acid := rd.Spec.ACID
	if rd.RenderError != "" {
		return &events.GatesFailed{Kind: events.KindRubric, ACID: acid, Gates: []events.Gate{{Name: argus.GateBuild, Status: events.GateFail, Detail: rd.RenderError}}}, nil
	}
	render := rd.Artifacts["render"]
	if rs.ReferenceStatus != "present" {
		// HE-1: no reference, no visual judging. The render is offered as the candidate.
		return &events.GatesFailed{Kind: events.KindRubric, ACID: acid, Candidate: &render.Blob,
			NeedsContext: fmt.Sprintf("target %s has no approved reference (status %s): approve the candidate render as references/%s-%s-%s.png, replace it, or correct spec.md",
				rs.Target, rs.ReferenceStatus, rs.Target, rs.State, rs.Appearance)}, nil
	}
	read := func(b events.Blob) ([]byte, error) {
		data, _, err := blob.ReadAll(ctx, env.Store, blob.Ref{Tenant: ev.Tenant, SHA256: b.SHA256})
		return data, err
	}
	cur, err := read(render.Blob)
	if err != nil {
		return nil, fmt.Errorf("read render: %w", err)
	}
	probe, err := read(rd.Artifacts["probe"].Blob)
	if err != nil {
		return nil, fmt.Errorf("read probe: %w", err)
	}
	contrast := argus.GateSkip
	detail := map[string]string{}
	if rs.Pairs != nil {
		td, err := read(rs.Tokens)
		if err != nil {
			return nil, fmt.Errorf("read tokens: %w", err)
		}
		pd, err := read(*rs.Pairs)
		if err != nil {
			return nil, fmt.Errorf("read contrast pairs: %w", err)
		}
		tokens, terr := argus.ParseTokens(td)
		pairs, perr := argus.ParseContrastPairs(pd)
		var rep *argus.ContrastReport
		if terr == nil && perr == nil {
			rep, err = argus.CheckContrast(tokens, pairs, []string{rs.Appearance})
		}
		switch {
		case terr != nil || perr != nil || err != nil:
			contrast, detail[argus.GateTokenContrast] = argus.GateFail, fmt.Sprint("unreadable design tokens: ", firstErr(terr, perr, err))
		default:
			contrast = rep.GateStatus()
			for _, f := range rep.Failures {
				detail[argus.GateTokenContrast] += fmt.Sprintf("%s on %s %.2f < %.1f; ", f.FG, f.BG, f.Ratio, f.Min)
			}
		}
	}
	ids, err := argus.HarvestIDs(probe)
	if err != nil {
		return &events.GatesFailed{Kind: events.KindRubric, ACID: acid, Gates: []events.Gate{{Name: argus.GateA11yIDs, Status: events.GateFail, Detail: "probe is not JSON: " + err.Error()}}}, nil
	}
	a11y := argus.CheckA11yIDs(rs.A11yContract, ids)
	if len(a11y.Missing) > 0 {
		detail[argus.GateA11yIDs] = "missing " + strings.Join(a11y.Missing, ", ")
	}
	var rec views.Record
	if env.Views != nil {
		if rec, _, err = views.Load(ctx, env.Views, views.Key(ev.Tenant, rs)); err != nil {
			return nil, err
		}
	}
	// The view as this step will find it: a spec, rubric or reference other than the
	// loop's starts a new loop, without the old loop's snapshot baseline.
	rec, _ = rec.For(rs)
	specJSON, err := read(rs.SpecJSON)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	adapter, ran, err := adapterGates(ctx, env.Gates, rs, specJSON, probe)
	switch {
	case errors.Is(err, command.ErrGatesBlocked):
		// A gates adapter exists that this gater will not run (or the job does not say):
		// the view is blocked, never judged on platform gates nobody ran.
		return &events.GatesFailed{Kind: events.KindRubric, ACID: acid, Blocked: err.Error()}, nil
	case err != nil:
		// The gates command is broken: a failed build gate says so and keeps the judge
		// away, instead of a green floor nobody measured.
		return &events.GatesFailed{Kind: events.KindRubric, ACID: acid, Gates: []events.Gate{{Name: argus.GateBuild, Status: events.GateFail, Detail: err.Error()}}}, nil
	}
	if rec.Baseline != nil && adapter.Snapshot == "" {
		base, err := read(*rec.Baseline)
		if err != nil {
			return nil, fmt.Errorf("read snapshot baseline: %w", err)
		}
		var cmp argus.ImageComparison
		adapter.Snapshot, cmp = argus.SnapshotStatus(base, cur)
		if adapter.Snapshot == argus.GateDiff {
			detail[argus.GateSnapshot] = fmt.Sprintf("%d of %d pixels differ from the signed-off baseline (%s)", cmp.DiffPixels, cmp.TotalPixels, cmp.Method)
		}
	}
	view := argus.View{Target: rs.Target, State: rs.State, Appearance: rs.Appearance}
	result := argus.AssembleGateResult(view, rs.Feature, adapter, contrast, &a11y)
	result.Tribunal = gateNotes(result.Gates, adapter, ran, rec.Baseline != nil, detail)
	gates := gateList(result, detail)
	// The iteration's gate-result.json (the seed's gates.sh output): kept beside the
	// results, and shown to the judge when the gates are green.
	resultJSON, err := json.MarshalIndent(result, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode gate result: %w", err)
	}
	stored, err := blob.PutBytes(ctx, env.Store, ev.Tenant, append(resultJSON, '\n'), "application/json")
	if err != nil {
		return nil, fmt.Errorf("store gate result: %w", err)
	}
	gateResult := events.Blob{SHA256: stored.Ref.SHA256, MediaType: "application/json", Size: stored.Size}
	if !result.AllGreen {
		return &events.GatesFailed{Kind: events.KindRubric, ACID: acid, Gates: gates, GateResult: &gateResult}, nil
	}
	unchanged := false
	if rec.PrevRender != nil {
		prev, err := read(*rec.PrevRender)
		if err != nil {
			return nil, fmt.Errorf("read previous render: %w", err)
		}
		unchanged = argus.CompareImages(prev, cur).Unchanged
	}
	// The seed's hash suppression: "if unchanged AND last_verdict.all_pass" only. A
	// confirmation render of a loop whose streak is gone (reset or replaced meanwhile)
	// is judged.
	if unchanged && rs.Confirm && rec.Loop.ConsecutivePasses > 0 {
		return &events.RenderUnchanged{Kind: events.KindRubric, ACID: acid, Gates: gates, Render: render.Blob, GateResult: &gateResult}, nil
	}
	// The judge reads spec.json's contract (states, a11y contract, component contracts),
	// never the paths it names.
	js, err := argus.JudgeSpec(specJSON)
	if err != nil {
		return nil, fmt.Errorf("spec for the judge: %w", err)
	}
	judgeSpec, err := blob.PutBytes(ctx, env.Store, ev.Tenant, append(js, '\n'), "application/json")
	if err != nil {
		return nil, fmt.Errorf("store spec for the judge: %w", err)
	}
	slots := []events.Slot{
		{Name: "render", Artifact: render},
		{Name: "reference", Artifact: events.Artifact{Blob: *rs.Reference, Class: "image"}},
		{Name: "probe", Artifact: rd.Artifacts["probe"]},
		{Name: "tokens", Artifact: events.Artifact{Blob: rs.Tokens, Class: "text"}},
		{Name: "spec_text", Artifact: events.Artifact{Blob: rs.SpecText, Class: "text"}},
		{Name: "spec_json", Artifact: events.Artifact{Blob: events.Blob{SHA256: judgeSpec.Ref.SHA256, MediaType: "application/json", Size: judgeSpec.Size}, Class: "text"}},
		{Name: "gate_result", Artifact: events.Artifact{Blob: gateResult, Class: "text"}},
		{Name: "rubric", Artifact: events.Artifact{Blob: rs.Rubric, Class: "text"}},
	}
	if rec.PrevRender != nil {
		slots = append(slots, events.Slot{Name: "previous", Artifact: events.Artifact{Blob: *rec.PrevRender, Class: "image"}})
	}
	return &events.GatesDone{Kind: events.KindRubric, Gates: gates, Slots: slots, KindPart: &rubricwire.Judging{
		Feature: rs.Feature, Target: rs.Target, State: rs.State, Appearance: rs.Appearance,
		ReferenceSource: rs.ReferenceSource, LoopIteration: rec.Loop.Iteration + 1, Loop: rec.Generation,
	}}, nil
}

// gateList flattens a gate result for events, keeping skipped gates visible.
func gateList(r argus.GateResult, detail map[string]string) []events.Gate {
	failing := map[string]bool{}
	for _, f := range r.Gates.Failing() {
		failing[f] = true
	}
	var out []events.Gate
	for _, name := range append(r.Gates.Names(), argus.GateA11yIDs) {
		st := events.GatePass
		switch {
		case failing[name]:
			st = events.GateFail
		case r.Gates.Status(name) == argus.GateSkip:
			st = events.GateSkip
		}
		out = append(out, events.Gate{Name: name, Status: st, Detail: strings.TrimSuffix(detail[name], "; ")})
	}
	return out
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// adapterGates runs the view's gates adapter (command.Gates.Run: the operator's command,
// or in the all-in-one mode the project's argus/adapters/{adapter}/gates.sh) and parses
// the statuses it printed. Output that is not the expected JSON is an error, never a
// green gate; a gates adapter this gater will not run is command.ErrGatesBlocked.
func adapterGates(ctx context.Context, g *command.Gates, rs *rubricwire.Spec, spec, probe []byte) (argus.AdapterGates, command.GatesRun, error) {
	in := command.GatesInput{Spec: spec, Probe: probe, Target: rs.Target, State: rs.State, Appearance: rs.Appearance}
	if p := rs.Project; p != nil {
		in.Project = &command.GatesProject{Root: p.Root, Spec: p.Spec, Gates: p.Gates}
	}
	run, err := g.Run(ctx, rs.Adapter, in)
	if err != nil || run.Adapter == "" {
		return argus.AdapterGates{}, run, err
	}
	gates, err := argus.ParseAdapterGates(run.Output)
	if err != nil {
		return argus.AdapterGates{}, run, fmt.Errorf("gates adapter %s: %w", run.Adapter, err)
	}
	return gates, run, nil
}

// gateNotes says why each gate of the result reads skip, and which of the adapter's
// keys were ignored, adding the same to the gates' details (the job's gates): a skip is
// a reason on the result, never silent. The adapter's failures name the adapter too.
func gateNotes(g argus.Gates, adapter argus.AdapterGates, ran command.GatesRun, baseline bool, detail map[string]string) *argus.GateNotes {
	n := &argus.GateNotes{GatesAdapter: ran.Adapter, Skipped: map[string]string{}}
	reported := map[string]argus.GateStatus{argus.GateBuild: adapter.Build, argus.GateLint: adapter.Lint, argus.GateTypeCheck: adapter.TypeCheck,
		argus.GateTokenCompliance: adapter.TokenCompliance, argus.GateSnapshot: adapter.Snapshot, argus.GateFlows: adapter.Flows}
	for _, e := range adapter.Extra {
		reported[e.Name] = e.Status
	}
	failing := g.Failing()
	for _, name := range g.Names() {
		st, fromAdapter := reported[name]
		switch {
		case g.Status(name) != argus.GateSkip:
			if fromAdapter && st != "" && slices.Contains(failing, name) && detail[name] == "" {
				detail[name] = "reported by " + ran.Adapter
			}
			continue
		case name == argus.GateTokenContrast:
			n.Skipped[name] = "the spec declares no design_system.contrast_pairs"
		case ran.Adapter == "":
			n.Skipped[name] = ran.None
			if name == argus.GateSnapshot && !baseline {
				n.Skipped[name] += "; no signed-off baseline to compare with yet"
			}
		case st == argus.GateSkip:
			n.Skipped[name] = "reported skip by " + ran.Adapter
		case name == argus.GateSnapshot && !baseline:
			n.Skipped[name] = "not reported by " + ran.Adapter + ", and no signed-off baseline to compare with yet"
		default:
			n.Skipped[name] = "not reported by " + ran.Adapter
		}
		if detail[name] == "" {
			detail[name] = n.Skipped[name]
		}
	}
	for _, name := range slices.Sorted(maps.Keys(adapter.Ignored)) {
		if n.Ignored == nil {
			n.Ignored = map[string]string{}
		}
		n.Ignored[name] = fmt.Sprintf("%s printed %s for it; tribunal computes %s itself, as the seed's gates.sh does", ran.Adapter, adapter.Ignored[name], name)
		detail[name] += "; " + n.Ignored[name]
		detail[name] = strings.TrimPrefix(detail[name], "; ")
	}
	if len(n.Skipped) == 0 {
		n.Skipped = nil
	}
	return n
}
