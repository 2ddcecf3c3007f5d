// Package junittest holds JUnit XML to the schema CI systems read it by: the Jenkins
// xUnit plugin's junit-10.xsd (README.md says where it comes from and its licence).
package junittest

import (
	"bytes"
	_ "embed"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

//go:embed junit-10.xsd
var xsd []byte

// Validate holds the JUnit file at path to junit-10.xsd: with libxml2's xmllint when it
// is installed (a subtest that skips, saying so, where it is not) and always with the
// schema's structure checked in Go (CheckStructure).
func Validate(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("xmllint schema", func(t *testing.T) {
		bin, err := exec.LookPath("xmllint")
		if err != nil {
			t.Skip("xmllint not installed (Debian's libxml2-utils; .ci/run installs it): the JUnit is checked structurally only")
		}
		schema := filepath.Join(t.TempDir(), "junit-10.xsd")
		if err := os.WriteFile(schema, xsd, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bin, "--noout", "--schema", schema, path).CombinedOutput(); err != nil {
			t.Fatalf("xmllint --schema junit-10.xsd %s: %v\n%s\n%s", path, err, out, data)
		}
	})
	if err := CheckStructure(data); err != nil {
		t.Fatalf("%s against junit-10.xsd: %v\n%s", path, err, data)
	}
}

// schemaRules are junit-10.xsd's elements as used here: the attributes each allows (true
// when required) and the children it may hold.
var schemaRules = map[string]struct {
	attrs    map[string]bool
	children []string
}{
	"testsuites": {map[string]bool{"name": false, "time": false, "tests": false, "failures": false, "errors": false}, []string{"testsuite"}},
	"testsuite": {map[string]bool{"name": true, "tests": true, "failures": true, "errors": true, "group": false, "time": false, "skipped": false,
		"timestamp": false, "hostname": false, "id": false, "package": false, "file": false, "log": false, "url": false},
		[]string{"testsuite", "properties", "testcase", "system-out", "system-err"}},
	"properties": {map[string]bool{}, []string{"property"}},
	"property":   {map[string]bool{"name": true, "value": true}, nil},
	"testcase": {map[string]bool{"name": true, "time": false, "classname": false, "group": false},
		[]string{"skipped", "error", "failure", "system-out", "system-err"}},
	"failure":    {map[string]bool{"type": false, "message": false}, nil},
	"error":      {map[string]bool{"type": false, "message": false}, nil},
	"skipped":    {map[string]bool{"type": false, "message": false}, nil},
	"system-out": {map[string]bool{}, nil},
	"system-err": {map[string]bool{}, nil},
}

// CheckStructure checks data against junit-10.xsd's structure: the root, each element's
// allowed and required attributes and allowed children, and that the counts each suite
// declares are those of its test cases.
func CheckStructure(data []byte) error {
	dec := xml.NewDecoder(bytes.NewReader(data))
	var stack []string
	type suite struct{ tests, failures, errors, cases, failed, errored int }
	var suites []*suite
	var cur *suite
	numbers := regexp.MustCompile(`^[0-9]+$`)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch el := tok.(type) {
		case xml.StartElement:
			name := el.Name.Local
			rule, ok := schemaRules[name]
			switch {
			case !ok:
				return errors.New("element " + name + " is not in the schema")
			case len(stack) == 0 && name != "testsuites":
				return errors.New("root " + name + ", want testsuites")
			case len(stack) > 0:
				parent := schemaRules[stack[len(stack)-1]]
				allowed := false
				for _, c := range parent.children {
					allowed = allowed || c == name
				}
				if !allowed {
					return errors.New(name + " inside " + stack[len(stack)-1] + " is not allowed")
				}
			}
			seen := map[string]string{}
			for _, a := range el.Attr {
				if _, ok := rule.attrs[a.Name.Local]; !ok {
					return errors.New(name + ": attribute " + a.Name.Local + " is not in the schema")
				}
				seen[a.Name.Local] = a.Value
			}
			for a, required := range rule.attrs {
				if _, ok := seen[a]; required && !ok {
					return errors.New(name + ": required attribute " + a + " missing")
				}
			}
			switch name {
			case "testsuite":
				for _, a := range []string{"tests", "failures", "errors"} {
					if !numbers.MatchString(seen[a]) {
						return errors.New("testsuite " + a + "=" + seen[a] + " is not a count")
					}
				}
				cur = &suite{}
				cur.tests, _ = strconv.Atoi(seen["tests"])
				cur.failures, _ = strconv.Atoi(seen["failures"])
				cur.errors, _ = strconv.Atoi(seen["errors"])
				suites = append(suites, cur)
			case "testcase":
				cur.cases++
			case "failure":
				cur.failed++
			case "error":
				cur.errored++
			}
			stack = append(stack, name)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 && len(schemaRules[stack[len(stack)-1]].children) > 0 && strings.TrimSpace(string(el)) != "" {
				return errors.New("text inside " + stack[len(stack)-1])
			}
		}
	}
	if len(suites) == 0 {
		return errors.New("no testsuite")
	}
	for _, s := range suites {
		if s.tests != s.cases || s.failures != s.failed || s.errors != s.errored {
			return errors.New("a testsuite's counts differ from its test cases")
		}
	}
	return nil
}
