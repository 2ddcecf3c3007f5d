package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	calibrationset "github.com/tribunal-dev/tribunal/examples/calibration"
	"github.com/tribunal-dev/tribunal/pkg/artifact"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab/calibration"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/stats"
	"github.com/tribunal-dev/tribunal/pkg/trust"
	"github.com/tribunal-dev/tribunal/pkg/trust/collect"
)

// defaultCalibrationSet is the set shipped with tribunal, relative to the repository.
const defaultCalibrationSet = "examples/calibration"

type calibrateFlags struct {
	thresholds   string
	expectations string
	asJSON       bool
	quiet        bool
	concurrency  int
	timeout      time.Duration
	judge        judgeFlags
}

func newCalibrateCmd() *cobra.Command {
	f := &calibrateFlags{}
	cmd := &cobra.Command{
		Use:   "calibrate [set]",
		Short: "Measure a judge on a calibration set with known answers; exit 1 when it falls below the thresholds",
		Long: `calibrate runs a calibration set (a batch whose right answers are known, examples/calibration
by default) through the all-in-one mode with the configured judge, like tribunal run, and
scores the judge's answers against the set's expectations.yaml: accuracy, tie discipline,
order consistency, length bias and injection resistance, each with a Wilson interval
(docs/judging.md, "Calibrating a judge"). The thresholds file (the set's thresholds.yaml
unless --thresholds names another) says what the team accepts, and each mark is held to
the interval, not the point estimate: a minimum passes when the interval's lower bound
reaches it, a maximum when its upper bound stays within it. Outside a checkout the shipped
set comes from the binary.

With the scripted judge and no --scripted-answers, the set's recorded answers.json is used.

Exit code 0: the judge passed every threshold; 1: it failed, and the report says why;
2: the set, the thresholds or the judge could not be used.`,
		Example: `  # before trusting a new model
  OPENAI_API_KEY=... tribunal calibrate --judge openai --judge-model gpt-4o-mini

  # a team's own set and pass marks
  tribunal calibrate ./our-calibration --thresholds ./our-calibration/strict.yaml --judge openai --judge-model gpt-4o --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := defaultCalibrationSet
			if len(args) == 1 {
				dir = args[0]
			} else if _, err := os.Stat(dir); err != nil {
				// Outside a checkout: the shipped set, from the binary.
				tmp, err := os.MkdirTemp("", "tribunal-calibration-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				if err := os.CopyFS(tmp, calibrationset.Files); err != nil {
					return exitError{2, fmt.Errorf("the shipped calibration set: %w", err)}
				}
				dir = tmp
				if !f.quiet && !f.asJSON {
					fmt.Fprintf(os.Stderr, "calibration set: the shipped one (%s, from the binary)\n", defaultCalibrationSet)
				}
			}
			if f.judge.provider == "scripted" && f.judge.scriptedAnswers == "" && !cmd.Flags().Changed("scripted-winner") {
				// The set's recorded answers only (calibrate picks them up): a pair without
				// one is then missing, not silently answered A.
				f.judge.setFixture("scripted-winner", "")
			}
			return calibrate(cmd.Context(), cmd.OutOrStdout(), f, dir)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.thresholds, "thresholds", "", "the pass marks (YAML or JSON; default the set's thresholds.yaml)")
	fs.StringVar(&f.expectations, "expectations", "", "the known answers (default the set's expectations.yaml)")
	fs.BoolVar(&f.asJSON, "json", false, "print the calibration as JSON")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress output")
	fs.IntVar(&f.concurrency, "concurrency", 64, "messages in flight per service")
	fs.DurationVar(&f.timeout, "timeout", 0, "give up after this long (0: no limit)")
	f.judge.register(fs)
	return cmd
}

// calibrate runs the set at dir with the configured judge and scores it.
func calibrate(ctx context.Context, w io.Writer, f *calibrateFlags, dir string) error {
	b, err := batch.Load(dir)
	if err != nil {
		return exitError{2, fmt.Errorf("calibration set: %w", err)}
	}
	if len(b.Rejected) > 0 {
		return exitError{2, fmt.Errorf("calibration set %s: %w", b.Path, b.Rejected[0])}
	}
	e, err := calibration.LoadExpectations(cmp.Or(f.expectations, filepath.Join(b.Dir, "expectations.yaml")))
	if err != nil {
		return exitError{2, err}
	}
	th, err := calibration.LoadThresholds(cmp.Or(f.thresholds, filepath.Join(b.Dir, "thresholds.yaml")))
	if err != nil {
		return exitError{2, err}
	}
	var acs []calibration.BatchAC
	for _, ac := range b.ACs {
		if ac.Problem != "" {
			return exitError{2, fmt.Errorf("calibration set: %s", ac.Problem)}
		}
		acs = append(acs, calibration.BatchAC{ID: ac.ID, Swap: cmp.Or(ac.Positions, b.Positions) == events.PositionsSwap})
	}
	if err := e.CheckBatch(acs); err != nil {
		return exitError{2, err}
	}
	if f.judge.provider == "scripted" && f.judge.scriptedAnswers == "" {
		// The set's recorded answers, so the command runs offline as shipped.
		if p := filepath.Join(b.Dir, "answers.json"); fileExists(p) {
			f.judge.scriptedAnswers = p
		}
	}
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	jobs, err := judgeOffline(ctx, b, f.concurrency, &f.judge, f.quiet || f.asJSON)
	if err != nil {
		return err
	}
	slices.SortFunc(jobs, func(a, b *records.Job) int { return a.Index - b.Index })
	var js []trust.Judgment
	for _, j := range jobs {
		js = append(js, collect.Judgments(j, collect.Lengths{})...)
	}
	res := calibration.Score(e, js, th, stats.Z95)
	if f.asJSON {
		if err := writeJSON(w, res); err != nil {
			return err
		}
	} else {
		printCalibration(w, b.Path, len(e.Pairs), res)
	}
	if !res.Pass {
		return exitError{code: 1}
	}
	return nil
}

// judgeOffline judges a batch in the all-in-one mode (an embedded NATS server and file
// storage in a temporary folder) and returns its final job records.
func judgeOffline(ctx context.Context, b *batch.Batch, concurrency int, jf *judgeFlags, quiet bool) ([]*records.Job, error) {
	dataDir, err := os.MkdirTemp("", "tribunal-calibrate-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dataDir)
	env, err := startEmbedded(ctx, dataDir, true, "", concurrency, jf, artifact.FetchOptions{}, nil, nil)
	if err != nil {
		return nil, exitError{2, err}
	}
	defer env.Close()
	sub := &client.Submitter{Pub: env.Running.Pub, Store: env.Store}
	s, err := sub.Submit(ctx, b, cmp.Or(b.Tenant, "default"), client.NewBatchID(b))
	if err != nil {
		return nil, err
	}
	progress := newProgress(os.Stderr, quiet)
	if _, err := client.Watch(ctx, env.Running.Buckets, s.Tenant, s.BatchID, 100*time.Millisecond, progress.report); err != nil {
		return nil, fmt.Errorf("calibration batch %s: %w", s.BatchID, err)
	}
	return records.New(env.Running.Buckets).LoadJobs(ctx, s.Tenant, s.BatchID)
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// printCalibration writes each judge's figures against the thresholds, its misses and
// the reasons it failed.
func printCalibration(w io.Writer, set string, pairs int, r calibration.Result) {
	for _, j := range r.Judges {
		verdict := "PASS"
		if !j.Pass {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "calibration of judge %s on %s (%d pairs): %s\n", j.Judge, set, pairs, verdict)
		for _, c := range j.Checks {
			mark := "(reported, no threshold)"
			if c.Threshold != nil {
				// The mark is held to the interval's bound, and the line says which.
				bound := "min"
				if c.Max {
					bound = "max"
				}
				mark = fmt.Sprintf("%s %g on the %s: %s", bound, *c.Threshold, map[bool]string{false: "lower bound", true: "upper bound"}[c.Max], c.Status)
			}
			fmt.Fprintf(w, "  %-21s %s  %s\n", c.Name, c.Value, mark)
		}
		fmt.Fprintf(w, "  false ties: %d; slot A picked %s of decided answers\n", j.FalseTies, j.PositionBias.SlotA)
		if len(j.Misses) > 0 {
			fmt.Fprintf(w, "  misses (%d):\n", len(j.Misses))
			for _, m := range j.Misses {
				fmt.Fprintf(w, "    %s %s (%s): want %s, got %s\n", m.AC, m.Order, m.Tests, m.Want, m.Got)
			}
		}
		if len(j.Reasons) > 0 {
			fmt.Fprintln(w, "  why it failed:")
			for _, reason := range j.Reasons {
				fmt.Fprintln(w, "    - "+reason)
			}
		}
	}
	switch {
	case r.Pass:
		fmt.Fprintln(w, "passed: every judge meets every threshold")
	default:
		fmt.Fprintln(w, "failed: "+strings.Join(r.Reasons, "; "))
	}
}

// exportGold writes the batch's reviewed ab ACs into dir as a calibration set that
// calibrate reads: batch.yaml (each AC's criterion and both artifacts, copied from blob
// storage under artifacts/<ac>/), expectations.yaml (the people's un-shuffled answer,
// tests clear-win, or near-identical for a tie) and thresholds.yaml (every figure
// reported, none checked until the team sets its marks). An AC whose reviewers disagree
// has no known answer and is left out, as is one whose artifacts cannot be read. It
// returns how many ACs it wrote.
func exportGold(ctx context.Context, store blob.Store, jobs []*records.Job, dir string) (int, error) {
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
	var skipped []string
	for _, j := range jobs {
		if j.Spec.Kind != events.KindAB || ab.SpecOf(j.Spec.KindPart) == nil || len(j.Reviews) == 0 {
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
			skipped = append(skipped, j.ACID+" (its reviewers disagree)")
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
			skipped = append(skipped, err.Error())
			continue
		}
		ref, err := write("reference", ab.SpecOf(j.Spec.KindPart).Reference)
		if err != nil {
			skipped = append(skipped, err.Error())
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
		return 0, fmt.Errorf("export-gold: no reviewed ab AC to write%s", strings.Join(append([]string{""}, skipped...), "; "))
	}
	b, err := yaml.Marshal(struct {
		Version int     `yaml:"version"`
		Name    string  `yaml:"name"`
		ACs     []entry `yaml:"acs"`
	}{1, "gold", acs})
	if err != nil {
		return 0, err
	}
	var exp yaml.Node
	exp.Kind = yaml.MappingNode
	for _, id := range order {
		var k, v yaml.Node
		k.SetString(id)
		if err := v.Encode(pairs[id]); err != nil {
			return 0, err
		}
		exp.Content = append(exp.Content, &k, &v)
	}
	e, err := yaml.Marshal(struct {
		Version int        `yaml:"version"`
		Pairs   *yaml.Node `yaml:"pairs"`
	}{1, &exp})
	if err != nil {
		return 0, err
	}
	files := map[string][]byte{
		"batch.yaml":        append([]byte("# A gold set from people's reviews (tribunal review --export-gold).\n"), b...),
		"expectations.yaml": append([]byte("# The reviewers' answers: the known answer of each AC.\n"), e...),
		"thresholds.yaml":   []byte("# Set the team's pass marks here (docs/judging.md, \"Thresholds\"); every figure is reported.\nversion: 1\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return 0, fmt.Errorf("export-gold: %w", err)
		}
	}
	for _, s := range skipped {
		fmt.Fprintln(os.Stderr, "export-gold: left out "+s)
	}
	return len(acs), nil
}
