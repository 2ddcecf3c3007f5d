package audit

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// ReplayReads is Replay (own: ReplayOwn) returning how many times it read the stream.
func ReplayReads(ctx context.Context, js jetstream.JetStream, f Filter, own bool, visit func(*Recorded) error) (int, error) {
	do := replay
	if own {
		do = replayOwn
	}
	p, err := do(ctx, js, f, visit)
	if p == nil {
		return 0, err
	}
	return p.reads, err
}

// SpillSteps makes the audits that follow, until restore, keep only a few step entries in
// memory and write the rest out (stepTable), so a small batch's steps span many runs.
func SpillSteps(slots int) (restore func()) {
	old := stepSlots
	stepSlots = slots
	return func() { stepSlots = old }
}

// StepRuns is how many runs the audit's step entries were written to.
func StepRuns(rep Report) int {
	if rep.state == nil {
		return 0
	}
	return rep.state.steps.set.Runs()
}

// SpillWaiting makes the audits that follow, until restore, keep only budget bytes of
// the expectations waiting for their record in memory, and slots entries of their index.
func SpillWaiting(budget, slots int) (restore func()) {
	oldBudget, oldSlots := lotBudget, lotSlots
	lotBudget, lotSlots = budget, slots
	return func() { lotBudget, lotSlots = oldBudget, oldSlots }
}

// BeforeVisit calls fn before each message an audit visits, with its sequence and how
// many expectations wait for their record, until restore.
func BeforeVisit(fn func(seq uint64, waiting int)) (restore func()) {
	beforeVisit = fn
	return func() { beforeVisit = nil }
}

// SpillCancelScan makes the cancels' scans that follow, until restore, write their log
// out past a buffer of a few records.
func SpillCancelScan() (restore func()) {
	old := scanBuffer
	scanBuffer = 2 * scanRecord
	return func() { scanBuffer = old }
}
