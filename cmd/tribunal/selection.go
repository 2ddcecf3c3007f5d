package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	rubricstages "github.com/tribunal-dev/tribunal/pkg/kind/rubric/stages"
)

// selectRun narrows a run's batch to what --ac and --target (--screen) name, checked
// against the features' specs before anything is submitted: an AC id keeps the AC, a
// rubric view's job id keeps that view alone, and a target id keeps that target's views
// of every feature that has it (seed 004: `target:` converges one target of a feature).
func selectRun(b *batch.Batch, acs, targets []string, allowOutside bool) error {
	if len(acs) > 0 {
		if err := b.Select(acs); err != nil {
			return err
		}
	}
	if len(targets) > 0 {
		err := b.SelectTargets(targets, func(ac batch.AC) ([]string, error) {
			t, _, err := rubricstages.Selection(b, ac, allowOutside)
			return t, err
		})
		if err != nil {
			return err
		}
	}
	for _, ac := range b.ACs {
		if len(ac.Views) == 0 {
			continue
		}
		_, views, err := rubricstages.Selection(b, ac, allowOutside)
		if err != nil {
			// The AC is reported blocked with its spec's problem.
			continue
		}
		for _, v := range ac.Views {
			if !slices.Contains(views, v) {
				return fmt.Errorf("%s: --ac %s: AC %s has no such view (its views: %s)", b.Path, v, ac.ID, strings.Join(views, ", "))
			}
		}
	}
	return nil
}
