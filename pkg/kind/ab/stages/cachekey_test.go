package stages

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/judgetest"
	"github.com/tribunal-dev/tribunal/internal/testutil/memkv"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
)

// TestCachedAnswersOfAnOlderPromptAreNotReused: the judge-call cache key holds the
// prompt's version and hash, so an answer cached under ab.v2's rules is never served for
// a comparison asked under ab.v3's: the provider is asked again, and only that answer
// is served to the next identical comparison.
func TestCachedAnswersOfAnOlderPromptAreNotReused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := fileblob.New(t.TempDir(), fileblob.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var slots []events.Slot
	for _, s := range []struct{ name, text string }{{"A", "# one"}, {"B", "# two"}} {
		a, err := blob.PutBytes(ctx, store, "t", []byte(s.text), "text/markdown")
		if err != nil {
			t.Fatal(err)
		}
		slots = append(slots, events.Slot{Name: s.name, Artifact: events.Artifact{Class: "text",
			Blob: events.Blob{SHA256: a.Ref.SHA256, MediaType: "text/markdown", Size: a.Size}}})
	}
	gd := &events.GatesDone{Kind: events.KindAB, Criterion: "c", Slots: slots}
	ev := events.New(gd, "t", "b", "AC-1", 0, "", nil)
	p, reqs := judgetest.AnswersInTurn(`{"raw_winner": "B", "confidence": 0.8, "biggest_gap": "B explains the fix."}`)
	calls := func() int { return len(*reqs) }
	env := &stage.JudgeEnv{Store: store, Provider: p, Cache: memkv.New("cache"), Log: slog.New(slog.DiscardHandler)}

	// What the same comparison's answer was cached under by the previous prompt.
	parts := []string{"AB", gd.Criterion}
	for _, sl := range slots {
		parts = append(parts, sl.Name, sl.Artifact.Blob.SHA256, sl.Artifact.Blob.MediaType)
	}
	old := strings.Replace(ab.PromptHash(), "ab.v3:", "ab.v2:", 1)
	oldKey := env.CacheKey(events.KindAB, "t", p.DefaultModel(), old, parts...)
	if oldKey == env.CacheKey(events.KindAB, "t", p.DefaultModel(), ab.PromptHash(), parts...) {
		t.Fatal("the cache key does not depend on the prompt version")
	}
	stale, _ := json.Marshal(events.Vote{Order: "AB", Status: events.VoteOK, RawWinner: "A", Confidence: 1, BiggestGap: "cached under ab.v2",
		Judge: events.JudgeInfo{Provider: "fake", Model: "fake-default", PromptHash: old}})
	if _, err := env.Cache.Put(ctx, oldKey, stale); err != nil {
		t.Fatal(err)
	}

	for i, wantCalls := range []int{1, 1} {
		v, err := Kind{}.Judge(ctx, env, ev, gd)
		if err != nil {
			t.Fatal(err)
		}
		got := v.Votes[0]
		if got.BiggestGap == "cached under ab.v2" || got.Judge.PromptHash != ab.PromptHash() {
			t.Fatalf("judging %d served the ab.v2 answer: %+v", i+1, got)
		}
		if calls() != wantCalls || got.Judge.Cached != (i == 1) {
			t.Fatalf("judging %d: %d provider calls, cached %v; want %d and %v", i+1, calls(), got.Judge.Cached, wantCalls, i == 1)
		}
	}
}
