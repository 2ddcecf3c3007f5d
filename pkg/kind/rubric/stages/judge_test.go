package stages

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/internal/testutil/judgetest"
	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
)

// TestJudgeFreshPerIteration: the seed dispatches the judge "fresh every iteration" (SKILL.md
// invariant 1). An identical render judged at the next loop iteration, or in the next
// loop, is a new call; only the same iteration again (a redelivered gates.done) is served
// from the judge-call cache.
func TestJudgeFreshPerIteration(t *testing.T) {
	ctx := context.Background()
	b := natstest.Buckets(t, bus.Config{Memory: true})
	store, err := fileblob.New(t.TempDir(), fileblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := argus.DefaultRubric()
	dims := map[string]any{}
	for _, d := range r.DimensionNames() {
		dims[d] = map[string]any{"score": 1, "anchor": r.Dimensions[d].Anchor, "evidence": "e"}
	}
	answer, _ := json.Marshal(map[string]any{"iteration": 1, "feature": "f", "target": "t", "state": "s", "appearance": "a",
		"reference_source": "human", "dimensions": dims, "closer_to_reference_than_prev": nil, "all_pass": true, "failed_dimensions": []string{}, "notes": "n"})
	var calls atomic.Int32
	p := judgetest.FuncProvider(func(context.Context, judge.Request) (judge.Response, error) {
		calls.Add(1)
		return judge.Response{Content: string(answer), Model: "m"}, nil
	})
	put := func(data, media string) events.Artifact {
		a, err := blob.PutBytes(ctx, store, "team-a", []byte(data), media)
		if err != nil {
			t.Fatal(err)
		}
		return events.Artifact{Blob: events.Blob{SHA256: a.Ref.SHA256, MediaType: media, Size: a.Size}, Class: "text"}
	}
	slots := []events.Slot{
		{Name: "render", Artifact: put("render", "image/png")}, {Name: "reference", Artifact: put("reference", "image/png")},
		{Name: "probe", Artifact: put(`{}`, "application/json")}, {Name: "tokens", Artifact: put(`{}`, "application/json")},
		{Name: "spec_text", Artifact: put("# s", "text/markdown")}, {Name: "spec_json", Artifact: put(`{}`, "application/json")},
		{Name: "gate_result", Artifact: put(`{"all_green": true}`, "application/json")},
		{Name: "rubric", Artifact: put(string(argus.DefaultRubricJSON()), "application/json")},
	}
	env := &stage.JudgeEnv{Store: store, Provider: p, Cache: b.Cache, Instance: "j"}
	ask := func(loop, iteration int) *rubricwire.Vote {
		gd := &events.GatesDone{Kind: events.KindRubric, Slots: slots, KindPart: &rubricwire.Judging{
			Feature: "f", Target: "t", State: "s", Appearance: "a", ReferenceSource: "human", LoopIteration: iteration, Loop: loop}}
		ev := events.New(gd, "team-a", "b", "f--t--s--a", iteration, "", nil)
		out, err := Kind{}.Judge(ctx, env, ev, gd)
		if err != nil {
			t.Fatal(err)
		}
		return rubricwire.VoteOf(out.KindPart)
	}
	for _, c := range []struct {
		loop, iteration int
		calls           int32
		cached          bool
	}{
		{0, 1, 1, false},
		{0, 1, 1, true}, // the same iteration again: a redelivery
		{0, 2, 2, false},
		{0, 3, 3, false},
		{1, 1, 4, false}, // a reset or changed spec started loop 1
	} {
		v := ask(c.loop, c.iteration)
		if calls.Load() != c.calls || v.Judge.Cached != c.cached || v.Status != events.VoteOK {
			t.Fatalf("loop %d iteration %d: %d calls, cached %v, status %s; want %d, %v", c.loop, c.iteration, calls.Load(), v.Judge.Cached, v.Status, c.calls, c.cached)
		}
		if v.GateResult == nil || v.GateResult.SHA256 != slots[6].Artifact.Blob.SHA256 {
			t.Fatalf("the vote does not name the gate result the judge was shown: %+v", v.GateResult)
		}
	}
}
