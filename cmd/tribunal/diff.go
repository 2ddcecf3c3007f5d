package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/cireport"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/verdicts"
)

func newDiffCmd() *cobra.Command {
	var conn connFlags
	var tenant, format string
	var asJSON bool
	var failOn []string
	cmd := &cobra.Command{
		Use:   "diff <base> <new>",
		Short: "Compare two batches AC by AC: regressions, improvements and unchanged verdicts, with scores",
		Long: `diff compares the results of a base batch (the main branch's, last week's) with a new one,
AC by AC over their ids, and lists which ACs regressed, improved or stayed, with each
one's grade, outcome and score before and after, and the ACs only one batch holds.

Each side is a results.json file (as tribunal run writes it under out/<batch>/), a folder
holding one (out/<batch>), an --out folder holding one batch's folder, or a batch id read
from the state (the folder tribunal run keeps, or --nats): so a pipeline can compare its
run with the base branch's artifact on another machine.

An AC's grade is clean, polish, fix or block (a finding by its route), blocked, or
schema_violation, in that order; getting worse is a regression, the rule the console's
compare page uses too. The score is in [0, 1], higher better for ours: ab (1 +
confidence) / 2 when ours won, (1 - confidence) / 2 when the reference did, 0.5 a tie; a
critic's quality / 10; equivalence pass 1, fail 0.

It exits 1 when a regression lands on a grade --fail-on names (by default any
regression), 0 otherwise, and 2 when a side cannot be read.`,
		Example: `  tribunal diff base/results.json out/quickstart-20261130T080000-a1b2c3/results.json
  tribunal diff quickstart-20261129T080000-0a1b2c quickstart-20261130T080000-a1b2c3 --format markdown > comment.md
  tribunal diff base/out out --fail-on block,blocked,schema_violation --json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := verdicts.ParsePolicy(failOn)
			if err != nil {
				return exitError{2, err}
			}
			if asJSON {
				format = "json"
			}
			switch format {
			case "text", "markdown", "json":
			default:
				return exitError{2, fmt.Errorf("--format %q: want text, markdown or json", format)}
			}
			if !cmd.Flags().Changed("tenant") {
				tenant = ""
			}
			var st *diffState
			defer func() { st.close() }()
			sides := make([]*client.Results, 2)
			refs := make([]cireport.BatchRef, 2)
			for i, arg := range args {
				res, from, err := loadDiffSide(cmd.Context(), &conn, &st, tenant, arg)
				if err != nil {
					return exitError{2, fmt.Errorf("%s %s: %w", []string{"base", "new"}[i], arg, err)}
				}
				sides[i] = res
				refs[i] = cireport.BatchRef{Tenant: res.Tenant, BatchID: res.BatchID, Source: res.Source, From: from}
			}
			d := cireport.NewDiff(refs[0], refs[1], verdicts.Compare(sides[0].Rows, sides[1].Rows), p)
			w := cmd.OutOrStdout()
			switch format {
			case "json":
				err = writeJSON(w, d)
			case "markdown":
				err = d.WriteMarkdown(w)
			default:
				err = d.WriteText(w)
			}
			if err != nil {
				return err
			}
			if len(d.Failing) > 0 {
				return exitError{code: 1}
			}
			return nil
		},
	}
	conn.register(cmd.Flags())
	conn.registerLocal(cmd.Flags(), "diff")
	cmd.Flags().StringVar(&tenant, "tenant", "default", "tenant of the batches named by id (default the one whose state holds each)")
	cmd.Flags().StringVar(&format, "format", "text", "output: text, markdown (a pull-request comment) or json")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the diff as JSON (--format json)")
	cmd.Flags().StringSliceVar(&failOn, "fail-on", nil, "exit 1 only for regressions to these grades: "+verdicts.PolicyValues+" (default: any regression)")
	return cmd
}

// diffState is the state a diff opened to read a side given by batch id, once for both.
type diffState struct {
	env *clientEnv
	b   bus.Buckets
}

func (s *diffState) close() {
	if s != nil && s.env != nil {
		s.env.close()
	}
}

// loadDiffSide reads one side of a diff: a results.json file, a folder holding one
// (directly or in its only batch folder), else a batch id from the state, opened once.
func loadDiffSide(ctx context.Context, conn *connFlags, st **diffState, tenant, arg string) (*client.Results, string, error) {
	if path, ok, err := findResultsJSON(arg); err != nil {
		return nil, "", err
	} else if ok {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, "", err
		}
		var res client.Results
		if err := json.Unmarshal(data, &res); err != nil {
			return nil, "", fmt.Errorf("%s: not a results.json: %w", path, err)
		}
		if res.BatchID == "" {
			return nil, "", fmt.Errorf("%s: not a results.json: no batch_id", path)
		}
		return &res, path, nil
	}
	if *st == nil {
		env, b, err := connectState(ctx, conn)
		if err != nil {
			var ee exitError
			if errors.As(err, &ee) {
				return nil, "", ee.err
			}
			return nil, "", err
		}
		*st = &diffState{env: env, b: b}
	}
	s := *st
	t, err := client.ResolveTenant(ctx, s.b, tenant, arg)
	if err != nil {
		return nil, "", err
	}
	res, err := client.Load(ctx, s.b, s.env.store, t, arg)
	if err != nil {
		return nil, "", fmt.Errorf("%w (not a results.json file or folder either)", err)
	}
	from := "the state"
	if conn.local != nil && conn.local.dataDir != "" {
		from = conn.local.dataDir
	}
	return res, from, nil
}

// findResultsJSON finds the results.json arg names: the file itself, a folder holding one, or
// a folder whose only subfolder holds one (an --out folder after one run). ok is false
// when arg is no path at all (a batch id).
func findResultsJSON(arg string) (path string, ok bool, err error) {
	st, err := os.Stat(arg)
	if err != nil {
		return "", false, nil
	}
	if !st.IsDir() {
		return arg, true, nil
	}
	if p := filepath.Join(arg, "results.json"); fileExists(p) {
		return p, true, nil
	}
	found, _ := filepath.Glob(filepath.Join(arg, "*", "results.json"))
	switch len(found) {
	case 1:
		return found[0], true, nil
	case 0:
		return "", false, fmt.Errorf("folder %s holds no results.json (nor does any folder in it)", arg)
	}
	return "", false, fmt.Errorf("folder %s holds %d batches' results.json: name one of them", arg, len(found))
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
