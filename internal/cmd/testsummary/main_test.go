package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestSummarise: passing tests' output is dropped as go test drops it, a failing test's
// is shown, and every skip is listed with its reason, one line per package and reason.
func TestSummarise(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		`{"Action":"run","Package":"p/a","Test":"TestOK"}`,
		`{"Action":"output","Package":"p/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}`,
		`{"Action":"pass","Package":"p/a","Test":"TestOK"}`,
		`{"Action":"output","Package":"p/a","Test":"TestChrome","Output":"    web_test.go:12: chromium not installed: .ci/run installs it\n"}`,
		`{"Action":"output","Package":"p/a","Test":"TestChrome","Output":"--- SKIP: TestChrome (0.00s)\n"}`,
		`{"Action":"skip","Package":"p/a","Test":"TestChrome"}`,
		`{"Action":"output","Package":"p/a","Test":"TestChrome2","Output":"    web_test.go:30: chromium not installed: .ci/run installs it\n"}`,
		`{"Action":"skip","Package":"p/a","Test":"TestChrome2"}`,
		`{"Action":"output","Package":"p/a","Output":"ok  \tp/a\t0.1s\n"}`,
		`{"Action":"output","Package":"p/b","Test":"TestBad","Output":"    b_test.go:3: want 1, got 2\n"}`,
		`{"Action":"fail","Package":"p/b","Test":"TestBad"}`,
		`{"Action":"output","Package":"p/b","Output":"FAIL\tp/b\t0.2s\n"}`,
		`{"Action":"fail","Package":"p/b"}`,
	}, "\n")
	var out bytes.Buffer
	failed, err := summarise(strings.NewReader(in), &out)
	if err != nil || !failed {
		t.Fatalf("failed %v, err %v", failed, err)
	}
	got := out.String()
	for _, want := range []string{"ok  \tp/a\t0.1s\n", "b_test.go:3: want 1, got 2", "FAIL\tp/b",
		"  SKIP p/a: chromium not installed: .ci/run installs it (TestChrome, TestChrome2)\n", "go test: 1 passed, 1 failed, 2 skipped\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "=== RUN   TestOK") {
		t.Errorf("a passing test's output is shown:\n%s", got)
	}
}
