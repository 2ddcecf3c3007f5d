package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/internal/testutil/browsertest"
	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
)

// writeFiles writes files (slash-separated paths relative to root, contents) with the
// given mode.
func writeFiles(t *testing.T, root string, mode os.FileMode, files map[string]string) {
	t.Helper()
	for rel, body := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
}

// solidPNG is a small PNG, a stand-in for an approved reference image.
func solidPNG(t *testing.T) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 6))
	for x := range 8 {
		for y := range 6 {
			img.Set(x, y, color.RGBA{R: 11, G: 11, B: 15, A: 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// seedTemplateProject lays seed 004's _template feature out as the seed's README says a
// project does (its spec.json, tokens.json and contrast-pairs.json copied into
// argus/specs/example/), with the project's gates adapter at argus/adapters/web/gates.sh
// printing gatesJSON, and a batch at the project root. Two edits make the template
// runnable: its route (http://localhost:3000/example) goes to a loopback server holding
// the example page, and its canonical reference is approved (present).
func seedTemplateProject(t *testing.T, gatesJSON string) string {
	t.Helper()
	root := t.TempDir()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/example" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `<!doctype html><html><body style="background:#0B0B0F;color:#F5F5F7">
<main id="screen.example"><h1>Items</h1><section id="state.example.empty"></section>
<ul><li id="row.item.1">First item <small>subtitle</small></li></ul>
<button id="button.createItem" style="background:#1A4DBD;color:#FFFFFF">Create item</button></main></body></html>`)
	}))
	t.Cleanup(page.Close)
	feature := filepath.Join(root, "argus", "specs", "example")
	if err := os.CopyFS(feature, os.DirFS(filepath.Join(repoRoot(t), "pkg", "kind", "rubric", "argus", "testdata", "seed-template"))); err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(feature, "spec.json")
	spec, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(spec), `"http://localhost:3000/example"`, `"`+page.URL+`/example"`, 1)
	edited = strings.Replace(edited, `"status": "needed"`, `"status": "present"`, 1)
	if edited == string(spec) {
		t.Fatal("the template's spec.json changed: route or reference status not found")
	}
	writeFiles(t, root, 0o644, map[string]string{
		"argus/specs/example/spec.json":                          edited,
		"argus/specs/example/spec.md":                            "# example\n\nA list of items with a create button; an empty state when there are none.\n",
		"argus/specs/example/references/list-populated-dark.png": solidPNG(t),
		"batch.yaml": "version: 1\nname: seed-template\nacs:\n  - {id: example, kind: rubric, spec: argus/specs/example/spec.json, mode: headless}\n",
	})
	writeFiles(t, root, 0o755, map[string]string{"argus/adapters/web/gates.sh": "#!/bin/sh\necho '" + gatesJSON + "'\n"})
	return root
}

// passingRubricJudge is an OpenAI-compatible server whose every rubric verdict passes.
func passingRubricJudge(t *testing.T) *fakellm.Server {
	t.Helper()
	verdict, _ := json.Marshal(e2e.RubricVerdict(nil, true, []string{}))
	llm := fakellm.New(fakellm.Options{Respond: func(openai.ChatCompletionRequest, int) fakellm.Reply {
		return fakellm.Reply{Content: string(verdict)}
	}})
	t.Cleanup(llm.Close)
	t.Setenv("OPENAI_API_KEY", "sk-local")
	return llm
}

type viewResult struct {
	ACID   string `json:"ac_id"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Reason string `json:"reason"`
}

// runResults runs `tribunal run` in dir and reads its results.json.
func runResults(t *testing.T, dir string, env []string, args ...string) (rows []viewResult, out, stderr string, code int) {
	t.Helper()
	out = t.TempDir()
	stdout, stderr, code := runEnv(t, dir, append([]string{"TRIBUNAL_EPHEMERAL=true"}, env...), append([]string{"run", ".", "--json", "--out", out}, args...)...)
	var res struct {
		Results []viewResult `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("run: exit %d, %v\n%s\n%s", code, err, stdout, stderr)
	}
	return res.Results, out, stderr, code
}

// TestSeedTemplateProjectGates is seed 004's invariant 2, "The judge never runs while
// gates are red", with the gates adapter where the seed puts it ("Gates adapter optional
// at argus/adapters/web/gates.sh") and no adapter flag: a build the project's gates.sh
// calls failed keeps every view of the seed's template from the judge and from a sign-off,
// its gate result naming build and the script; the same project with the build passing
// signs every view off.
func TestSeedTemplateProjectGates(t *testing.T) {
	browsertest.Need(t)
	llm := passingRubricJudge(t)
	judge := []string{"--judge", "openai", "--judge-model", "judge", "--openai-base-url", llm.BaseURL()}

	red := seedTemplateProject(t, `{"build":"fail","lint":"pass","type_check":"pass"}`)
	rows, out, stderr, code := runResults(t, red, nil, judge...)
	if code != 1 || len(rows) != 4 {
		t.Fatalf("red build: exit %d, %d views\n%s", code, len(rows), stderr)
	}
	for _, r := range rows {
		if r.Status == "signed_off" || !strings.Contains(r.Detail, "failing gates [build]") {
			t.Errorf("red build: %s %s: %s", r.ACID, r.Status, r.Detail)
		}
	}
	if n := llm.Calls(); n != 0 {
		t.Fatalf("red build: the judge was asked %d times", n)
	}
	results, _ := filepath.Glob(filepath.Join(out, "*", "example", "*", "iteration-1", "gate-result.json"))
	if len(results) != 4 {
		t.Fatalf("gate results: %v", results)
	}
	var gr struct {
		Gates    map[string]any `json:"gates"`
		AllGreen bool           `json:"all_green"`
		Tribunal struct {
			GatesAdapter string            `json:"gates_adapter"`
			Skipped      map[string]string `json:"skipped"`
		} `json:"tribunal"`
	}
	data, _ := os.ReadFile(results[0])
	if err := json.Unmarshal(data, &gr); err != nil || gr.AllGreen || gr.Gates["build"] != "fail" || gr.Gates["token_contrast"] != "pass" ||
		gr.Tribunal.GatesAdapter != "argus/adapters/web/gates.sh" || gr.Tribunal.Skipped["flows"] != "not reported by argus/adapters/web/gates.sh" {
		t.Fatalf("gate result %s (%v)", data, err)
	}

	green := seedTemplateProject(t, `{"build":"pass","lint":"pass","type_check":"pass"}`)
	rows, _, stderr, code = runResults(t, green, nil, judge...)
	if code != 0 || len(rows) != 4 {
		t.Fatalf("green build: exit %d, %d views\n%s", code, len(rows), stderr)
	}
	for _, r := range rows {
		if r.Status != "signed_off" {
			t.Errorf("green build: %s %s: %s", r.ACID, r.Status, r.Detail)
		}
	}
	if llm.Calls() == 0 {
		t.Fatal("green build: signed off without asking the judge")
	}
}

// appProject is a native-app feature laid out as seed 004 says (argus/specs/tasks/, the
// examples/rubric-app feature) with its adapter's scripts where the seed puts them,
// argus/adapters/app/sense.sh and gates.sh. Each script records what it saw (working
// directory, $0, arguments, three variables) in <root>/<script>.seen; gates.sh also
// copies the spec it was handed, read from its working directory.
func appProject(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(filepath.Join(root, "argus", "specs", "tasks"), os.DirFS(filepath.Join(repoRoot(t), "examples", "rubric-app"))); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"sense.sh", "batch.yaml"} {
		if err := os.Remove(filepath.Join(root, "argus", "specs", "tasks", f)); err != nil {
			t.Fatal(err)
		}
	}
	seen := `here=$(cd "$(dirname "$0")/../../.." && pwd)
{ pwd; echo "$0"; printf '%s\n' "$@"; echo "udid=${ARGUS_SIM_UDID:-}"; echo "child=${SIMCTL_CHILD_ARGUS_FIXTURE:-}"; echo "secret=${TRIBUNAL_TEST_SECRET:-}"; } > "$here/$(basename "$0").seen"
`
	writeFiles(t, root, 0o755, map[string]string{
		"argus/adapters/app/sense.sh": "#!/bin/sh\nset -eu\n" + seen + `while [ $# -gt 0 ]; do case "$1" in --out) out=$2; shift 2;; *) shift 2;; esac; done
cp argus/specs/tasks/references/list-populated-light.png "$out/render.png"
echo '{"tree":[{"id":"screen.list","role":"main","name":"Tasks"},{"id":"button.createItem","role":"button","name":"New task"}]}' > "$out/probe.json"
`,
		"argus/adapters/app/gates.sh": "#!/bin/sh\nset -eu\n" + seen + `spec=$2
cp "$spec" "$here/gates-spec.copy"
echo '{"build":"pass","lint":"pass","type_check":"pass","flows":"pass"}'
`,
	})
	writeFiles(t, root, 0o644, map[string]string{
		"batch.yaml": "version: 1\nname: app\nacs:\n  - {id: tasks, kind: rubric, spec: argus/specs/tasks/spec.json, mode: headless}\n",
	})
	return root
}

// TestProjectAppAdapter: a feature with adapter app runs with no adapter flag, its
// sensor and gates found where seed 004 puts them ("any other name → require
// argus/adapters/{adapter}/sense.sh; gates adapter at argus/adapters/{adapter}/gates.sh
// if present"). Both run as the seed's loop runs them: from the project root, by their
// path from it, with the seed's argv and the real spec.json; they see what --adapter-env
// (or TRIBUNAL_ADAPTER_ENV) passes, a name and a SIMCTL_CHILD_* prefix, and nothing else
// of tribunal's environment.
func TestProjectAppAdapter(t *testing.T) {
	env := []string{"ARGUS_SIM_UDID=argus-sim-c1", "SIMCTL_CHILD_ARGUS_FIXTURE=three-tasks", "TRIBUNAL_TEST_SECRET=s3cr3t"}
	for _, how := range []struct {
		name string
		env  []string
		args []string
	}{
		{"flag", nil, []string{"--adapter-env", "ARGUS_SIM_UDID", "--adapter-env", "SIMCTL_CHILD_*"}},
		{"variable", []string{"TRIBUNAL_ADAPTER_ENV=ARGUS_SIM_UDID,SIMCTL_CHILD_*"}, nil},
	} {
		t.Run(how.name, func(t *testing.T) {
			root := appProject(t)
			rows, _, stderr, code := runResults(t, root, append(env, how.env...), how.args...)
			if code != 0 || len(rows) != 1 || rows[0].Status != "signed_off" {
				t.Fatalf("exit %d %+v\n%s", code, rows, stderr)
			}
			vars := []string{"udid=argus-sim-c1", "child=three-tasks", "secret="}
			for script, args := range map[string][]string{
				"sense.sh": {"--route", "app://tasks/list", "--state", "populated", "--appearance", "light", "--fixture", "three-tasks", "--out"},
				"gates.sh": {"--spec", "argus/specs/tasks/spec.json", "--target", "list", "--state", "populated", "--appearance", "light", "--probe"},
			} {
				data, err := os.ReadFile(filepath.Join(root, script+".seen"))
				if err != nil {
					t.Fatalf("%s never ran: %v", script, err)
				}
				got := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
				want := append([]string{root, "argus/adapters/app/" + script}, args...)
				if len(got) != len(want)+1+len(vars) || strings.Join(got[:len(want)], "\n") != strings.Join(want, "\n") ||
					strings.Join(got[len(want)+1:], " ") != strings.Join(vars, " ") {
					t.Errorf("%s saw %q, want %q, a folder, %q", script, got, want, vars)
				}
			}
			copied, _ := os.ReadFile(filepath.Join(root, "gates-spec.copy"))
			real, _ := os.ReadFile(filepath.Join(root, "argus", "specs", "tasks", "spec.json"))
			if len(copied) == 0 || !bytes.Equal(copied, real) {
				t.Errorf("gates.sh was not handed the real spec.json: %q", copied)
			}
		})
	}
}

// TestServedProjectAdaptersBlocked: on a shared deployment a team's project never becomes
// a command. A feature whose project ships argus/adapters/app/gates.sh, submitted to
// services whose operator registered a sensor for app but no gates command, is BLOCKED
// naming the script and the flag, never judged on platform gates read as skipped; one
// whose project ships a sensor nobody registered is BLOCKED naming it. Neither project
// script runs.
func TestServedProjectAdaptersBlocked(t *testing.T) {
	root := appProject(t)
	if err := os.CopyFS(filepath.Join(root, "argus", "specs", "kiosk"), os.DirFS(filepath.Join(root, "argus", "specs", "tasks"))); err != nil {
		t.Fatal(err)
	}
	spec, _ := os.ReadFile(filepath.Join(root, "argus", "specs", "kiosk", "spec.json"))
	writeFiles(t, root, 0o644, map[string]string{
		"argus/specs/kiosk/spec.json": strings.Replace(strings.Replace(string(spec), `"adapter": "app"`, `"adapter": "kiosk"`, 1), `"feature": "tasks-app"`, `"feature": "kiosk"`, 1),
		"batch.yaml":                  "version: 1\nname: app\nacs:\n  - {id: tasks, kind: rubric, spec: argus/specs/tasks/spec.json, mode: headless}\n  - {id: kiosk, kind: rubric, spec: argus/specs/kiosk/spec.json, mode: headless}\n",
	})
	writeFiles(t, root, 0o755, map[string]string{"argus/adapters/kiosk/sense.sh": "#!/bin/sh\ntouch \"$(dirname \"$0\")/ran\"\nexit 1\n"})
	// The operator's sensor for app lives outside the project.
	opDir := t.TempDir()
	writeFiles(t, opDir, 0o755, map[string]string{"sense.sh": `#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in --out) out=$2; shift 2;; *) shift 2;; esac; done
cp "` + filepath.Join(root, "argus", "specs", "tasks", "references", "list-populated-light.png") + `" "$out/render.png"
echo '{"tree":[{"id":"screen.list"},{"id":"button.createItem"}]}' > "$out/probe.json"
`})
	natsURL, blobURL, _ := serveStack(t, "--adapter", "app="+filepath.Join(opDir, "sense.sh"))
	conn := []string{"--nats", natsURL, "--blob", blobURL}
	stdout, stderr, code := run(t, root, append([]string{"submit", "."}, conn...)...)
	if code != 0 {
		t.Fatalf("submit exit %d: %s", code, stderr)
	}
	stdout, stderr, code = run(t, "", append([]string{"watch", "--batch", strings.TrimSpace(stdout), "--json"}, conn...)...)
	var res struct {
		Results []viewResult `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != 4 || len(res.Results) != 2 {
		t.Fatalf("watch: exit %d %v\n%s\n%s", code, err, stdout, stderr)
	}
	want := map[string][]string{
		"tasks--list--populated--light": {"the project ships argus/adapters/app/gates.sh", "--gates-adapter app=", "not judged on platform gates read as skipped"},
		"kiosk--list--populated--light": {"the project ships argus/adapters/kiosk/sense.sh", "--adapter kiosk="},
	}
	for _, r := range res.Results {
		if r.Status != "blocked" {
			t.Errorf("%s: %s %s", r.ACID, r.Status, r.Reason)
		}
		for _, w := range want[r.ACID] {
			if !strings.Contains(r.Reason, w) {
				t.Errorf("%s: %q does not say %q", r.ACID, r.Reason, w)
			}
		}
	}
	for _, f := range []string{"sense.sh.seen", "gates.sh.seen", "argus/adapters/kiosk/ran"} {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(f))); err == nil {
			t.Errorf("a served service ran the project's script (%s)", f)
		}
	}
}
