// Command testsummary reads `go test -json` on standard input and prints what `go test`
// prints without -v (each package's result, and the output of the tests that failed),
// then every skipped test with the reason it gave, one line per package and reason, and a
// closing count. `go test ./...` hides its skips: a suite that did not run because a tool
// is missing (Chromium, versitygw, xmllint, actionlint) must say so where CI's log is read.
// It exits 1 when a test or a package failed.
//
//	go test -json ./... | go run ./internal/cmd/testsummary
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of test2json.
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
}

// skip is one skipped test and the reason its output gave.
type skip struct {
	pkg, test, reason string
}

func main() {
	failed, err := summarise(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// summarise filters the events of r onto w and reports whether anything failed.
func summarise(r io.Reader, w io.Writer) (bool, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	outputs := map[string][]string{} // a running test's output, by package and test
	var skips []skip
	passed, failedN, skipped := 0, 0, 0
	failed := false
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not an event (go vet's or the build's own words): shown as it is.
			fmt.Fprintln(w, string(line))
			continue
		}
		key := e.Package + "\x00" + e.Test
		switch e.Action {
		case "build-output":
			fmt.Fprint(w, e.Output)
		case "build-fail":
			failed = true
		case "output":
			if e.Test == "" {
				// "PASS" before a package's "ok" line is what -v adds; go test alone drops it.
				if e.Output != "PASS\n" {
					fmt.Fprint(w, e.Output)
				}
			} else {
				outputs[key] = append(outputs[key], e.Output)
			}
		case "pass":
			if e.Test != "" {
				passed++
			}
			delete(outputs, key)
		case "fail":
			failed = true
			if e.Test != "" {
				failedN++
				fmt.Fprint(w, strings.Join(outputs[key], ""))
			}
			delete(outputs, key)
		case "skip":
			if e.Test != "" {
				skipped++
				skips = append(skips, skip{pkg: e.Package, test: e.Test, reason: reasonOf(outputs[key])})
			}
			delete(outputs, key)
		}
	}
	if err := sc.Err(); err != nil {
		return failed, err
	}
	printSkips(w, skips)
	fmt.Fprintf(w, "go test: %d passed, %d failed, %d skipped\n", passed, failedN, skipped)
	return failed || failedN > 0, nil
}

// reasonOf is the message a skipped test logged: its last line before "--- SKIP".
func reasonOf(out []string) string {
	reason := ""
	for _, l := range out {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		// "file_test.go:12: chromium not installed": the words after the position.
		if i := strings.Index(t, ".go:"); i >= 0 {
			if j := strings.Index(t[i+4:], ": "); j >= 0 {
				t = t[i+4+j+2:]
			}
		}
		reason = t
	}
	if reason == "" {
		return "(no reason given)"
	}
	return reason
}

// printSkips writes one line per package and reason, naming its tests.
func printSkips(w io.Writer, skips []skip) {
	if len(skips) == 0 {
		return
	}
	type group struct{ pkg, reason string }
	tests := map[group][]string{}
	var order []group
	for _, s := range skips {
		g := group{s.pkg, s.reason}
		if tests[g] == nil {
			order = append(order, g)
		}
		tests[g] = append(tests[g], s.test)
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].pkg < order[j].pkg })
	what := fmt.Sprintf("%d tests", len(skips))
	if len(skips) == 1 {
		what = "1 test"
	}
	fmt.Fprintf(w, "\nskipped (%s; each line one package and reason):\n", what)
	for _, g := range order {
		names := tests[g]
		shown := names
		if len(shown) > 4 {
			shown = append(append([]string(nil), shown[:4]...), fmt.Sprintf("and %d more", len(names)-4))
		}
		fmt.Fprintf(w, "  SKIP %s: %s (%s)\n", g.pkg, g.reason, strings.Join(shown, ", "))
	}
}
