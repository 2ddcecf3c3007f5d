package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/junittest"
)

// junitDoc is the part of a JUnit report the tests read.
type junitDoc struct {
	Suites []struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Cases    []struct {
			Name    string `xml:"name,attr"`
			Failure *struct {
				Type string `xml:"type,attr"`
			} `xml:"failure"`
			Error *struct {
				Type string `xml:"type,attr"`
			} `xml:"error"`
			SystemOut string `xml:"system-out"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// TestCIOutputs is the quickstart as a GitHub Actions job runs it: with --junit and
// --markdown and GITHUB_ACTIONS=true, the JUnit validates against the published schema and
// holds one test case per AC, its failures the findings and its errors the blocked ACs
// of results.json; the annotations name each of them; the summary is a Markdown table,
// appended to the step summary too; --fail-on sets the exit code.
func TestCIOutputs(t *testing.T) {
	dir := projectDir(t)
	summary := filepath.Join(dir, "step-summary.md")
	env := []string{"TRIBUNAL_EPHEMERAL=true", "GITHUB_ACTIONS=true", "GITHUB_STEP_SUMMARY=" + summary}
	stdout, stderr, code := runEnv(t, dir, env, "run", "examples/quickstart", "--junit", "out.xml", "--markdown", "out.md")
	if code != 1 {
		t.Fatalf("exit %d, want the batch's 1\n%s\n%s", code, stdout, stderr)
	}
	results, _ := filepath.Glob(filepath.Join(dir, "out", "quickstart-*", "results.json"))
	if len(results) != 1 {
		t.Fatalf("results.json: %v", results)
	}
	var res struct {
		Rows []struct {
			ACID   string `json:"ac_id"`
			Status string `json:"status"`
			Tag    string `json:"tag"`
		} `json:"results"`
	}
	data, _ := os.ReadFile(results[0])
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	var wantFailures, wantErrors []string
	for _, r := range res.Rows {
		switch {
		case r.Tag != "":
			wantFailures = append(wantFailures, r.ACID+" "+r.Tag)
		case r.Status == "blocked":
			wantErrors = append(wantErrors, r.ACID+" blocked")
		}
	}

	junittest.Validate(t, filepath.Join(dir, "out.xml"))
	var doc junitDoc
	data, _ = os.ReadFile(filepath.Join(dir, "out.xml"))
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	s := doc.Suites[0]
	if s.Tests != len(res.Rows) || len(s.Cases) != len(res.Rows) || s.Failures != len(wantFailures) || s.Errors != len(wantErrors) {
		t.Fatalf("suite: %d tests (%d cases), %d failures, %d errors; results.json has %d ACs, failures %v, errors %v",
			s.Tests, len(s.Cases), s.Failures, s.Errors, len(res.Rows), wantFailures, wantErrors)
	}
	var failures, errs []string
	for i, c := range s.Cases {
		if c.Name != res.Rows[i].ACID || !strings.Contains(c.SystemOut, "kind: ") || !strings.Contains(c.SystemOut, "page: http://127.0.0.1:8090/t/default/b/") {
			t.Errorf("case %d: %s\n%s", i, c.Name, c.SystemOut)
		}
		if c.Failure != nil {
			failures = append(failures, c.Name+" "+c.Failure.Type)
		}
		if c.Error != nil {
			errs = append(errs, c.Name+" "+c.Error.Type)
		}
	}
	if strings.Join(failures, ",") != strings.Join(wantFailures, ",") || strings.Join(errs, ",") != strings.Join(wantErrors, ",") {
		t.Errorf("failures %v errors %v; want %v and %v", failures, errs, wantFailures, wantErrors)
	}

	// One annotation per finding and blocked AC, each naming the AC and its artifact.
	var annotated []string
	for _, m := range regexp.MustCompile(`(?m)^::error file=([^,]+),title=tribunal (AC-\d+) (\w+) \(ab\)::`).FindAllStringSubmatch(stdout, -1) {
		annotated = append(annotated, m[2]+" "+m[3])
		if _, err := os.Stat(filepath.Join(dir, m[1])); err != nil && m[2] != "AC-10" { // AC-10's artifact is missing on purpose
			t.Errorf("annotation of %s names %s: %v", m[2], m[1], err)
		}
	}
	want := append(append([]string(nil), wantFailures...), wantErrors...)
	sort.Strings(want)
	sort.Strings(annotated)
	if strings.Join(annotated, ",") != strings.Join(want, ",") {
		t.Errorf("annotations %v, want %v\n%s", annotated, want, stdout)
	}

	md, _ := os.ReadFile(filepath.Join(dir, "out.md"))
	step, _ := os.ReadFile(summary)
	if !strings.Contains(string(md), "| AC | kind | grade | result | reason | page |\n|---|---|---|---|---|---|\n| AC-1 | ab | **") || string(step) != string(md) {
		t.Errorf("summary:\n%s\nstep summary:\n%s", md, step)
	}

	// The policy decides the exit code: only schema violations fail (none here), or blocks.
	if _, stderr, code := runEnv(t, dir, env, "run", "examples/quickstart", "--fail-on", "schema_violation", "-q"); code != 0 {
		t.Errorf("--fail-on schema_violation: exit %d\n%s", code, stderr)
	}
	if _, _, code := run(t, dir, "run", "examples/quickstart", "--fail-on", "block", "-q"); code != 1 {
		t.Errorf("--fail-on block: exit %d, want 1", code)
	}
	if _, stderr, code := run(t, dir, "run", "examples/quickstart", "--fail-on", "blok"); code != 2 || !strings.Contains(stderr, `--fail-on "blok"`) {
		t.Errorf("--fail-on blok: exit %d\n%s", code, stderr)
	}
}

// TestCIWorkflowExamples holds the example workflows under examples/ci to actionlint.
func TestCIWorkflowExamples(t *testing.T) {
	bin, err := exec.LookPath("actionlint")
	if err != nil {
		t.Skip("actionlint not installed: .ci/run installs it (go install github.com/rhysd/actionlint/cmd/actionlint@v1.7.12)")
	}
	files, _ := filepath.Glob(filepath.Join(repoRoot(t), "examples", "ci", "*.yml"))
	if len(files) < 2 {
		t.Fatalf("example workflows: %v", files)
	}
	if out, err := exec.Command(bin, append([]string{"-no-color"}, files...)...).CombinedOutput(); err != nil {
		t.Fatalf("actionlint: %v\n%s", err, out)
	}
}
