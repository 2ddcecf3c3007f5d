//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/browsertest"
	"github.com/tribunal-dev/tribunal/internal/testutil/ptytest"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
)

// seedProject lays seed 004's own template out as its README says a project does
// (argus/specs/example/ holding the template's spec.json, tokens.json and
// contrast-pairs.json, as pkg/kind/rubric/argus keeps them in testdata), with a batch at the project
// root naming it. edit changes the spec's text before it is written. It returns the
// project folder.
func seedProject(t *testing.T, batch string, edit func(spec string) string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "project")
	feature := filepath.Join(root, "argus", "specs", "example")
	if err := os.MkdirAll(filepath.Join(feature, "references"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"spec.json", "tokens.json", "contrast-pairs.json"} {
		data, err := os.ReadFile(filepath.Join(repoRoot(t), "pkg", "kind", "rubric", "argus", "testdata", "seed-template", name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "spec.json" && edit != nil {
			data = []byte(edit(string(data)))
		}
		if err := os.WriteFile(filepath.Join(feature, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	md := "# Example\n\n## Targets\n\n### `list`\n\n- The populated state shows one row per item.\n"
	if err := os.WriteFile(filepath.Join(feature, "spec.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "batch.yaml"), []byte(batch), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// appAdapter turns the template into a feature of a command adapter ("app", the seed's
// iOS recipe's shape) whose reference is present, and writes that adapter's sense.sh: it
// renders every view as the reference image and a probe with the template's a11y ids, so
// every view passes and its confirmation render is unchanged. It returns the sense.sh.
func appAdapter(t *testing.T, root string) string {
	t.Helper()
	png := filepath.Join(repoRoot(t), "examples", "rubric-app", "references", "list-populated-light.png")
	ref, err := os.ReadFile(png)
	if err != nil {
		t.Fatal(err)
	}
	feature := filepath.Join(root, "argus", "specs", "example")
	for _, name := range []string{"list-populated-dark.png", "detail-populated-light.png"} {
		if err := os.WriteFile(filepath.Join(feature, "references", name), ref, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sense := filepath.Join(t.TempDir(), "sense.sh")
	script := `#!/bin/sh
set -eu
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2;;
    *) shift 2;;
  esac
done
cp "` + png + `" "$out/render.png"
printf '{"tree":[{"id":"screen.example"},{"id":"state.example.empty"},{"id":"button.createItem"},{"id":"row.item.1"},{"id":"screen.detail"}]}\n' > "$out/probe.json"
`
	if err := os.WriteFile(sense, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return sense
}

// presentApp is the spec edit of appAdapter's feature: adapter app, an app:// route, and
// the canonical reference present.
func presentApp(spec string) string {
	spec = strings.Replace(spec, `"adapter": "web"`, `"adapter": "app"`, 1)
	spec = strings.Replace(spec, `"route": "http://localhost:3000/example"`, `"route": "app://example/list"`, 1)
	return strings.Replace(spec, `"status": "needed"`, `"status": "present"`, 1)
}

// rubricManifest reads a run's manifest-rubric.json from its output folder.
type rubricManifest struct {
	Features []struct {
		Status string `json:"status"`
		Views  []struct {
			View     string `json:"view"`
			Job      string `json:"job"`
			Status   string `json:"status"`
			Reason   string `json:"reason"`
			Decision *struct {
				AllPass   bool `json:"all_pass"`
				Unchanged bool `json:"unchanged"`
			} `json:"decision"`
			SignOff *struct {
				SignedOffAt    time.Time `json:"signed_off_at"`
				HumanSpotcheck string    `json:"human_spotcheck"`
			} `json:"signoff"`
			Candidate  json.RawMessage `json:"candidate"`
			Render     json.RawMessage `json:"render"`
			SpecChange *struct {
				File  string `json:"file"`
				Patch struct {
					Op, Path string
					Value    any
				} `json:"patch"`
			} `json:"spec_change"`
		} `json:"views"`
	} `json:"features"`
}

func readRubricManifest(t *testing.T, out string) rubricManifest {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(out, "*", "manifest-rubric.json"))
	if len(matches) != 1 {
		t.Fatalf("manifest-rubric.json under %s: %v", out, matches)
	}
	data, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	var m rubricManifest
	if err := json.Unmarshal(data, &m); err != nil || len(m.Features) != 1 {
		t.Fatalf("manifest: %v\n%s", err, data)
	}
	return m
}

// TestHE2HoldsEveryOtherView: `tribunal run` on a real pseudo-terminal, the seed's
// template with four views that all pass. The first sign-off pauses for the person, and
// seed 004's "Do not continue to the remaining views until the human responds" holds:
// the prompt counts the three other views waiting, none of them signs off before the
// answer (the manifest's signed_off_at of each is after the moment the answer was typed,
// while the spot-checked view's is before it), and the audit re-derives every decision,
// the hold and its release included, from the events in the run's state folder.
func TestHE2HoldsEveryOtherView(t *testing.T) {
	root := seedProject(t, "version: 1\nname: he2\nacs:\n  - {id: example, kind: rubric, spec: argus/specs/example/spec.json}\n", presentApp)
	sense := appAdapter(t, root)
	out := t.TempDir()
	cmd := exec.Command(binary, "run", ".", "--adapter", "app="+sense, "--out", out)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "TRIBUNAL_EPHEMERAL=")
	term := ptytest.Start(t, cmd)
	term.WaitFor("spot-check (HE-2): ", 120*time.Second)
	// Every other view has reached a step the rules hold: none can sign off now.
	term.WaitFor("(3 other views wait for this answer", 120*time.Second)
	answered := time.Now()
	term.Type("y\n")
	if code := term.Wait(120 * time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, term.Output())
	}
	m := readRubricManifest(t, out)
	if m.Features[0].Status != string(argus.StatusDone) || len(m.Features[0].Views) != 4 {
		t.Fatalf("feature %+v", m.Features[0])
	}
	holders := 0
	for _, v := range m.Features[0].Views {
		if v.Status != "signed_off" || v.SignOff == nil {
			t.Fatalf("%s: %s, sign-off %+v", v.View, v.Status, v.SignOff)
		}
		if v.SignOff.HumanSpotcheck == argus.SpotcheckApproved {
			holders++
			if !v.SignOff.SignedOffAt.Before(answered) {
				t.Errorf("the spot-checked view %s signed off at %s, not before the answer at %s", v.View, v.SignOff.SignedOffAt, answered)
			}
			continue
		}
		if v.SignOff.HumanSpotcheck != argus.SpotcheckPending || v.SignOff.SignedOffAt.Before(answered) {
			t.Errorf("%s signed off at %s (%s), before the answer at %s", v.View, v.SignOff.SignedOffAt, v.SignOff.HumanSpotcheck, answered)
		}
		// The seed's all_pass: an unchanged confirmation signs off the state the
		// all-pass verdict judged.
		if v.Decision == nil || !v.Decision.Unchanged || !v.Decision.AllPass {
			t.Errorf("%s: decision %+v, want an unchanged confirmation with all_pass true", v.View, v.Decision)
		}
	}
	if holders != 1 {
		t.Fatalf("%d views spot-checked, want 1", holders)
	}
	batchID := regexp.MustCompile(`batch (\S+) \(tenant`).FindStringSubmatch(term.Output())
	if batchID == nil {
		t.Fatalf("no batch id in:\n%s", term.Output())
	}
	stdout, stderr, code := runState(t, root, "audit", "--batch", batchID[1])
	if code != 0 || !strings.Contains(stdout, "mismatches: 0") {
		t.Fatalf("audit: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestHE1OneCandidatePerScreen: the seed's template as it ships (its one target's
// canonical reference needed), its route a page of the feature folder. A run renders one
// candidate, for the canonical view populated/dark, keeps it as the seed names it in the
// feature's .argus-runs/, and sets the template's manifest entry to candidate in
// spec.json, changing no other byte; the other three views ask for nothing. The next run
// renders nothing and asks again for nothing: the candidate awaits the person. A
// report-only run renders no candidate and leaves spec.json and the feature folder as
// they were.
func TestHE1OneCandidatePerScreen(t *testing.T) {
	browsertest.Need(t)
	page := func(spec string) string {
		return strings.Replace(spec, `"route": "http://localhost:3000/example"`, `"route": "page.html"`, 1)
	}
	project := func(mode string) (string, string, []byte) {
		root := seedProject(t, "version: 1\nname: he1\nargus_runs: true\nacs:\n  - {id: example, kind: rubric, spec: argus/specs/example/spec.json, mode: "+mode+"}\n", page)
		feature := filepath.Join(root, "argus", "specs", "example")
		html := `<!doctype html><main id="screen.example"><p id="state.example.empty">No items</p><button id="button.createItem">New</button><div id="row.item.1">Row</div></main>`
		if err := os.WriteFile(filepath.Join(feature, "page.html"), []byte(html), 0o644); err != nil {
			t.Fatal(err)
		}
		spec, _ := os.ReadFile(filepath.Join(feature, "spec.json"))
		return root, feature, spec
	}
	root, feature, spec := project("headless")
	out := t.TempDir()
	stdout, stderr, code := runState(t, root, "run", ".", "--out", out)
	m := readRubricManifest(t, out)
	views := m.Features[0].Views
	if m.Features[0].Status != string(argus.StatusNeedsContext) || len(views) != 4 {
		t.Fatalf("exit %d, feature %+v\n%s\n%s", code, m.Features[0], stdout, stderr)
	}
	for _, v := range views {
		canonical := v.View == "list/populated/dark"
		if v.Status != "needs_context" || (v.Candidate != nil) != canonical || (v.Render != nil) {
			t.Errorf("%s: %s, candidate %s, render %s, reason %q", v.View, v.Status, v.Candidate, v.Render, v.Reason)
		}
		if canonical && (v.SpecChange == nil || v.SpecChange.File != "argus/specs/example/spec.json" || v.SpecChange.Patch.Op != "replace" ||
			v.SpecChange.Patch.Path != "/targets/0/references/0/status" || v.SpecChange.Patch.Value != "candidate") {
			t.Errorf("%s: spec change %+v", v.View, v.SpecChange)
		}
		if !canonical && !strings.Contains(v.Reason, "its canonical view renders the candidate") {
			t.Errorf("%s: reason %q", v.View, v.Reason)
		}
	}
	candidates, _ := filepath.Glob(filepath.Join(out, "*", "example", "candidates", "*"))
	if len(candidates) != 1 || filepath.Base(candidates[0]) != "list-populated-dark.png" {
		t.Fatalf("candidates in the output folder: %v", candidates)
	}
	png, err := os.ReadFile(filepath.Join(feature, ".argus-runs", "candidates", "list-populated-dark.png"))
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("the candidate where the seed keeps it: %v", err)
	}
	after, _ := os.ReadFile(filepath.Join(feature, "spec.json"))
	if want := bytes.Replace(spec, []byte(`"status": "needed"`), []byte(`"status": "candidate"`), 1); !bytes.Equal(after, want) {
		t.Fatalf("spec.json after HE-1:\n%s", after)
	}
	if strings.Contains(stdout, "0 blocked") && strings.Contains(stdout, "every AC was blocked") {
		t.Errorf("the summary contradicts itself:\n%s", stdout)
	}

	// The next run: nothing rendered, nothing asked again.
	out2 := t.TempDir()
	stdout, stderr, _ = runState(t, root, "run", ".", "--out", out2)
	for _, v := range readRubricManifest(t, out2).Features[0].Views {
		if v.Status != "needs_context" || v.Candidate != nil || v.Render != nil || v.SpecChange != nil {
			t.Errorf("run 2, %s: %s, candidate %s, render %s", v.View, v.Status, v.Candidate, v.Render)
		}
		if v.View == "list/populated/dark" && !strings.Contains(v.Reason, ".argus-runs/candidates/list-populated-dark.png awaits a person") {
			t.Errorf("run 2, %s: reason %q\n%s", v.View, v.Reason, stderr)
		}
	}
	if again, _ := os.ReadFile(filepath.Join(feature, "spec.json")); !bytes.Equal(again, after) {
		t.Fatalf("run 2 changed spec.json:\n%s", again)
	}

	// Report-only: the gap is reported, nothing durable is written.
	root, feature, spec = project("report-only")
	out3 := t.TempDir()
	stdout, stderr, _ = runState(t, root, "run", ".", "--out", out3)
	for _, v := range readRubricManifest(t, out3).Features[0].Views {
		if v.Status != "needs_context" || v.Candidate != nil || v.Render != nil || v.SpecChange != nil {
			t.Errorf("report-only, %s: %s, candidate %s, render %s", v.View, v.Status, v.Candidate, v.Render)
		}
		if v.View == "list/populated/dark" && !strings.Contains(v.Reason, "report-only renders no candidate") {
			t.Errorf("report-only, %s: reason %q\n%s%s", v.View, v.Reason, stdout, stderr)
		}
	}
	if after, _ := os.ReadFile(filepath.Join(feature, "spec.json")); !bytes.Equal(after, spec) {
		t.Fatalf("report-only changed spec.json:\n%s", after)
	}
	if _, err := os.Stat(filepath.Join(feature, ".argus-runs")); !os.IsNotExist(err) {
		t.Fatalf("report-only wrote .argus-runs/: %v", err)
	}
}

// TestRunTargetConvergesOneTarget: `tribunal run --target list` converges the views of
// that target alone (--screen is the seed's alias), `--ac` takes a view's job id, and an
// unknown target or view is a usage error naming what there is. With argus_runs the
// feature's .argus-runs/ holds each view's loop state as state-<view>.json and each judged
// iteration's verdict, in the seed's shapes (loop_state.py's state file;
// verdict_validate.py's normalized verdict).
func TestRunTargetConvergesOneTarget(t *testing.T) {
	twoTargets := func(spec string) string {
		spec = presentApp(spec)
		detail := `,
    {
      "id": "detail",
      "route": "app://example/detail",
      "states": ["populated"],
      "a11y_contract": ["screen.detail"],
      "references": [
        { "state": "populated", "appearance": "light", "status": "present", "file": "references/detail-populated-light.png" }
      ]
    }
  ]
}`
		i := strings.LastIndex(spec, "]")
		return spec[:i-3] + detail + "\n"
	}
	root := seedProject(t, "version: 1\nname: targets\nargus_runs: true\nacs:\n  - {id: example, kind: rubric, spec: argus/specs/example/spec.json, mode: headless}\n", twoTargets)
	sense := appAdapter(t, root)
	runs := filepath.Join(root, "argus", "specs", "example", ".argus-runs")
	rows := func(stdout string) []string {
		var res struct {
			Results []struct {
				ACID   string `json:"ac_id"`
				Status string `json:"status"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("%v\n%s", err, stdout)
		}
		var out []string
		for _, r := range res.Results {
			out = append(out, r.ACID+" "+r.Status)
		}
		return out
	}
	stdout, stderr, code := run(t, root, "run", ".", "--adapter", "app="+sense, "--target", "list", "--out", t.TempDir(), "--json")
	want := []string{"example--list--empty--light signed_off", "example--list--empty--dark signed_off",
		"example--list--populated--light signed_off", "example--list--populated--dark signed_off"}
	if got := rows(stdout); code != 0 || !slices.Equal(got, want) {
		t.Fatalf("--target list: exit %d, rows %v\n%s", code, got, stderr)
	}
	if _, err := os.Stat(filepath.Join(runs, "state-detail-populated-light.json")); !os.IsNotExist(err) {
		t.Fatalf("the other target was converged too: %v", err)
	}
	var state map[string]any
	data, err := os.ReadFile(filepath.Join(runs, "state-list-populated-dark.json"))
	if err != nil || json.Unmarshal(data, &state) != nil {
		t.Fatalf("state file: %v\n%s", err, data)
	}
	keys := make([]string, 0, len(state))
	for k := range state {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"attempts", "consecutive_passes", "feature", "frozen", "iteration", "reference_source", "target"}) ||
		state["target"] != "list/populated/dark" || state["iteration"] != 2.0 || state["consecutive_passes"] != 2.0 || state["feature"] != "example" {
		t.Fatalf("state-list-populated-dark.json is not loop_state.py's state:\n%s", data)
	}
	var verdict argus.Verdict
	data, err = os.ReadFile(filepath.Join(runs, "list-populated-dark", "iteration-1.json"))
	if err != nil || json.Unmarshal(data, &verdict) != nil {
		t.Fatalf("iteration verdict: %v\n%s", err, data)
	}
	if verdict.Iteration != 1 || !verdict.AllPass || len(verdict.FailedDimensions) != 0 || len(verdict.Dimensions) != 7 || verdict.Target != "list" {
		t.Fatalf("iteration-1.json: %s", data)
	}
	if _, err := argus.ParseVerdict(data); err != nil {
		t.Fatalf("iteration-1.json is not a valid verdict: %v", err)
	}
	// The confirmation was unchanged: no judge, so no verdict file for iteration 2.
	if _, err := os.Stat(filepath.Join(runs, "list-populated-dark", "iteration-2.json")); !os.IsNotExist(err) {
		t.Fatalf("iteration-2.json: %v", err)
	}

	stdout, stderr, code = run(t, root, "run", ".", "--adapter", "app="+sense, "--screen", "detail", "--out", t.TempDir(), "--json")
	if got := rows(stdout); code != 0 || !slices.Equal(got, []string{"example--detail--populated--light signed_off"}) {
		t.Fatalf("--screen detail: exit %d, rows %v\n%s", code, got, stderr)
	}
	stdout, stderr, code = run(t, root, "run", ".", "--adapter", "app="+sense, "--ac", "example--list--empty--dark", "--out", t.TempDir(), "--json")
	if got := rows(stdout); code != 0 || !slices.Equal(got, []string{"example--list--empty--dark signed_off"}) {
		t.Fatalf("--ac with a view id: exit %d, rows %v\n%s", code, got, stderr)
	}
	if _, stderr, code = run(t, root, "run", ".", "--target", "nope"); code != 2 || !strings.Contains(stderr, "example:list, example:detail") {
		t.Fatalf("--target nope: exit %d\n%s", code, stderr)
	}
	if _, stderr, code = run(t, root, "run", ".", "--ac", "example--list--empty--sepia"); code != 2 || !strings.Contains(stderr, "no such view") {
		t.Fatalf("--ac with an unknown view: exit %d\n%s", code, stderr)
	}
}
