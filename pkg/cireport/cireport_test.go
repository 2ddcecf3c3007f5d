package cireport

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/junittest"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/verdicts"
)

func f(v float64) *float64 { return &v }
func q(v int) *int         { return &v }

// sample is a quickstart-shaped batch: findings of each route, two blocked ACs, a schema
// violation, clean ones, and a reason with what XML and Markdown must escape.
func sample() *client.Results {
	return &client.Results{Tenant: "default", BatchID: "quickstart-20261130T080000-a1b2c3", Source: "examples/quickstart/batch.yaml",
		Summary: events.BatchCompleted{Total: 9, Compared: 6, Blocked: 2, Violations: 1, Suggestions: 3, ExitCode: 3},
		Judges:  []string{"scripted/fixed-A"},
		Rows: []kind.Row{
			{ACID: "AC-1", Kind: "ab", Status: "compared", Winner: "reference", Confidence: f(1), Tag: "block", BiggestGap: "Slot A says <what> & \"why\" | how", Slots: "slot A was the reference, slot B ours", Judge: "scripted/fixed-A"},
			{ACID: "AC-2", Kind: "ab", Status: "compared", Winner: "reference", Confidence: f(0.8), Tag: "fix", BiggestGap: "misses the field\nand the fix", Judge: "scripted/fixed-A", Cached: true},
			{ACID: "AC-3", Kind: "ab", Status: "compared", Winner: "tie", Confidence: f(0.5), Tag: "polish", Judge: "scripted/fixed-A"},
			{ACID: "AC-7", Kind: "ab", Status: "compared", Winner: "ours", Confidence: f(1), Judge: "scripted/fixed-A"},
			{ACID: "AC-9", Kind: "ab", Status: "blocked", Reason: "ours artifact \"ours/onboarding.mp4\": unsupported artifact: video (.mp4)"},
			{ACID: "AC-10", Kind: "ab", Status: "blocked", Reason: "missing artifact: ours/changelog.html"},
			{ACID: "AC-11", Kind: "critic", Status: "compared", Verdict: "pass", Quality: q(8), Judge: "scripted/fixed-A"},
			{ACID: "AC-12", Kind: "equivalence", Status: "compared", Verdict: "pass", Detail: "0 regressed, 0 diverged, 4 equivalent", Judge: "scripted/fixed-A"},
			{ACID: "AC-13", Kind: "critic", Status: "schema_violation", Reason: "answer: correctness: want an integer 0-10"},
		}}
}

var opts = Options{
	Page: func(ac string) string { return "site/t/default/b/quickstart-20261130T080000-a1b2c3/j/" + ac + ".html" },
	Artifact: func(ac string) string {
		return map[string]string{"AC-1": "examples/quickstart/ours/release-notes.md"}[ac]
	},
}

// TestJUnitValidatesAgainstTheSchema writes the sample as JUnit and validates it against
// the Jenkins xUnit plugin's junit-10.xsd with libxml2's xmllint, then checks the same
// schema's structure in Go, and that failures and errors match the grades.
func TestJUnitValidatesAgainstTheSchema(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, sample(), opts); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "junit.xml")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	junittest.Validate(t, path)
	var doc junitSuites
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	s := doc.Suites[0]
	if s.Tests != 9 || s.Failures != 3 || s.Errors != 3 || doc.Failures != 3 || doc.Errors != 3 || len(s.Cases) != 9 {
		t.Fatalf("counts: suite %d tests %d failures %d errors, root %d/%d; want 9, 3, 3", s.Tests, s.Failures, s.Errors, doc.Failures, doc.Errors)
	}
	want := map[string]string{"AC-1": "failure block", "AC-2": "failure fix", "AC-3": "failure polish", "AC-9": "error blocked", "AC-10": "error blocked", "AC-13": "error schema_violation"}
	for _, c := range s.Cases {
		got := ""
		switch {
		case c.Failure != nil:
			got = "failure " + c.Failure.Type
		case c.Error != nil:
			got = "error " + c.Error.Type
		}
		if got != want[c.Name] {
			t.Errorf("%s: %q, want %q", c.Name, got, want[c.Name])
		}
		for _, line := range []string{"kind: ", "verdict: ", "page: site/t/default/b/"} {
			if !strings.Contains(c.SystemOut, line) {
				t.Errorf("%s: system-out lacks %q:\n%s", c.Name, line, c.SystemOut)
			}
		}
	}
	if c := s.Cases[0]; !strings.Contains(c.Failure.Message, `Slot A says <what> & "why" | how`) || c.Classname != "tribunal.ab" {
		t.Errorf("AC-1 message %q classname %q", c.Failure.Message, c.Classname)
	}
	if !strings.Contains(s.Cases[1].SystemOut, "judge: scripted/fixed-A (cached)") {
		t.Errorf("AC-2 output lacks the cache mark:\n%s", s.Cases[1].SystemOut)
	}

	// Under --fail-on block only AC-1 fails; the other findings pass, saying why.
	p, _ := verdicts.ParsePolicy([]string{"block"})
	buf.Reset()
	if err := WriteJUnit(&buf, sample(), Options{Policy: p}); err != nil {
		t.Fatal(err)
	}
	if err := junittest.CheckStructure(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	doc = junitSuites{}
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if s := doc.Suites[0]; s.Failures != 1 || s.Errors != 0 || !strings.Contains(s.Cases[1].SystemOut, "not failing: --fail-on block") {
		t.Errorf("--fail-on block: %d failures, %d errors; AC-2 output %q", s.Failures, s.Errors, s.Cases[1].SystemOut)
	}
}

