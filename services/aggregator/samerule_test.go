package aggregator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/handlertest"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/registry"
)

// tieBlocks is the ab kind with one rule changed: a tie blocks the job instead of
// becoming a polish suggestion.
type tieBlocks struct{ ab.Kind }

func (k tieBlocks) Decide(st *kind.Step) error {
	if err := k.Kind.Decide(st); err != nil {
		return err
	}
	r, err := ab.ResultOf(st.Job)
	if err != nil {
		return err
	}
	if st.Job.Status == events.StatusCompared && r.Comparison.Winner == ab.WinnerTie {
		st.Job.Status, st.Job.BlockStage, st.Job.BlockReason = events.StatusBlocked, "judge", "changed rule: a tie blocks"
		k.Kind.Blocked(st.Job)
	}
	return nil
}

func replayed(ws []handlertest.Wire) []audit.Recorded {
	out := make([]audit.Recorded, len(ws))
	for i, w := range ws {
		subject, _ := events.Subject(w.Event.Tenant, w.Event.Type)
		out[i] = audit.NewRecorded(uint64(i+1), subject, time.Now(), w.Data, w.Event.ID, "")
	}
	return out
}

// The aggregator service and the audit decide with the same rules, found through the
// same registry: change one rule and both follow it; the audit of the same stream under
// the old rule, or of a stream with one verdict altered, reports mismatches.
func TestAggregatorAndAuditRunTheSameRule(t *testing.T) {
	restore := registry.Swap(tieBlocks{})
	defer restore()

	env := handlertest.New(t)
	hs, _ := handlers(env, handlertest.QuickstartProvider(t))
	stream := handlertest.Record(t, hs, env.Submitted(t, handlertest.Quickstart(), "team-a", "b1")...)

	j, _, err := records.New(env.Buckets).Job(context.Background(), "team-a", "b1", "AC-3")
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != events.StatusBlocked || j.BlockReason != "changed rule: a tie blocks" {
		t.Fatalf("the aggregator did not follow the changed rule: AC-3 %s %q", j.Status, j.BlockReason)
	}
	if rep := audit.Audit(replayed(stream), env.Store); !rep.OK() {
		t.Fatalf("the audit did not follow the changed rule:\n%v", rep.Mismatches)
	}

	restore()
	rep := audit.Audit(replayed(stream), env.Store)
	if rep.OK() || !mentions(rep, "AC-3") {
		t.Fatalf("under the old rule the audit must flag AC-3, got %v", rep.Mismatches)
	}
	t.Logf("under the old rule: %d mismatches, first: %s", len(rep.Mismatches), rep.Mismatches[0])
	restore = registry.Swap(tieBlocks{})

	altered := append([]handlertest.Wire(nil), stream...)
	for i, w := range altered {
		v, ok := w.Event.Payload.(*events.VerdictEmitted)
		if !ok || w.Event.JobID != "AC-1" {
			continue
		}
		for n := range v.Votes {
			v.Votes[n].RawWinner = map[string]string{"A": "B", "B": "A"}[v.Votes[n].RawWinner]
		}
		if altered[i], err = handlertest.Encode(w.Event); err != nil {
			t.Fatal(err)
		}
	}
	if rep := audit.Audit(replayed(altered), env.Store); rep.OK() || !mentions(rep, "AC-1") {
		t.Fatalf("an altered verdict must be a mismatch on AC-1, got %v", rep.Mismatches)
	}
}

func mentions(rep audit.Report, ac string) bool {
	for _, m := range rep.Mismatches {
		if strings.Contains(m.String(), ac) {
			return true
		}
	}
	return false
}
