package commands

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

	calibrationset "github.com/tribunal-dev/tribunal/examples/calibration"
	"github.com/tribunal-dev/tribunal/internal/cli"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab/calibration"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/stats"
	"github.com/tribunal-dev/tribunal/pkg/trust"
	"github.com/tribunal-dev/tribunal/pkg/trust/collect"
)

// scriptedWinnerFlag is the flag of ab's fixture of the offline judge (kind.Fixtured).
const scriptedWinnerFlag = "scripted-winner"

// defaultCalibrationSet is the set shipped with tribunal, relative to the repository.
const defaultCalibrationSet = "examples/calibration"

type calibrateFlags struct {
	thresholds   string
	expectations string
	asJSON       bool
	quiet        bool
	concurrency  int
	timeout      time.Duration
	judge        stage.Judge
}

// newCalibrateCmd is `tribunal calibrate`, judging the set with the judge the CLI's
// flags configure (env.JudgeFlags).
func newCalibrateCmd(env stage.CommandEnv) *cobra.Command {
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
					return cli.Exit(2, fmt.Errorf("the shipped calibration set: %w", err))
				}
				dir = tmp
				if !f.quiet && !f.asJSON {
					fmt.Fprintf(os.Stderr, "calibration set: the shipped one (%s, from the binary)\n", defaultCalibrationSet)
				}
			}
			if f.judge.ScriptedByFixtures() && !cmd.Flags().Changed(scriptedWinnerFlag) {
				// The set's recorded answers only (calibrate picks them up): a pair without
				// one is then missing, not silently answered A.
				f.judge.SetFixture(scriptedWinnerFlag, "")
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
	f.judge = env.JudgeFlags(fs)
	return cmd
}

// calibrate runs the set at dir with the configured judge and scores it.
func calibrate(ctx context.Context, w io.Writer, f *calibrateFlags, dir string) error {
	b, err := batch.Load(dir)
	if err != nil {
		return cli.Exit(2, fmt.Errorf("calibration set: %w", err))
	}
	if len(b.Rejected) > 0 {
		return cli.Exit(2, fmt.Errorf("calibration set %s: %w", b.Path, b.Rejected[0]))
	}
	e, err := calibration.LoadExpectations(cmp.Or(f.expectations, filepath.Join(b.Dir, "expectations.yaml")))
	if err != nil {
		return cli.Exit(2, err)
	}
	th, err := calibration.LoadThresholds(cmp.Or(f.thresholds, filepath.Join(b.Dir, "thresholds.yaml")))
	if err != nil {
		return cli.Exit(2, err)
	}
	var acs []calibration.BatchAC
	for _, ac := range b.ACs {
		if ac.Problem() != "" {
			return cli.Exit(2, fmt.Errorf("calibration set: %s", ac.Problem()))
		}
		e, _ := ac.Part.(*ab.Entry)
		d, _ := b.Part(string(events.KindAB)).(*ab.Defaults)
		acs = append(acs, calibration.BatchAC{ID: ac.ID, Swap: ab.PositionsOf(e, d) == events.PositionsSwap})
	}
	if err := e.CheckBatch(acs); err != nil {
		return cli.Exit(2, err)
	}
	if f.judge.ScriptedByFixtures() {
		// The set's recorded answers, so the command runs offline as shipped.
		if p := filepath.Join(b.Dir, "answers.json"); fileExists(p) {
			f.judge.UseAnswers(p)
		}
	}
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	jobs, err := f.judge.JudgeBatch(ctx, b, f.concurrency, f.quiet || f.asJSON)
	if err != nil {
		return err
	}
	slices.SortFunc(jobs, func(a, b *records.Job) int { return a.Index - b.Index })
	var js []trust.Judgment
	for _, j := range jobs {
		js = append(js, collect.Judgments(j, trust.Lengths{})...)
	}
	res := calibration.Score(e, js, th, stats.Z95)
	if f.asJSON {
		if err := cli.WriteJSON(w, res); err != nil {
			return err
		}
	} else {
		printCalibration(w, b.Path, len(e.Pairs), res)
	}
	if !res.Pass {
		return cli.Exit(1, nil)
	}
	return nil
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
