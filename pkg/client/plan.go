package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tribunal-dev/tribunal/pkg/ab"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// DefaultMinCases is the transfer-set size below which equivalence coverage is flagged.
const DefaultMinCases = 4

// MissingInput is the blocked reason of a critic AC without a task or an output.
const MissingInput = "missing input"

// plan is what one AC needs before its job can be built: the artifacts to upload and a
// builder that turns the uploads into its spec. An AC with a problem still builds a spec:
// its sources carry the problem, so the AC is blocked with it rather than dropped.
type plan struct {
	// jobID is the job's id: the AC id, or "<AC>--<view>" for a rubric view.
	jobID string
	ac    batch.AC
	names []string
	build func(uploads map[string]events.Source) events.JobSpec
}

func (s *Submitter) plan(ctx context.Context, b *batch.Batch, tenant string, ac batch.AC, threshold float64, verify map[string]ab.Pair, verr error) (plan, error) {
	// problem is what is wrong with the entry itself; the job carries it as its Problem
	// (the renderer blocks with it as it is) and on its sources.
	problem := ac.Problem
	spec := events.JobSpec{Kind: b.KindOf(ac), ACID: ac.ID, Criterion: ac.Criterion}
	blocked := func(name, reason string) events.Source {
		spec.Problem = reason
		return events.Source{Name: firstNonEmpty(name, "(none)"), Error: reason}
	}
	switch spec.Kind {
	case events.KindCritic:
		cs := &events.CriticSpec{Task: ac.Task}
		var names []string
		switch {
		case problem != "":
			cs.Output = blocked(ac.OutputFile, problem)
		case strings.TrimSpace(ac.Task) == "" || (strings.TrimSpace(ac.Output) == "" && ac.OutputFile == ""):
			cs.Output = blocked(ac.OutputFile, MissingInput)
		case ac.OutputFile != "":
			names = []string{ac.OutputFile}
		default:
			attrs, err := blob.PutBytes(ctx, s.Store, tenant, []byte(ac.Output), "text/plain")
			if err != nil {
				return plan{}, fmt.Errorf("AC %s: store inline output: %w", ac.ID, err)
			}
			cs.Output = events.Source{Name: "(inline output)", Blob: &events.Blob{SHA256: attrs.Ref.SHA256, MediaType: "text/plain", Size: attrs.Size}}
		}
		return plan{names: names, build: func(up map[string]events.Source) events.JobSpec {
			if len(names) == 1 {
				cs.Output = up[names[0]]
			}
			spec.Critic = cs
			return spec
		}}, nil

	case events.KindEquivalence:
		es := &events.EquivalenceSpec{Variant: firstNonEmpty(ac.Variant, events.VariantSkill), Round: max(ac.Round, 1),
			MinCases: firstPositive(ac.MinCases, b.MinCases, DefaultMinCases), RunnerModel: firstNonEmpty(ac.RunnerModel, b.RunnerModel)}
		cases, cerr := loadCases(b, ac)
		if problem == "" && cerr != nil {
			problem = EntryProblem(ac, cerr.Error())
		}
		if problem == "" && (ac.Original == "" || ac.Candidate == "") {
			problem = EntryProblem(ac, "missing input: an equivalence AC needs original and candidate")
		}
		if problem != "" {
			es.Original, es.Candidate = blocked(ac.Original, problem), blocked(ac.Candidate, problem)
			return plan{build: func(map[string]events.Source) events.JobSpec { spec.Equivalence = es; return spec }}, nil
		}
		es.Cases = cases
		return plan{names: []string{ac.Original, ac.Candidate}, build: func(up map[string]events.Source) events.JobSpec {
			es.Original, es.Candidate = up[ac.Original], up[ac.Candidate]
			spec.Equivalence = es
			return spec
		}}, nil

	case events.KindAB:
		as := &events.ABSpec{Threshold: threshold, Positions: firstNonEmpty(ac.Positions, b.Positions, "single"), Judges: ac.Judges}
		if len(as.Judges) == 0 {
			as.Judges = b.Judges
		}
		if problem == "" && verr != nil {
			problem = "verify map unusable: " + verr.Error()
		}
		pair, _, rerr := ab.Resolve(ac.ID, ab.Pair{Ours: ac.Ours, Reference: ac.Reference}, verify)
		if problem == "" && rerr != nil {
			problem = EntryProblem(ac, rerr.Error())
		}
		if problem != "" {
			as.Ours = blocked(firstNonEmpty(pair.Ours, ac.Ours), problem)
			as.Reference = blocked(firstNonEmpty(pair.Reference, ac.Reference), problem)
			return plan{build: func(map[string]events.Source) events.JobSpec { spec.AB = as; return spec }}, nil
		}
		return plan{names: []string{pair.Ours, pair.Reference}, build: func(up map[string]events.Source) events.JobSpec {
			as.Ours, as.Reference = up[pair.Ours], up[pair.Reference]
			spec.AB = as
			return spec
		}}, nil
	}
	return plan{}, fmt.Errorf("%s: %s", b.Path, EntryProblem(ac, fmt.Sprintf("unsupported kind %q", spec.Kind)))
}

// EntryProblem says what is wrong with an AC's entry and where, the way the batch
// parser does: "AC-12: line 40: missing input: ...".
func EntryProblem(ac batch.AC, what string) string {
	return fmt.Sprintf("%s: line %d: %s", ac.ID, ac.Line, what)
}

// loadCases returns an equivalence AC's transfer set, inline or from its cases file.
func loadCases(b *batch.Batch, ac batch.AC) ([]events.Case, error) {
	list := ac.Cases
	if ac.CasesFile != "" {
		if len(list) > 0 {
			return nil, fmt.Errorf("give cases or cases_file, not both")
		}
		p, err := b.LocalPath(ac.CasesFile, false)
		if err != nil {
			return nil, fmt.Errorf("cases_file: %w", err)
		}
		data, err := os.ReadFile(p)
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

func firstPositive(v ...int) int {
	for _, x := range v {
		if x > 0 {
			return x
		}
	}
	return 0
}
