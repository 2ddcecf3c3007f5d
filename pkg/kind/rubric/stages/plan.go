package stages

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/localfile"
)

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// ViewJobID names the job of one rubric view.
func ViewJobID(acID string, v argus.View) string {
	id := acID + "--" + v.Target + "--" + v.State + "--" + v.Appearance
	id = unsafeName.ReplaceAllString(id, "_")
	if len(id) > 128 {
		id = id[:128]
	}
	return id
}

// Plan implements stage.Stages: a rubric AC is one job per view of its feature. A feature
// that cannot run (unreadable or invalid spec) is one blocked job named after the AC.
func (Kind) Plan(ctx context.Context, env *stage.PlanEnv, ac batch.AC) ([]stage.Plan, error) {
	b := env.Batch
	blocked := func(reason string) []stage.Plan {
		spec := events.JobSpec{Kind: events.KindRubric, ACID: ac.ID, KindPart: &rubricwire.Spec{Blocked: reason}}
		return []stage.Plan{{JobID: ac.ID, Build: func(map[string]events.Source) events.JobSpec { return spec }}}
	}
	// The entry itself is at fault: the job's Problem, which the renderer reports as is.
	entryBlocked := func(reason string) []stage.Plan {
		spec := events.JobSpec{Kind: events.KindRubric, ACID: ac.ID, KindPart: &rubricwire.Spec{Blocked: reason}, Problem: reason}
		return []stage.Plan{{JobID: ac.ID, Build: func(map[string]events.Source) events.JobSpec { return spec }}}
	}
	if ac.Problem() != "" {
		return entryBlocked(ac.Problem()), nil
	}
	e := entryOf(ac)
	if e.Spec == "" {
		return entryBlocked(stage.Problem(ac, "missing input: a rubric AC needs spec")), nil
	}
	path, err := b.LocalPath(e.Spec, env.AllowOutside)
	if err != nil {
		return blocked("invalid spec: " + err.Error()), nil
	}
	dir := path
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		dir = filepath.Dir(path)
	}
	// Design-system paths resolve like the seed's gates.sh (repository-relative first,
	// then the feature folder), never above the batch folder or the repository root.
	// The project root (the folder holding argus/) is where the seed's loop runs from.
	root, _, _ := argus.ProjectRoot(dir)
	f, err := argus.LoadFeature(dir, b.Dir, argus.RepoRoot(dir), root)
	if err != nil {
		return blocked("invalid spec: " + err.Error()), nil
	}
	project, err := projectOf(dir, f.Spec.Adapter)
	if err != nil {
		return blocked("invalid spec: " + err.Error()), nil
	}
	put := func(data []byte, mediaType string) (events.Blob, error) {
		a, err := blob.PutBytes(ctx, env.Store, env.Tenant, data, mediaType)
		if err != nil {
			return events.Blob{}, fmt.Errorf("AC %s: store feature file: %w", ac.ID, err)
		}
		return events.Blob{SHA256: a.Ref.SHA256, MediaType: mediaType, Size: a.Size}, nil
	}
	read := func(rel string) ([]byte, error) {
		p, err := f.Path(rel)
		if err != nil {
			return nil, err
		}
		return localfile.ReadFile(ctx, p)
	}
	docs := map[string][]byte{}
	for name, p := range map[string]string{"spec": filepath.Join(f.Dir, argus.SpecFile), "text": filepath.Join(f.Dir, argus.SpecTextFile),
		"tokens": f.TokensPath, "pairs": f.PairsPath} {
		if p == "" {
			continue
		}
		data, err := localfile.ReadFile(ctx, p)
		if err != nil {
			return blocked(fmt.Sprintf("invalid spec: %s: %v", p, err)), nil
		}
		docs[name] = data
	}
	rubricJSON := argus.DefaultRubricJSON()
	if f.RubricLocal {
		if rubricJSON, err = read("rubric.json"); err != nil {
			return blocked("invalid spec: rubric.json: " + err.Error()), nil
		}
	}
	base := rubricwire.Spec{Feature: f.Spec.Feature, Adapter: f.Spec.Adapter, Mode: cmp.Or(e.Mode, env.DefaultMode, events.ModeHeadless),
		MaxIterations: e.MaxIterations, Width: 1440, Height: 900, Project: project}
	if argusRunsOf(b, ac) {
		// The seed's files go to the feature's .argus-runs/ too, written by the client
		// that holds the batch's folder; a folder outside it is not written to.
		bdir, berr := filepath.Abs(b.Dir)
		fdir, ferr := filepath.Abs(f.Dir)
		rel, err := filepath.Rel(bdir, fdir)
		if berr != nil || ferr != nil || err != nil || !filepath.IsLocal(rel) && rel != "." {
			return blocked(fmt.Sprintf("argus_runs: the feature folder %s is not inside the batch folder %s", f.Dir, b.Dir)), nil
		}
		base.Runs = filepath.ToSlash(filepath.Join(rel, ".argus-runs"))
	}
	if base.SpecJSON, err = put(docs["spec"], "application/json"); err != nil {
		return nil, err
	}
	if base.SpecText, err = put(docs["text"], "text/markdown"); err != nil {
		return nil, err
	}
	if base.Tokens, err = put(docs["tokens"], "application/json"); err != nil {
		return nil, err
	}
	if data, ok := docs["pairs"]; ok {
		pb, err := put(data, "application/json")
		if err != nil {
			return nil, err
		}
		base.Pairs = &pb
	}
	if base.Rubric, err = put(rubricJSON, "application/json"); err != nil {
		return nil, err
	}
	specFile := batchRelative(b.Dir, filepath.Join(f.Dir, argus.SpecFile))
	var out []stage.Plan
	for _, t := range f.Spec.Targets {
		if len(ac.Targets()) > 0 && !slices.Contains(ac.Targets(), t.ID) {
			continue
		}
		route, rerr := resolveRoute(env, f, f.Spec.Adapter, t.Route)
		ref := t.CanonicalReference()
		var refBlob *events.Blob
		if ref.Status == "present" && ref.File != "" {
			data, err := read(ref.File)
			if err != nil {
				return blocked(fmt.Sprintf("invalid spec: reference %s: %v", ref.File, err)), nil
			}
			rb, err := put(data, "image/png")
			if err != nil {
				return nil, err
			}
			refBlob = &rb
		}
		for _, v := range t.Views() {
			jobID := ViewJobID(ac.ID, v)
			if len(ac.Views()) > 0 && !slices.Contains(ac.Views(), jobID) {
				continue
			}
			spec := base
			spec.Target, spec.State, spec.Appearance, spec.Fixture, spec.Canonical = v.Target, v.State, v.Appearance, v.Fixture, v.Canonical
			spec.Route, spec.ReferenceStatus, spec.ReferenceSource, spec.Reference = route, ref.Status, ref.EffectiveSource(), refBlob
			spec.A11yContract = t.A11yContract
			if v.Canonical && ref.Status == argus.RefNeeded && spec.Mode != events.ModeReportOnly {
				// HE-1: this view renders the target's candidate; the spec's entry is then
				// set to candidate (seed 004), by the client that holds the spec.
				if spec.SpecChange, err = candidateChange(docs["spec"], t.ID, specFile); err != nil {
					return blocked("invalid spec: " + err.Error()), nil
				}
			}
			if rerr != nil {
				spec = rubricwire.Spec{Blocked: rerr.Error()}
			}
			out = append(out, stage.Plan{JobID: jobID, Build: func(map[string]events.Source) events.JobSpec {
				js := spec
				return events.JobSpec{Kind: events.KindRubric, ACID: jobID, Criterion: "", KindPart: &js}
			}})
		}
	}
	if len(out) == 0 {
		if len(ac.Targets()) > 0 || len(ac.Views()) > 0 {
			return blocked(fmt.Sprintf("the run's selection (targets %v, views %v) leaves no view of feature %s", ac.Targets(), ac.Views(), f.Spec.Feature)), nil
		}
		return blocked("invalid spec: no views to judge"), nil
	}
	return out, nil
}