func TestMarkdownSummary(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, sample(), opts); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	for _, want := range []string{
		"## tribunal: batch `quickstart-20261130T080000-a1b2c3` (tenant default)",
		"9 ACs: 6 compared, 2 blocked, 1 schema violation, 3 findings; exit code 3.",
		"| AC | kind | grade | result | reason | page |\n|---|---|---|---|---|---|\n",
		"| AC-1 | ab | **block** | reference, confidence 1.00 | Slot A says &lt;what&gt; & \"why\" \\| how (slot A was the reference, slot B ours) | [page](site/t/default/b/quickstart-20261130T080000-a1b2c3/j/AC-1.html) |",
		"| AC-2 | ab | **fix** | reference, confidence 0.80 | misses the field and the fix |",
		"<details><summary>3 ACs clean</summary>",
		"(scripted: recorded answers, no model was asked)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("summary lacks %q:\n%s", want, md)
		}
	}
	// Every table row has the header's seven pipes: no cell breaks the table.
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| AC-") && strings.Count(strings.ReplaceAll(line, `\|`, ""), "|") != 7 {
			t.Errorf("row breaks the table: %s", line)
		}
	}
}

func TestAnnotations(t *testing.T) {
	t.Parallel()
	p, _ := verdicts.ParsePolicy([]string{"block", "blocked"})
	var buf bytes.Buffer
	if err := WriteAnnotations(&buf, sample(), Options{Policy: p, Page: opts.Page, Artifact: opts.Artifact}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d annotations, want one per AC not clean (6):\n%s", len(lines), buf.String())
	}
	if want := "::error file=examples/quickstart/ours/release-notes.md,title=tribunal AC-1 block (ab)::AC-1 block: reference, confidence 1.00: "; !strings.HasPrefix(lines[0], want) {
		t.Errorf("first annotation %q, want prefix %q", lines[0], want)
	}
	if !strings.Contains(lines[0], "%0Aartifact: examples/quickstart/ours/release-notes.md%0Apage: site/t/default/b/") {
		t.Errorf("first annotation lacks artifact and page: %s", lines[0])
	}
	errorsFirst := "error AC-1,error AC-9,error AC-10,warning AC-2,warning AC-3,warning AC-13"
	var got []string
	for _, l := range lines {
		m := regexp.MustCompile(`^::(error|warning) .*title=tribunal (AC-[0-9]+) `).FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("not an annotation: %s", l)
		}
		got = append(got, m[1]+" "+m[2])
	}
	if strings.Join(got, ",") != errorsFirst {
		t.Errorf("annotations %s, want %s", strings.Join(got, ","), errorsFirst)
	}
	if strings.Contains(lines[3], "field\nand") || !strings.Contains(lines[3], "field%0Aand") {
		t.Errorf("a newline in a message is not escaped: %s", lines[3])
	}
}

// TestAnnotationsPastGitHubsLimit: GitHub shows ten of each level a step, so the tenth
// sums up the rest.
func TestAnnotationsPastGitHubsLimit(t *testing.T) {
	t.Parallel()
	res := &client.Results{BatchID: "big"}
	for i := 0; i < 25; i++ {
		res.Rows = append(res.Rows, kind.Row{ACID: "AC-" + string(rune('a'+i)), Kind: "ab", Status: "blocked", Reason: "missing"})
	}
	var buf bytes.Buffer
	if err := WriteAnnotations(&buf, res, Options{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 10 || !strings.Contains(lines[9], "16 ACs more of batch big") {
		t.Fatalf("%d annotations, last %q", len(lines), lines[len(lines)-1])
	}
}

// TestDiffReports: one AC got worse; the text and the Markdown list it as regressed with
// its score before and after, the Markdown as a table, and the policy decides whether it
// fails.
func TestDiffReports(t *testing.T) {
	t.Parallel()
	base := sample().Rows
	next := sample().Rows
	next[3] = kind.Row{ACID: "AC-7", Kind: "ab", Status: "compared", Winner: "reference", Confidence: f(0.95), Tag: "block", BiggestGap: "the page lost its next step"}
	c := verdicts.Compare(base, next)
	d := NewDiff(BatchRef{BatchID: "base-1", From: "base/results.json"}, BatchRef{BatchID: "new-1", From: "state"}, c, verdicts.Policy{})
	if len(d.Failing) != 1 || d.Failing[0] != "AC-7" {
		t.Fatalf("failing %v", d.Failing)
	}
	var txt bytes.Buffer
	if err := d.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"diff base-1 (base, base/results.json) -> new-1 (new, state): 1 regressed, 0 improved, 8 unchanged, 0 added, 0 removed",
		"regressed (1):\n  AC-7", "clean (ours) -> block (reference)", "score 1.00 -> 0.03", "1 regression failing on"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, txt.String())
		}
	}
	var md bytes.Buffer
	if err := d.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### tribunal diff: `base-1` → `new-1`", "| AC | kind | change | base | new | score | note |\n|---|---|---|---|---|---|---|\n",
		"| AC-7 | ab | **regressed** | clean (ours) | block (reference) | 1.00 → 0.03 | the page lost its next step |", "<details><summary>8 ACs added, removed or unchanged</summary>"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	p, _ := verdicts.ParsePolicy([]string{"fix"})
	if d := NewDiff(d.Base, d.New, c, p); len(d.Failing) != 0 || !strings.Contains(d.verdict(), "no regression fails on fix") {
		t.Errorf("--fail-on fix: failing %v (%s)", d.Failing, d.verdict())
	}
}
