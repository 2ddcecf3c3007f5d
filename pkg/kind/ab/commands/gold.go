package commands

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab/calibration"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// ExportGold writes the batch's reviewed ab ACs into dir as a calibration set that
// calibrate reads: batch.yaml (each AC's criterion and both artifacts, copied from blob
// storage under artifacts/<ac>/), expectations.yaml (the people's un-shuffled answer,
// tests clear-win, or near-identical for a tie) and thresholds.yaml (every figure
// reported, none checked until the team sets its marks). An AC whose reviewers disagree
// has no known answer and is left out, as is one whose artifacts cannot be read: each is
// in the returned Skipped with why. With nothing to write it writes no file.
func ExportGold(ctx context.Context, store blob.Store, jobs []*records.Job, dir string) (stage.GoldExport, error) {
	slices.SortFunc(jobs, func(a, b *records.Job) int { return a.Index - b.Index })
	type entry struct {
		ID        string  `yaml:"id"`
		Criterion string  `yaml:"criterion"`
		Ours      string  `yaml:"ours"`
		Reference string  `yaml:"reference"`
		Threshold float64 `yaml:"-"`
	}
	type expectation struct {
		Answer string `yaml:"answer"`
		Tests  string `yaml:"tests"`
		Why    string `yaml:"why"`
	}
	var acs []entry
	pairs := map[string]expectation{}
	var order []string
	var skipped []stage.GoldSkip
	for _, j := range jobs {
		if j.Spec.Kind != events.KindAB || len(j.Reviews) == 0 {
			continue
		}
		if ab.SpecOf(j.Spec.KindPart) == nil {
			skipped = append(skipped, stage.GoldSkip{AC: j.ACID, Why: "its record holds no ab spec (ours and reference)"})
			continue
		}
		label := j.Reviews[0].Person.Label
		agreed := true
		var who []string
		for _, r := range j.Reviews {
			agreed = agreed && r.Person.Label == label
			who = append(who, r.By)
		}
		if !agreed {
			skipped = append(skipped, stage.GoldSkip{AC: j.ACID, Why: "its reviewers disagree, so it has no known answer"})
			continue
		}
		write := func(side string, s events.Source) (string, error) {
			if s.Blob == nil {
				if s.URL != "" {
					return s.URL, nil
				}
				return "", fmt.Errorf("%s has no %s artifact", j.ACID, side)
			}
			data, _, err := blob.ReadAll(ctx, store, blob.Ref{Tenant: j.Tenant, SHA256: s.Blob.SHA256})
			if err != nil {
				return "", fmt.Errorf("%s: %s artifact: %w", j.ACID, side, err)
			}
			rel := filepath.Join("artifacts", j.ACID, side+filepath.Ext(s.Name))
			if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o755); err != nil {
				return "", err
			}
			return filepath.ToSlash(rel), os.WriteFile(filepath.Join(dir, rel), data, 0o644)
		}
		ours, err := write("ours", ab.SpecOf(j.Spec.KindPart).Ours)
		if err != nil {
			skipped = append(skipped, stage.GoldSkip{AC: j.ACID, Why: "an artifact cannot be read"})
			slog.Warn("export-gold: left out", "ac", j.ACID, "err", err)
			continue
		}
		ref, err := write("reference", ab.SpecOf(j.Spec.KindPart).Reference)
		if err != nil {
			skipped = append(skipped, stage.GoldSkip{AC: j.ACID, Why: "an artifact cannot be read"})
			slog.Warn("export-gold: left out", "ac", j.ACID, "err", err)
			continue
		}
		tests := calibration.ClearWin
		if label == string(ab.WinnerTie) {
			tests = calibration.NearIdentical
		}
		acs = append(acs, entry{ID: j.ACID, Criterion: j.Spec.Criterion, Ours: ours, Reference: ref})
		pairs[j.ACID] = expectation{Answer: label, Tests: tests, Why: "reviewed by " + strings.Join(who, ", ")}
		order = append(order, j.ACID)
	}
	if len(acs) == 0 {
		return stage.GoldExport{Skipped: skipped}, nil
	}
	b, err := yaml.Marshal(struct {
		Version int     `yaml:"version"`
		Name    string  `yaml:"name"`
		ACs     []entry `yaml:"acs"`
	}{1, "gold", acs})
	if err != nil {
		return stage.GoldExport{}, err
	}
	var exp yaml.Node
	exp.Kind = yaml.MappingNode
	for _, id := range order {
		var k, v yaml.Node
		k.SetString(id)
		if err := v.Encode(pairs[id]); err != nil {
			return stage.GoldExport{}, err
		}
		exp.Content = append(exp.Content, &k, &v)
	}
	e, err := yaml.Marshal(struct {
		Version int        `yaml:"version"`
		Pairs   *yaml.Node `yaml:"pairs"`
	}{1, &exp})
	if err != nil {
		return stage.GoldExport{}, err
	}
	files := map[string][]byte{
		"batch.yaml":        append([]byte("# A gold set from people's reviews (tribunal review --export-gold).\n"), b...),
		"expectations.yaml": append([]byte("# The reviewers' answers: the known answer of each AC.\n"), e...),
		"thresholds.yaml":   []byte("# Set the team's pass marks here (docs/judging.md, \"Thresholds\"); every figure is reported.\nversion: 1\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return stage.GoldExport{}, fmt.Errorf("export-gold: %w", err)
		}
	}
	return stage.GoldExport{Written: len(acs), Skipped: skipped}, nil
}
