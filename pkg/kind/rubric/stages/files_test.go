package stages

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestArgusRunsOption: a batch that says argus_runs keeps the seed's files in the
// feature's own .argus-runs/ folder ("Iteration logs under argus/specs/{feature}/.argus-runs/"),
// relative to the batch's folder; an AC may say otherwise, and a feature outside the batch
// folder is not written to.
func TestArgusRunsOption(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name      string
		batchRuns bool
		acRuns    *bool
		sub       string
		want      string
		blocked   bool
		relDir    bool
	}{
		{name: "off by default"},
		{name: "batch asks", batchRuns: true, want: ".argus-runs"},
		{name: "feature in a sub-folder", batchRuns: true, sub: "argus/specs/tasks", want: "argus/specs/tasks/.argus-runs"},
		{name: "AC asks", acRuns: &yes, want: ".argus-runs"},
		{name: "AC declines", batchRuns: true, acRuns: &no},
		{name: "feature outside the batch folder", batchRuns: true, sub: "../elsewhere", blocked: true},
		{name: "batch folder given relative (tribunal run .)", batchRuns: true, sub: "specs/tasks", want: "specs/tasks/.argus-runs", relDir: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			bdir := filepath.Join(root, "repo")
			fdir := filepath.Join(bdir, filepath.FromSlash(tc.sub))
			if err := os.MkdirAll(fdir, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFeature(t, fdir, "ios", "app://tasks/list")
			store, err := fileblob.New(t.TempDir(), fileblob.Options{})
			if err != nil {
				t.Fatal(err)
			}
			b := &batch.Batch{Path: filepath.Join(bdir, "batch.yaml"), Dir: bdir}
			if tc.relDir {
				wd, _ := os.Getwd()
				if b.Dir, err = filepath.Rel(wd, bdir); err != nil {
					t.Fatal(err)
				}
			}
			b.Parts = map[string]any{"rubric": &Defaults{ArgusRuns: tc.batchRuns}}
			env := &stage.PlanEnv{Batch: b, Tenant: "team-a", Store: store, AllowOutside: true}
			plans, err := Kind{}.Plan(context.Background(), env, batch.AC{ID: "tasks", Part: &Entry{Spec: filepath.ToSlash(filepath.Join(tc.sub, "spec.json")), ArgusRuns: tc.acRuns}})
			if err != nil {
				t.Fatal(err)
			}
			rs := rubricwire.SpecOf(plans[0].Build(nil).KindPart)
			if tc.blocked != strings.Contains(rs.Blocked, "argus_runs") || rs.Runs != tc.want {
				t.Fatalf("runs %q blocked %q, want %q (blocked %v)", rs.Runs, rs.Blocked, tc.want, tc.blocked)
			}
		})
	}
}

// TestFilesAreTheSeeds: a view's files are the seed's: its sign-off in the feature's
// signoff.json (one item per view, merged by view), each iteration's gate-result.json, and
// its HE-1 candidate under candidates/; with argus_runs each is kept under the feature's
// .argus-runs/ too.
func TestFilesAreTheSeeds(t *testing.T) {
	t.Parallel()
	b := func(c string) events.Blob {
		return events.Blob{SHA256: strings.Repeat(c, 64), MediaType: "application/json", Size: 1}
	}
	so := argus.NewSignOff("tasks", argus.View{Target: "list", State: "populated", Appearance: "light"}, argus.LoopState{Iteration: 2}, nil, "k", time.Unix(0, 0))
	cand := b("c")
	st := &rubric.State{SignOff: &so, Candidate: &cand, GateResults: []rubric.GateResultFile{{Iteration: 1, Blob: b("1")}, {Iteration: 2, Blob: b("2")}}}
	data, _ := json.Marshal(st)
	for _, runs := range []string{"", "specs/tasks/.argus-runs"} {
		j := &records.Job{Spec: events.JobSpec{Kind: events.KindRubric, KindPart: &rubricwire.Spec{Feature: "tasks", Target: "list", State: "populated", Appearance: "light", Runs: runs}}, Loop: data}
		var got []string
		for _, f := range (Kind{}).Files(j) {
			got = append(got, f.Path+" > "+f.Beside)
			if f.Item != nil && !reflect.DeepEqual(f.Identity, []string{"feature", "target", "state", "appearance"}) {
				t.Errorf("signoff.json items are merged by view, identity %v", f.Identity)
			}
		}
		beside := func(rel string) string {
			if runs == "" {
				return ""
			}
			return runs + "/" + rel
		}
		want := []string{
			"tasks/signoff.json > " + beside("signoff.json"),
			"tasks/list-populated-light/iteration-1/gate-result.json > " + beside("list-populated-light/iteration-1/gate-result.json"),
			"tasks/list-populated-light/iteration-2/gate-result.json > " + beside("list-populated-light/iteration-2/gate-result.json"),
			"tasks/candidates/list-populated-light.png > " + beside("candidates/list-populated-light.png"),
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("runs %q: files\n%v\nwant\n%v", runs, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}
