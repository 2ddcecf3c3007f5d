package rulebook_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// viewOf is an interactive (or headless) view of its own target, named id.
func viewOf(id, target, mode string) events.JobSpec {
	s := viewSpec(mode)
	s.ACID = id
	r := *rubricwire.SpecOf(s.KindPart)
	r.Target = target
	s.KindPart = &r
	return s
}

func spotcheckAt(job string, at time.Time) rulebook.Input {
	e := events.New(&events.SpotcheckRecorded{ACID: job, Approved: true, By: "me"}, tenant, batch, job, 0, "approve", nil)
	e.Time = at
	return in(e)
}

// TestSpotcheckHoldsTheOtherViews pins seed 004's HE-2 pause ("Do not continue to the
// remaining views until the human responds") in the rules, through the in-memory
// aggregator the audit replays with: once a sign-off waits for a person, every loop input
// of the batch's other interactive views waits on the holder's record, deciding,
// rendering and signing off nothing; the answer releases them, each applied to its own job
// and stamped no earlier than the answer. A headless view of the same batch never waits.
func TestSpotcheckHoldsTheOtherViews(t *testing.T) {
	m := &rulebook.Memory{Documents: func(string, events.Blob) ([]byte, error) { return argus.DefaultRubricJSON(), nil }}
	specs := []events.JobSpec{viewOf("A", "a", events.ModeInteractive), viewOf("B", "b", events.ModeInteractive),
		viewOf("C", "c", events.ModeInteractive), viewOf("H", "h", events.ModeHeadless)}
	for i, s := range specs {
		if _, err := m.Apply(in(submit(s, i, len(specs)))); err != nil {
			t.Fatal(err)
		}
	}
	apply := func(e events.Event) rulebook.Applied {
		t.Helper()
		res, err := m.Apply(in(e))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, s := range specs {
		apply(rubricVote(t, s.ACID, 0, true)) // a pass, a confirmation asked for
	}
	if j := m.Job(tenant, batch, "A"); j.Status != events.StatusPending {
		t.Fatalf("A after one pass: %s", j.Status)
	}
	res := apply(rubricVote(t, "A", 1, true))
	if j := m.Job(tenant, batch, "A"); j.Status != events.StatusAwaitingSpotcheck || len(res.Publish) == 0 {
		t.Fatalf("A's sign-off waits for a person: %s, %d events", j.Status, len(res.Publish))
	}
	// B would sign off and C would hand the builder a fix list: both wait instead, and a
	// redelivered input waits once.
	for _, e := range []events.Event{rubricVote(t, "B", 1, true), rubricVote(t, "C", 1, false), rubricVote(t, "B", 1, true)} {
		if res := apply(e); !res.Hold || len(res.Publish) != 0 || res.Job != nil || res.Complete != nil {
			t.Fatalf("%s's input while A waits: hold %v, %d events, job stored %v", e.JobID, res.Hold, len(res.Publish), res.Job != nil)
		}
	}
	for _, id := range []string{"B", "C"} {
		if j := m.Job(tenant, batch, id); j.Status != events.StatusPending || len(j.Inputs) != 2 {
			t.Fatalf("%s while held: %s, inputs %v", id, j.Status, j.Inputs)
		}
	}
	if held := m.Job(tenant, batch, "A").Held; len(held) != 2 || held[0].Job != "B" || held[1].Job != "C" {
		t.Fatalf("A holds %+v", held)
	}
	// The headless view goes on: it signs off without waiting (and is not the spot-check).
	if res := apply(rubricVote(t, "H", 1, true)); res.Hold || m.Job(tenant, batch, "H").Status != events.StatusSignedOff {
		t.Fatalf("the headless view: hold %v, %s", res.Hold, m.Job(tenant, batch, "H").Status)
	}
	answer := t0.Add(time.Hour)
	res = apply(spotcheckAt("A", answer).Event)
	if res.Complete == nil {
		t.Fatal("the answer releases the last views and completes the batch")
	}
	b, c := m.Job(tenant, batch, "B"), m.Job(tenant, batch, "C")
	if b.Status != events.StatusSignedOff || c.Status != events.StatusNeedsFixes {
		t.Fatalf("released: B %s, C %s", b.Status, c.Status)
	}
	bs, _ := rubric.StateOf(b)
	if bs.SignOff == nil || bs.SignOff.SignedOffAt.Before(answer) || !b.DecidedAt.Equal(answer) {
		t.Fatalf("B's sign-off is stamped at the answer, not before: %+v, decided %s", bs.SignOff, b.DecidedAt)
	}
	// The released outputs are announced with the answer, caused by the inputs held.
	causes := map[string]string{}
	for _, e := range res.Publish {
		if e.JobID != "A" {
			causes[e.JobID+" "+string(e.Type)] = e.CausationID
		}
	}
	if causes["B "+string(events.TypeSignoffRecorded)] != rubricVote(t, "B", 1, true).ID || causes["C "+string(events.TypeIterationDecided)] != rubricVote(t, "C", 1, false).ID {
		t.Fatalf("released outputs and their causes: %v", causes)
	}
	// A final holder releases again when asked (a crash cut a release short), which changes
	// nothing and announces nothing new.
	again := apply(spotcheckAt("A", answer).Event)
	for _, e := range again.Publish {
		if e.JobID != "A" {
			t.Fatalf("the answer again announces %s of %s", e.Type, e.JobID)
		}
	}
	if again.Job != nil || m.Job(tenant, batch, "B").Status != events.StatusSignedOff {
		t.Fatalf("the answer again: job stored %v", again.Job != nil)
	}
}

// TestHoldRaceStampsTheSame: an input of another view that reaches the rules after the
// answer although it was published before it (a race the aggregator may lose either way)
// is stamped no earlier than the answer, as a held one is, so the outputs are the same
// whichever way the race went and a replay in stream order re-derives them.
func TestHoldRaceStampsTheSame(t *testing.T) {
	var positions [][]uint64
	for _, held := range []bool{true, false} {
		m := &rulebook.Memory{Documents: func(string, events.Blob) ([]byte, error) { return argus.DefaultRubricJSON(), nil }}
		// Each input where a stream would hold it, so the record of B keeps positions.
		seq := uint64(0)
		at := func(i rulebook.Input) rulebook.Input { seq++; i.Seq = seq; return i }
		for i, s := range []events.JobSpec{viewOf("A", "a", events.ModeInteractive), viewOf("B", "b", events.ModeInteractive)} {
			if _, err := m.Apply(at(in(submit(s, i, 2)))); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Apply(at(in(rubricVote(t, s.ACID, 0, true)))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := m.Apply(at(in(rubricVote(t, "A", 1, true)))); err != nil {
			t.Fatal(err)
		}
		answer := spotcheckAt("A", t0.Add(time.Hour))
		vote := in(rubricVote(t, "B", 1, true))
		vote.Seq, answer.Seq = 40, 41
		var out []events.Event
		for _, i := range map[bool][]rulebook.Input{true: {vote, answer}, false: {answer, vote}}[held] {
			res, err := m.Apply(i)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range res.Publish {
				if e.JobID == "B" {
					out = append(out, e)
				}
			}
		}
		b := m.Job(tenant, batch, "B")
		s, _ := rubric.StateOf(b)
		if b.Status != events.StatusSignedOff || !s.SignOff.SignedOffAt.Equal(answer.Event.Time) || len(out) == 0 {
			t.Fatalf("held %v: B %s signed off at %v, %d events", held, b.Status, s.SignOff, len(out))
		}
		for _, e := range out {
			if p, ok := e.Payload.(*events.SignoffRecorded); ok && !strings.HasPrefix(p.SignedOffAt, "2026-12-01T10:00:00") {
				t.Fatalf("held %v: sign-off event at %s", held, p.SignedOffAt)
			}
		}
		// A held input keeps where the stream holds it: B's record points its audit
		// at the same messages whichever way the race went.
		if len(b.Positions) != len(b.Inputs) || b.Positions[len(b.Positions)-1] != 40 {
			t.Fatalf("held %v: B's positions %v for inputs %v", held, b.Positions, b.Inputs)
		}
		positions = append(positions, b.Positions)
	}
	if !slices.Equal(positions[0], positions[1]) {
		t.Fatalf("B's positions held %v, not held %v", positions[0], positions[1])
	}
}

// TestParkAfterTheAnswer: an input parked on a holder that has its outcome by now is not
// parked (the caller decides it instead), and one parked already is not parked twice.
func TestParkAfterTheAnswer(t *testing.T) {
	h := &records.Job{Tenant: tenant, Batch: batch, ACID: "A", Status: events.StatusAwaitingSpotcheck}
	v := in(rubricVote(t, "B", 1, true))
	next, ok, err := rulebook.Park(h, v)
	if err != nil || !ok || next == nil || len(next.Held) != 1 || next.Held[0].Job != "B" || len(h.Held) != 0 {
		t.Fatalf("parked: %+v %v %v", next, ok, err)
	}
	if again, ok, err := rulebook.Park(next, v); err != nil || !ok || again != nil {
		t.Fatalf("parked twice: %+v %v %v", again, ok, err)
	}
	next.Status = events.StatusSignedOff
	if again, ok, err := rulebook.Park(next, v); err != nil || ok || again != nil {
		t.Fatalf("parked on a final holder: %+v %v %v", again, ok, err)
	}
}

// TestReleaseOfABadInput: a held input that is no input of its job's kind blocks that job
// at the release, as its dead letter would have, and never fails the holder's answer.
func TestReleaseOfABadInput(t *testing.T) {
	m := &rulebook.Memory{Documents: func(string, events.Blob) ([]byte, error) { return argus.DefaultRubricJSON(), nil }}
	for i, s := range []events.JobSpec{viewOf("A", "a", events.ModeInteractive), viewOf("B", "b", events.ModeInteractive)} {
		if _, err := m.Apply(in(submit(s, i, 2))); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Apply(in(rubricVote(t, s.ACID, 0, true))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Apply(in(rubricVote(t, "A", 1, true))); err != nil {
		t.Fatal(err)
	}
	bad := abVerdict("B", "A", 0.9, 0)
	bad.Iteration = 1
	if res, err := m.Apply(in(bad)); err != nil || !res.Hold {
		t.Fatalf("held: %+v %v", res, err)
	}
	res, err := m.Apply(spotcheckAt("A", t0.Add(time.Hour)))
	if err != nil || res.Complete == nil {
		t.Fatalf("the answer: %+v %v", res, err)
	}
	if b := m.Job(tenant, batch, "B"); b.Status != events.StatusBlocked || !strings.Contains(b.BlockReason, "not an input of this judge kind") {
		t.Fatalf("B: %s %q", b.Status, b.BlockReason)
	}
}

// viewStore is casStore keeping views' states, and serving the default rubric.
type viewStore struct {
	*casStore
	states map[string][]byte
	revs   map[string]uint64
}

func (s *viewStore) State(_ context.Context, key string) ([]byte, uint64, error) {
	return s.states[key], s.revs[key], nil
}

func (s *viewStore) PutState(_ context.Context, key string, data []byte, rev uint64) (bool, error) {
	if s.revs[key] != rev {
		return false, nil
	}
	s.states[key], s.revs[key] = data, rev+1
	return true, nil
}

func (s *viewStore) Document(context.Context, string, events.Blob) ([]byte, error) {
	return argus.DefaultRubricJSON(), nil
}

// TestViewStoredBeforeAConflictKeepsThePrevious: the view's state is stored before its
// job's record, so a job record another writer changed in between (an input of another
// view held on this one, for the claim) has the step applied again on a view that took
// it already. The record must name the same previous render as a step applied once:
// the audit, which meets no conflict, derives that one.
func TestViewStoredBeforeAConflictKeepsThePrevious(t *testing.T) {
	ctx := context.Background()
	vote := func(iteration int) events.Event {
		e := rubricVote(t, "A", iteration, true)
		e.Payload.(*events.VerdictEmitted).KindPart.(*rubricwire.Vote).Render.SHA256 = strings.Repeat(string(rune('c'+iteration)), 64)
		return e
	}
	run := func(conflict bool) *rubric.State {
		t.Helper()
		s := &viewStore{casStore: newCASStore(), states: map[string][]byte{}, revs: map[string]uint64{}}
		r := &rulebook.Runner{Store: s}
		for _, e := range []events.Event{submit(viewOf("A", "a", events.ModeHeadless), 0, 1), vote(0)} {
			if _, err := r.Apply(ctx, in(e)); err != nil {
				t.Fatal(err)
			}
		}
		if conflict {
			s.writer = func(s *casStore) {
				j, _, _ := s.Job(ctx, tenant, batch, "A")
				s.put(j)
			}
		}
		if _, err := r.Apply(ctx, in(vote(1))); err != nil {
			t.Fatal(err)
		}
		j, _, err := s.Job(ctx, tenant, batch, "A")
		if err != nil || j == nil {
			t.Fatalf("job A: %v", err)
		}
		st, err := rubric.StateOf(j)
		if err != nil || st == nil {
			t.Fatalf("A's state: %v", err)
		}
		return st
	}
	once, again := run(false), run(true)
	if once.Previous == nil || once.Previous.SHA256 != strings.Repeat("c", 64) {
		t.Fatalf("applied once: previous %+v, want iteration 0's render", once.Previous)
	}
	if again.Previous == nil || *again.Previous != *once.Previous {
		t.Fatalf("applied again after a conflict: previous %+v, want %+v", again.Previous, once.Previous)
	}
}

// TestClaimRaceDerivesTheSame: the aggregator gave the claim to A's sign-off, applied
// first (it asked for the claim and was applied again holding it), while the stream holds
// B's sign-off first; the audit, in stream order, gives the claim to A when B asks
// (Memory.Claim names the recorded holder) and applies A's sign-off once, the claim
// already its own. A's record must be the same either way, or the audit reports a
// mismatch on a batch decided rightly.
func TestClaimRaceDerivesTheSame(t *testing.T) {
	vote := func(id string, iteration int) events.Event {
		e := rubricVote(t, id, iteration, true)
		// Each iteration renders anew, so the record's previous render says which it is.
		e.Payload.(*events.VerdictEmitted).KindPart.(*rubricwire.Vote).Render.SHA256 = strings.Repeat(string(rune('c'+iteration)), 64)
		return e
	}
	run := func(claim func(tenant, batch, job string) string, order ...string) *records.Job {
		t.Helper()
		m := &rulebook.Memory{Documents: func(string, events.Blob) ([]byte, error) { return argus.DefaultRubricJSON(), nil }, Claim: claim}
		for i, s := range []events.JobSpec{viewOf("A", "a", events.ModeInteractive), viewOf("B", "b", events.ModeInteractive)} {
			if _, err := m.Apply(in(submit(s, i, 2))); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Apply(in(vote(s.ACID, 0))); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range order {
			if _, err := m.Apply(in(vote(id, 1))); err != nil {
				t.Fatal(err)
			}
		}
		return m.Job(tenant, batch, "A")
	}
	handled := run(nil, "A", "B")
	replayed := run(func(string, string, string) string { return "A" }, "B", "A")
	if handled.Status != events.StatusAwaitingSpotcheck || replayed.Status != handled.Status {
		t.Fatalf("A: handled %s, replayed %s; want both awaiting the spot-check", handled.Status, replayed.Status)
	}
	hs, _ := rubric.StateOf(handled)
	rs, _ := rubric.StateOf(replayed)
	// What the rules derived, without the pending outputs (stamped when they were made).
	hs.Pending, rs.Pending = nil, nil
	h, _ := json.Marshal(hs)
	r, _ := json.Marshal(rs)
	if string(h) != string(r) {
		t.Fatalf("A's state differs:\nhandled  %s\nreplayed %s", h, r)
	}
}
