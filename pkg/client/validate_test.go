package client

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestPlanBatch: the plan resolves and classifies every artifact with the renderer's
// rules, counts each AC's model calls by kind, and lists every AC that would be blocked
// with why: an entry typo, a video, a missing file.
func TestPlanBatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var pngBuf bytes.Buffer
	if err := png.Encode(&pngBuf, image.NewRGBA(image.Rect(0, 0, 4, 3))); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"o.md": []byte("# ours\n"), "r.md": []byte("# reference\n"), "o.png": pngBuf.Bytes(), "r.png": pngBuf.Bytes(),
		"clip.mp4": []byte("not really a video"), "orig.md": []byte("do a\n"), "cand.md": []byte("do a, briefly\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	doc := `version: 1
acs:
  - {id: AC-1, criterion: c, ours: o.md, reference: r.md}
  - {id: AC-2, criterion: c, ours: o.png, reference: r.png, judges: [m1, m2, m3], positions: swap}
  - {id: AC-3, criterion: c, ours: clip.mp4, reference: r.md}
  - {id: AC-4, criterion: c, ours: gone.md, reference: r.md}
  - id: AC-5
    criterian: c
    ours: o.md
    reference: r.md
  - {id: AC-6, kind: critic, task: t, output: inline text}
  - id: AC-7
    kind: equivalence
    original: orig.md
    candidate: cand.md
    cases: [{id: c1, input: x, tag: happy}, {id: c2, input: y, tag: edge}, {id: c3, input: z, tag: adversarial}]
  - {id: AC-8, criterion: c, ours: "https://example.com/page", reference: r.md}
`
	b := parseBatch(t, dir, doc)
	store := tempStore(t)
	plan, err := (&Submitter{Store: store}).PlanBatch(context.Background(), b, "default")
	if err != nil {
		t.Fatal(err)
	}
	type art struct{ role, class, blocked string }
	type want struct {
		kind                    string
		judge, maxJudge, runner int
		arts                    []art
		blocked                 string
	}
	wants := map[string]want{
		"AC-1": {"ab", 1, 1, 0, []art{{"ours", "text", ""}, {"reference", "text", ""}}, ""},
		"AC-2": {"ab", 6, 6, 0, []art{{"ours", "image", ""}, {"reference", "image", ""}}, ""},
		"AC-3": {"ab", 0, 0, 0, []art{{"ours", "", "unsupported artifact: video (.mp4)"}, {"reference", "text", ""}},
			`ours artifact "clip.mp4": unsupported artifact: video (.mp4)`},
		"AC-4": {"ab", 0, 0, 0, []art{{"ours", "", "missing artifact: gone.md"}, {"reference", "text", ""}},
			`ours artifact "gone.md": missing artifact: gone.md`},
		"AC-5": {"ab", 0, 0, 0, nil, "AC-5: line 8: unknown key criterian (did you mean criterion?)"},
		"AC-6": {"critic", 1, 1, 0, []art{{"output", "text", ""}}, ""},
		"AC-7": {"equivalence", 3, 3, 6, []art{{"original", "text", ""}, {"candidate", "text", ""}}, ""},
		"AC-8": {"ab", 1, 1, 0, []art{{"ours", "remote", ""}, {"reference", "text", ""}}, ""},
	}
	if len(plan.ACs) != len(wants) || plan.Jobs != len(wants) {
		t.Fatalf("%d ACs, %d jobs: %+v", len(plan.ACs), plan.Jobs, plan.ACs)
	}
	for _, ac := range plan.ACs {
		w := wants[ac.ID]
		var arts []art
		for _, a := range ac.Artifacts {
			arts = append(arts, art{a.Role, a.Class, a.Blocked})
		}
		if ac.Kind != w.kind || ac.JudgeCalls != w.judge || ac.MaxJudgeCalls != w.maxJudge || ac.RunnerCalls != w.runner ||
			!reflect.DeepEqual(arts, w.arts) || ac.Blocked != w.blocked {
			t.Errorf("%s: %+v\nwant %+v", ac.ID, ac, w)
		}
	}
	if plan.JudgeCalls != 12 || plan.RunnerCalls != 6 {
		t.Errorf("cost %d judge and %d runner calls, want 12 and 6", plan.JudgeCalls, plan.RunnerCalls)
	}
	wantProblems := []string{
		`AC-3: ours artifact "clip.mp4": unsupported artifact: video (.mp4)`,
		`AC-4: ours artifact "gone.md": missing artifact: gone.md`,
		"AC-5: line 8: unknown key criterian (did you mean criterion?)",
	}
	if !reflect.DeepEqual(plan.Problems, wantProblems) {
		t.Errorf("problems %q\nwant %q", plan.Problems, wantProblems)
	}
}
