package cireport

import (
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/verdicts"
)

// The JUnit XML here follows the schema the Jenkins xUnit plugin publishes (junit-10.xsd,
// vendored under testdata, which the tests validate against): a testsuites root, one
// testsuite per batch with its properties, one testcase per AC. A test case's kind,
// verdict, reason and page go in its system-out, since the schema gives a testcase no
// properties of its own.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Package    string          `xml:"package,attr,omitempty"`
	File       string          `xml:"file,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitProblem `xml:"failure"`
	Error     *junitProblem `xml:"error"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Type    string `xml:"type,attr"`
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// maxMessage bounds a failure's message attribute: CI systems show it in one line.
const maxMessage = 500

// WriteJUnit writes res as JUnit XML: one test case per AC, named by its id and classed by
// its kind ("tribunal.ab"). An AC whose grade fails under o.Policy is a failure when it is
// a finding (block, fix, polish: the type says which) and an error when it is blocked or
// a schema violation; every other AC passes, its finding (if any) said in its output.
func WriteJUnit(w io.Writer, res *client.Results, o Options) error {
	c := count(res, o.Policy)
	suite := junitSuite{Name: res.BatchID, Tests: len(res.Rows), Failures: c.failures, Errors: c.errors,
		Package: "tribunal." + res.Tenant, File: res.Source}
	suite.Properties = []junitProperty{
		{"tenant", res.Tenant}, {"batch_id", res.BatchID}, {"source", res.Source},
		{"judges", strings.Join(res.Judges, ", ")}, {"exit_code", strconv.Itoa(res.Summary.ExitCode)},
		{"fail_on", o.Policy.String()},
	}
	for i, r := range res.Rows {
		g := c.grades[i]
		tc := junitCase{Name: r.ACID, Classname: "tribunal." + r.Kind}
		var out strings.Builder
		fmt.Fprintf(&out, "kind: %s\nstatus: %s\nverdict: %s\ngrade: %s\n", r.Kind, r.Status, result(r), g)
		if s := verdicts.ScoreOf(r); s != nil {
			fmt.Fprintf(&out, "score: %.3f\n", *s)
		}
		if r.Judge != "" {
			judgeName := r.Judge
			if r.Cached {
				judgeName += " (cached)"
			}
			fmt.Fprintf(&out, "judge: %s\n", judgeName)
		}
		if n := note(r); n != "" {
			fmt.Fprintf(&out, "reason: %s\n", n)
		}
		if a := o.artifact(r.ACID); a != "" {
			fmt.Fprintf(&out, "artifact: %s\n", a)
		}
		if p := o.page(r.ACID); p != "" {
			fmt.Fprintf(&out, "page: %s\n", p)
		}
		if g != verdicts.Clean && !o.Policy.Fails(g) {
			fmt.Fprintf(&out, "not failing: --fail-on %s\n", o.Policy)
		}
		tc.SystemOut = out.String()
		if o.Policy.Fails(g) {
			prob := &junitProblem{Type: string(g), Message: clip(oneLine(headline(r, g)+": "+note(r)), maxMessage), Text: note(r)}
			if g == verdicts.Blocked || g == verdicts.SchemaViolation {
				tc.Error = prob
			} else {
				tc.Failure = prob
			}
		}
		suite.Cases = append(suite.Cases, tc)
	}
	doc := junitSuites{Name: "tribunal", Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors, Suites: []junitSuite{suite}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}
