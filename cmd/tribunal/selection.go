package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/registry"
)

// selectRun narrows a run's batch to what --ac and --target (--screen) name, checked
// against the features' specs before anything is submitted: an AC id keeps the AC, a
// rubric view's job id keeps that view alone, and a target id keeps that target's views
// of every feature that has it (seed 004: `target:` converges one target of a feature).
// What an entry offers to select is its kind's (stage.Selecting).
func selectRun(b *batch.Batch, acs, targets []string, allowOutside bool) error {
	if len(acs) > 0 {
		if err := b.Select(acs, parted(b)); err != nil {
			return err
		}
	}
	if len(targets) > 0 {
		err := b.SelectTargets(targets, func(ac batch.AC) ([]string, bool, error) {
			sk, ok := selecting(b, ac)
			if !ok {
				return nil, false, nil
			}
			t, _, err := sk.Selection(b, ac, allowOutside)
			return t, true, err
		})
		if err != nil {
			return err
		}
	}
	for _, ac := range b.ACs {
		if len(ac.Views()) == 0 {
			continue
		}
		sk, ok := selecting(b, ac)
		if !ok {
			continue
		}
		_, views, err := sk.Selection(b, ac, allowOutside)
		if err != nil {
			// The AC is reported blocked with its spec's problem.
			continue
		}
		for _, v := range ac.Views() {
			if !slices.Contains(views, v) {
				return fmt.Errorf("%s: --ac %s: AC %s has no such view (its views: %s)", b.Path, v, ac.ID, strings.Join(views, ", "))
			}
		}
	}
	return nil
}

// parted says which of b's entries have parts --ac may name by their job ids: those of a
// kind a run can narrow (stage.Selecting), for batch.Select.
func parted(b *batch.Batch) func(batch.AC) bool {
	return func(ac batch.AC) bool {
		_, ok := selecting(b, ac)
		return ok
	}
}

// selecting is the kind of ac when a run can narrow its entries.
func selecting(b *batch.Batch, ac batch.AC) (stage.Selecting, bool) {
	k, err := registry.Lookup(events.Kind(b.KindOf(ac)))
	if err != nil {
		return nil, false
	}
	sk, ok := k.(stage.Selecting)
	return sk, ok
}
