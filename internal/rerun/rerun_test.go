package rerun

import (
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/critic"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

func inputs() Inputs {
	return Inputs{
		Tribunal: "build:1", Tenant: "default", Source: "examples/quickstart/batch.yaml", BatchFile: strings.Repeat("a", 64),
		Plan: strings.Repeat("b", 64), Jobs: 8,
		Judge:   map[string]string{"provider": "openai", "model": "m", "temperature": "0", "base_url": "http://x/v1"},
		Options: map[string]string{"allow_outside": "false"},
	}
}

// Every input is part of the key: changing any one of them gives another key, and the
// same inputs (whatever the map order) always the same one.
func TestKeyCoversEveryInput(t *testing.T) {
	base, err := inputs().Key()
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := inputs().Key(); again != base {
		t.Fatalf("the same inputs gave %s and %s", base, again)
	}
	for name, change := range map[string]func(*Inputs){
		"tribunal build":          func(in *Inputs) { in.Tribunal = "build:2" },
		"tenant":                  func(in *Inputs) { in.Tenant = "other" },
		"batch file path":         func(in *Inputs) { in.Source = "elsewhere/batch.yaml" },
		"batch file bytes":        func(in *Inputs) { in.BatchFile = strings.Repeat("c", 64) },
		"plan (specs, artifacts)": func(in *Inputs) { in.Plan = strings.Repeat("d", 64) },
		"job count":               func(in *Inputs) { in.Jobs = 7 },
		"judge model":             func(in *Inputs) { in.Judge["model"] = "m2" },
		"sampling":                func(in *Inputs) { in.Judge["temperature"] = "0.5" },
		"judge setting added":     func(in *Inputs) { in.Judge["seed"] = "7" },
		"option":                  func(in *Inputs) { in.Options["allow_outside"] = "true" },
		"options dropped":         func(in *Inputs) { in.Options = nil },
	} {
		in := inputs()
		change(&in)
		k, err := in.Key()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if k == base {
			t.Errorf("changing the %s leaves the key as it was", name)
		}
	}
}

// A key with a part unknown is no key: the batch is judged again.
func TestKeyUnknown(t *testing.T) {
	for name, change := range map[string]func(*Inputs){
		"no build":      func(in *Inputs) { in.Tribunal = "" },
		"no tenant":     func(in *Inputs) { in.Tenant = "" },
		"no batch file": func(in *Inputs) { in.BatchFile = "" },
		"no plan":       func(in *Inputs) { in.Plan = "" },
		"no jobs":       func(in *Inputs) { in.Jobs = 0 },
		"no judge":      func(in *Inputs) { in.Judge = nil },
	} {
		in := inputs()
		change(&in)
		if k, err := in.Key(); !errors.Is(err, ErrUnknown) || k != "" {
			t.Errorf("%s: key %q, error %v; want ErrUnknown", name, k, err)
		}
	}
}

// A build from a clean checkout is named by its build information; one without a commit
// or from a modified tree by its executable's bytes as well.
func TestBuildID(t *testing.T) {
	info := func(settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Path: "github.com/tribunal-dev/tribunal/cmd/tribunal"}
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	exeCalls := 0
	exe := func() (string, error) { exeCalls++; return "exe:digest", nil }
	clean, err := buildID(info("vcs.revision", "f7b7a27", "vcs.modified", "false"), exe)
	if err != nil || !strings.HasPrefix(clean, "build:") || exeCalls != 0 {
		t.Fatalf("clean checkout: %q %v, executable hashed %d times", clean, err, exeCalls)
	}
	other, _ := buildID(info("vcs.revision", "0000000", "vcs.modified", "false"), exe)
	if other == clean {
		t.Error("two commits give one build id")
	}
	for name, bi := range map[string]*debug.BuildInfo{
		"modified tree": info("vcs.revision", "f7b7a27", "vcs.modified", "true"),
		"no commit":     info(),
		"no modified":   info("vcs.revision", "f7b7a27"),
	} {
		exeCalls = 0
		id, err := buildID(bi, exe)
		if err != nil || id != "exe:digest" || exeCalls != 1 {
			t.Errorf("%s: %q %v, executable hashed %d times; want the executable's digest", name, id, err, exeCalls)
		}
	}
	// The test binary itself: a build id that stays the same within the process.
	a, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := Build(); a == "" || a != b {
		t.Fatalf("Build: %q then %q", a, b)
	}
}

func abSpec(id, positions string, ours events.Source) events.JobSpec {
	ref := events.Source{Name: "ref.md", Blob: &events.Blob{SHA256: strings.Repeat("1", 64), MediaType: "text/plain", Size: 3}}
	return events.JobSpec{Kind: events.KindAB, ACID: id, KindPart: &ab.Spec{Ours: ours, Reference: ref, Threshold: 0.75, Positions: positions}}
}

// Jobs whose decision rests on state outside the key are named: a looping kind, an
// artifact named by URL, positions auto.
func TestUnkeyable(t *testing.T) {
	file := events.Source{Name: "ours.md", Blob: &events.Blob{SHA256: strings.Repeat("2", 64), MediaType: "text/plain", Size: 3}}
	if why := Unkeyable(abSpec("AC-1", "single", file)); why != "" {
		t.Errorf("an ab job over files: %q", why)
	}
	if why := Unkeyable(abSpec("AC-1", "swap", file)); why != "" {
		t.Errorf("an ab job with positions swap: %q", why)
	}
	if why := Unkeyable(events.JobSpec{Kind: events.KindCritic, ACID: "AC-2", KindPart: &critic.Spec{Task: "t", Output: file}}); why != "" {
		t.Errorf("a critic job: %q", why)
	}
	for name, tc := range map[string]struct {
		spec events.JobSpec
		want string
	}{
		"url":    {abSpec("AC-3", "single", events.Source{Name: "https://example.com/a", URL: "https://example.com/a"}), "is a URL"},
		"auto":   {abSpec("AC-4", "auto", file), "flip history"},
		"rubric": {events.JobSpec{Kind: events.KindRubric, ACID: "AC-5--home", KindPart: &rubricwire.Spec{}}, "continues its loop"},
	} {
		if why := Unkeyable(tc.spec); !strings.Contains(why, tc.want) || !strings.HasPrefix(why, tc.spec.ACID+":") {
			t.Errorf("%s: %q, want the AC and %q", name, why, tc.want)
		}
	}
}

func TestIndex(t *testing.T) {
	dir := t.TempDir()
	x := OpenIndex(dir)
	key := strings.Repeat("e", 64)
	if e, err := x.Lookup(key); e != nil || err != nil {
		t.Fatalf("empty index: %v %v", e, err)
	}
	want := Entry{Key: key, Tenant: "default", Batch: "quickstart-1", Plan: strings.Repeat("b", 64), Jobs: 8, Judges: []string{"openai/m"},
		CompletedAt: time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC), ExitCode: 1}
	if err := x.Record(want); err != nil {
		t.Fatal(err)
	}
	got, err := x.Lookup(key)
	if err != nil || got == nil || got.Batch != want.Batch || got.ExitCode != 1 || !got.CompletedAt.Equal(want.CompletedAt) {
		t.Fatalf("lookup: %+v %v", got, err)
	}
	// A later batch with the same key replaces the earlier one.
	want.Batch = "quickstart-2"
	if err := x.Record(want); err != nil {
		t.Fatal(err)
	}
	if got, _ := x.Lookup(key); got.Batch != "quickstart-2" {
		t.Fatalf("after a second record: %+v", got)
	}
	// An entry that does not read back is an error (the caller judges again), never a batch.
	p := filepath.Join(dir, IndexDir, key+".json")
	if err := os.WriteFile(p, []byte(`{"key":"`+strings.Repeat("f", 64)+`","tenant":"t","batch":"b"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if e, err := x.Lookup(key); e != nil || err == nil {
		t.Fatalf("an entry for another key: %v %v", e, err)
	}
	os.WriteFile(p, []byte("{"), 0o644)
	if e, err := x.Lookup(key); e != nil || err == nil {
		t.Fatalf("a torn entry: %v %v", e, err)
	}
	if err := x.Forget(key); err != nil {
		t.Fatal(err)
	}
	if e, err := x.Lookup(key); e != nil || err != nil {
		t.Fatalf("after Forget: %v %v", e, err)
	}
	if _, err := x.Lookup("../../etc/passwd"); err == nil {
		t.Fatal("a key that is not a digest was looked up")
	}
}

// completed is a batch of n ab jobs as the aggregator leaves it, every job compared with
// one ok call.
func completed(n int) (Entry, *records.Batch, []*records.Job) {
	plan := strings.Repeat("b", 64)
	e := Entry{Key: strings.Repeat("e", 64), Tenant: "default", Batch: "b1", Plan: plan, Jobs: n}
	h := &records.Batch{Tenant: "default", Batch: "b1", Size: n, Plan: &records.Plan{Digest: plan},
		Completion: &records.Completion{Summary: events.BatchCompleted{Total: n, Compared: n}}}
	var jobs []*records.Job
	for i := 0; i < n; i++ {
		jobs = append(jobs, &records.Job{Tenant: "default", Batch: "b1", ACID: "AC-" + string(rune('0'+i)), Index: i, BatchSize: n,
			Spec: events.JobSpec{Kind: events.KindAB, ACID: "AC-" + string(rune('0'+i))}, Status: events.StatusCompared,
			Calls: []records.Call{{Judge: "openai/m", Status: events.VoteOK, Cached: i%2 == 0}}})
	}
	return e, h, jobs
}

// A completed batch read back intact stands; any sign that it did not complete, was
// cancelled, is being redriven, is another plan, lost records, or holds an outcome a new
// run might not repeat (a failed call, a service that gave up, a failed runner) does not.
func TestStands(t *testing.T) {
	e, h, jobs := completed(4)
	if err := Stands(e, h, jobs); err != nil {
		t.Fatalf("a completed batch: %v", err)
	}
	// Blocked for a cause the inputs decide: it stands.
	for _, b := range []struct{ stage, reason, problem string }{
		{"gate", "failed gates: artifact_readable", ""},
		{"render", `ours artifact "ours/onboarding.mp4": unsupported artifact: video`, ""},
		{"render", `ours artifact "ours/a.html": missing artifact: ours/a.html; reference artifact "r.md": unreadable artifact: empty`, ""},
		{"render", "AC-1: line 10: unknown key criterian", "AC-1: line 10: unknown key criterian"},
		{"render", `ours artifact "change.diff": diffs are never judged (.diff file)`, ""},
	} {
		e, h, jobs := completed(2)
		jobs[1].Status, jobs[1].BlockStage, jobs[1].BlockReason, jobs[1].Spec.Problem, jobs[1].Calls = events.StatusBlocked, b.stage, b.reason, b.problem, nil
		if err := Stands(e, h, jobs); err != nil {
			t.Errorf("blocked at %s (%s): %v", b.stage, b.reason, err)
		}
	}
	for name, tc := range map[string]struct {
		change func(*Entry, *records.Batch, []*records.Job) ([]*records.Job, *records.Batch)
		want   string
	}{
		"not recorded": {func(e *Entry, h *records.Batch, j []*records.Job) ([]*records.Job, *records.Batch) { return j, nil }, "no longer recorded"},
		"incomplete": {func(e *Entry, h *records.Batch, j []*records.Job) ([]*records.Job, *records.Batch) {
			h.Completion = nil
			return j, h
		}, "not complete"},
		"cancelled": {func(e *Entry, h *records.Batch, j []*records.Job) ([]*records.Job, *records.Batch) {
			h.Cancel = &records.Cancel{By: "someone"}
			return j, h
		}, "cancelled"},
		"redriven": {func(e *Entry, h *records.Batch, j []*records.Job) ([]*records.Job, *records.Batch) {
			h.Redrive = &records.Redrive{Attempt: 1, Pending: []string{"AC-1"}}
			return j, h
		}, "redriven"},
		"another plan": {func(e *Entry, h *records.Batch, j []*records.Job) ([]*records.Job, *records.Batch) {
			h.Plan.Digest = strings.Repeat("c", 64)
			return j, h
		}, "plan"},
		"no plan": {func(e *Entry, h *records.Batch, j []*records.Job) ([]*records.Job, *records.Batch) {
			h.Plan = nil
			return j, h
		}, "plan"},
		"a record missing": {func(e *Entry, h *records.Batch, j []*records.Job) ([]*records.Job, *records.Batch) { return j[:3], h }, "3 job records of 4"},
		"a record twice": {func(e *Entry, h *records.Batch, j []*records.Job) ([]*records.Job, *records.Batch) {
			return append(j[:3], j[0]), h
		}, "out of place"},
		"a job pending": {func(e *Entry, h *records.Batch, j []*records.Job) ([]*records.Job, *records.Batch) {
			j[2].Status = events.StatusPending
			return j, h
		}, "no outcome"},
		"a failed call": {func(e *Entry, h *records.Batch, j []*records.Job) ([]*records.Job, *records.Batch) {
			j[1].Calls = append(j[1].Calls, records.Call{Judge: "openai/m", Status: events.VoteUnavailable})
			return j, h
		}, "unavailable answer"},
		"a schema violation": {func(e *Entry, h *records.Batch, j []*records.Job) ([]*records.Job, *records.Batch) {
			j[1].Status, j[1].Calls[0].Status = events.StatusSchemaViolation, events.VoteSchemaViolation
			return j, h
		}, "schema_violation answer"},
		"a service gave up": {func(e *Entry, h *records.Batch, j []*records.Job) ([]*records.Job, *records.Batch) {
			j[3].Status, j[3].BlockStage, j[3].BlockReason = events.StatusBlocked, "judge", "judge gave up on gates.done: provider unavailable"
			return j, h
		}, "blocked at judge"},
		"a cancelled job": {func(e *Entry, h *records.Batch, j []*records.Job) ([]*records.Job, *records.Batch) {
			j[3].Status, j[3].BlockStage, j[3].BlockReason = events.StatusBlocked, "cancel", "cancelled by me"
			return j, h
		}, "blocked at cancel"},
		"a runner failed": {func(e *Entry, h *records.Batch, j []*records.Job) ([]*records.Job, *records.Batch) {
			j[3].Status, j[3].BlockStage, j[3].BlockReason = events.StatusBlocked, "render", "runner failed on case c1 (candidate): judge provider unavailable"
			return j, h
		}, "blocked at render"},
		"an artifact lost from the store": {func(e *Entry, h *records.Batch, j []*records.Job) ([]*records.Job, *records.Batch) {
			j[3].Status, j[3].BlockStage, j[3].BlockReason = events.StatusBlocked, "render", `ours artifact "a.md": missing artifact: not in blob storage`
			return j, h
		}, "blocked at render"},
		"an artifact damaged in the store": {func(e *Entry, h *records.Batch, j []*records.Job) ([]*records.Job, *records.Batch) {
			// A new run's client stores the bytes again, which repairs the object.
			j[3].Status, j[3].BlockStage, j[3].BlockReason = events.StatusBlocked, "render", `reference artifact "r.md": unreadable artifact: stored bytes do not match their digest`
			return j, h
		}, "blocked at render"},
	} {
		e, h, jobs := completed(4)
		jobs, hh := tc.change(&e, h, jobs)
		err := Stands(e, hh, jobs)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
	}
}

func TestDescribe(t *testing.T) {
	e := &Entry{Batch: "b1", Tenant: "default", CompletedAt: time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC), Judges: []string{"openai/z", "openai/a"}}
	got := Describe(e)
	if !strings.HasPrefix(got, "batch b1 (tenant default, completed ") || !strings.HasSuffix(got, "judged by openai/a, openai/z)") {
		t.Errorf("Describe: %q", got)
	}
	e.Judges = nil
	if got := Describe(e); !strings.Contains(got, "no judge was asked") {
		t.Errorf("Describe without judges: %q", got)
	}
}
