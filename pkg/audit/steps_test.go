package audit_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
)

// TestAuditStepsWrittenOut audits batches whose step entries (and passes' gating
// decisions) are written out after every few steps, as a large batch's are after 196,608,
// and wants the very report the audit holding them all in memory gives: a duplicate
// recorded long after its first copy, under its own id or another, a pass gated twice
// far apart, a verdict altered after the gates it was derived from and a forged decision
// are found the same, and a clean batch stays clean.
func TestAuditStepsWrittenOut(t *testing.T) {
	const jobs = 20
	build := func(t *testing.T) *fixture {
		f := newFixture(t)
		for i := range jobs {
			id := fmt.Sprintf("AC-%d", i)
			f.stagedJob(id, i, jobs, ab.Assign(id, 0).Label(ab.WinnerReference), 0.9)
		}
		return f
	}
	for _, c := range []struct {
		name   string
		tamper func(*fixture)
		want   func(*fixture, audit.Mismatch) bool
	}{
		{"clean", func(*fixture) {}, nil},
		{"the first verdict recorded again at the end", func(f *fixture) {
			f.publish(f.recs[f.find(events.TypeVerdictEmitted, "AC-0")].Event)
		}, func(f *fixture, m audit.Mismatch) bool {
			first := f.recs[f.find(events.TypeVerdictEmitted, "AC-0")]
			return m.Kind == audit.KindDuplicate && m.Detail == fmt.Sprintf("event id recorded twice (first at seq %d)", first.Seq)
		}},
		{"the first verdict again under a forged id", func(f *fixture) {
			dup := f.recs[f.find(events.TypeVerdictEmitted, "AC-0")].Event
			dup.ID = "0123456789abcdef0123456789abcdef"
			f.publish(dup)
		}, func(f *fixture, m audit.Mismatch) bool {
			return m.Kind == audit.KindDuplicate && m.EventID == "0123456789abcdef0123456789abcdef"
		}},
		{"the first pass gated again at the end", func(f *fixture) {
			rd := f.recs[f.find(events.TypeRenderDone, "AC-0")]
			f.stage(rd, &events.GatesFailed{Kind: events.KindAB, ACID: "AC-0", Blocked: "the page did not load"})
		}, func(f *fixture, m audit.Mismatch) bool {
			return m.Kind == audit.KindDuplicate && m.Job == "AC-0" && m.EventType == events.TypeGatesFailed
		}},
		{"the first gates altered after its verdict", func(f *fixture) {
			i := f.find(events.TypeGatesDone, "AC-0")
			f.rewrite(i, func(ev *events.Event) { ev.CorrelationID = "altered" })
		}, func(f *fixture, m audit.Mismatch) bool {
			return m.Job == "AC-0" && m.EventType == events.TypeVerdictEmitted && m.FromType == events.TypeGatesDone
		}},
		{"the first decision forged", func(f *fixture) {
			f.forgeWinner(f.find(events.TypeIterationDecided, "AC-0"))
		}, func(f *fixture, m audit.Mismatch) bool {
			return m.Job == "AC-0" && m.EventType == events.TypeIterationDecided && m.Kind == audit.KindMismatch
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := build(t)
			c.tamper(f)
			held := f.audit()
			restore := audit.SpillSteps(16)
			spilled := f.audit()
			restore()
			if runs := audit.StepRuns(spilled); runs < 2 {
				t.Fatalf("the steps were written to %d runs: the test spilled nothing", runs)
			}
			if audit.StepRuns(held) != 0 {
				t.Fatalf("the audit holding every step in memory wrote %d runs", audit.StepRuns(held))
			}
			if c.want == nil {
				if !spilled.OK() {
					t.Fatalf("the clean batch, its steps written out, audits with findings: %s", dump(spilled))
				}
			} else if !has(spilled, func(m audit.Mismatch) bool { return c.want(f, m) }) {
				t.Fatalf("the finding is missing with the steps written out: %s", dump(spilled))
			}
			if !reflect.DeepEqual(spilled.Mismatches, held.Mismatches) || !reflect.DeepEqual(spilled.Unverified, held.Unverified) ||
				spilled.Events != held.Events || spilled.Decisions != held.Decisions || spilled.Jobs != held.Jobs {
				t.Fatalf("written out, the audit reports otherwise:%s\nheld in memory:%s", dump(spilled), dump(held))
			}
			if !reflect.DeepEqual(spilled.JobDecisions(), held.JobDecisions()) {
				t.Fatal("written out, the job decisions name other events than held in memory")
			}
		})
	}
}