// candidateChange is the planned HE-1 change to spec.json for target (argus.CandidateChange),
// nil when there is none to make.
func candidateChange(specJSON []byte, target, file string) (*rubricwire.SpecChange, error) {
	c, ok, err := argus.CandidateChange(specJSON, target)
	if err != nil || !ok {
		return nil, err
	}
	patch, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("spec change of target %s: %w", target, err)
	}
	return &rubricwire.SpecChange{File: file, Patch: string(patch)}, nil
}

// batchRelative is p relative to the batch folder dir, slash-separated, "" when p is not
// inside it: a client writes only inside the batch's folder.
func batchRelative(dir, p string) string {
	bdir, berr := filepath.Abs(dir)
	abs, perr := filepath.Abs(p)
	rel, err := filepath.Rel(bdir, abs)
	if berr != nil || perr != nil || err != nil || !filepath.IsLocal(rel) {
		return ""
	}
	return filepath.ToSlash(rel)
}

// Selection is what a run may select of a rubric AC (`--target`, `--ac <view id>`): its
// feature's target ids and its views' job ids, read from its spec.json before anything is
// submitted.
func Selection(b *batch.Batch, ac batch.AC, allowOutside bool) (targets, views []string, err error) {
	return Kind{}.Selection(b, ac, allowOutside)
}

