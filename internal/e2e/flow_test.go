package e2e

import (
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/judge/scripted"
)

func scriptedJudge(t *testing.T, winner string) *scripted.Provider {
	t.Helper()
	p, err := scripted.New(scripted.Options{Fixtures: map[string]string{"ab": winner}, Named: "ab"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWalkingSkeleton(t *testing.T) {
	env := NewEnv(t)
	p := scriptedJudge(t, "A")
	env.Start(p, "judge-1", bus.Services...)
	files := TextBatch(5, "")
	files["batch.yaml"] += "  - id: AC-missing\n    criterion: x\n    ours: nope.md\n    reference: ref/0.md\n"
	b := WriteBatch(t, files)
	sub := env.Submit(b, "team-a")
	res := env.Wait(sub, 30*time.Second)
	if res.Summary.Total != 6 || res.Summary.Compared != 5 || res.Summary.Blocked != 1 {
		t.Fatalf("summary %+v", res.Summary)
	}
	for _, r := range res.Rows {
		if r.ACID == "AC-missing" {
			if r.Status != "blocked" || r.Reason == "" {
				t.Fatalf("missing artifact row: %+v", r)
			}
			continue
		}
		if r.Judge != "scripted/fixed-A" {
			t.Fatalf("row %s judged by %q", r.ACID, r.Judge)
		}
	}
	if res.Manifest == nil || len(res.Manifest.Comparisons) != 6 {
		t.Fatalf("manifest: %+v", res.Manifest)
	}
	if p.Calls() != 5 {
		t.Fatalf("provider calls %d, want 5", p.Calls())
	}
}