// Selection is what a run may select of a rubric AC (stage.Selecting): its feature's target
// ids and its views' job ids.
func (Kind) Selection(b *batch.Batch, ac batch.AC, allowOutside bool) (targets, views []string, err error) {
	p, err := b.LocalPath(entryOf(ac).Spec, allowOutside)
	if err != nil {
		return nil, nil, err
	}
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		p = filepath.Join(p, argus.SpecFile)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, nil, fmt.Errorf("AC %s: %w", ac.ID, err)
	}
	s, err := argus.ParseSpec(data)
	if err != nil {
		return nil, nil, fmt.Errorf("AC %s: %s: %w", ac.ID, p, err)
	}
	for _, t := range s.Targets {
		targets = append(targets, t.ID)
		for _, v := range t.Views() {
			views = append(views, ViewJobID(ac.ID, v))
		}
	}
	return targets, views, nil
}

// resolveRoute resolves a target's route for the renderer. Routes are opaque to tribunal
// (the seed's spec schema: "Opaque to the loop; interpreted by the adapter"), so for a
// command adapter the route goes exactly as written (`app://feature/target` for the
// seed's iOS recipe). Only the built-in web sensor interprets routes: a URL as it is, and
// a path inside the feature folder through ServeFeature (the all-in-one mode serves the
// folder on loopback); any other web route cannot be reached by a renderer.
func resolveRoute(env *stage.PlanEnv, f *argus.Feature, adapter, r string) (string, error) {
	if adapter != argus.AdapterWeb {
		return r, nil
	}
	if batch.IsURL(r) {
		return r, nil
	}
	if env.ServeFeature == nil {
		return "", fmt.Errorf("route %q is not a URL the web sensor can reach (only `tribunal run` serves feature folders)", r)
	}
	if _, err := f.Path(strings.SplitN(r, "?", 2)[0]); err != nil {
		return "", fmt.Errorf("route %q: %w", r, err)
	}
	baseURL, err := env.ServeFeature(f.Dir)
	if err != nil {
		return "", fmt.Errorf("serve feature %s: %w", f.Dir, err)
	}
	return strings.TrimSuffix(baseURL, "/") + "/" + strings.TrimPrefix(r, "/"), nil
}
