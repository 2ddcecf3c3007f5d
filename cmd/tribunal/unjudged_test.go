package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// TestNoJudgeLineAgreesWithCounts: a batch no judge was asked about says why in the words
// of its rows, so a batch stopped by a red gate (0 blocked, 1 finding) no longer reads
// "every AC was blocked".
func TestNoJudgeLineAgreesWithCounts(t *testing.T) {
	res := &client.Results{BatchID: "b", Tenant: "t", Summary: events.BatchCompleted{Total: 3, Blocked: 1, Suggestions: 1, ExitCode: 1},
		Rows: []client.Row{{ACID: "a--list--s--a", Kind: "rubric", Status: "needs_fixes"}, {ACID: "b", Kind: "ab", Status: "blocked"},
			{ACID: "c--list--s--a", Kind: "rubric", Status: "needs_context"}}}
	var out bytes.Buffer
	if err := printResults(&out, res, "", false); err != nil {
		t.Fatal(err)
	}
	want := "no judge was asked: 1 stopped by a red gate, 1 blocked before judging, 1 waiting for a reference image (HE-1)\n"
	if !strings.Contains(out.String(), want) || strings.Contains(out.String(), "every AC was blocked") {
		t.Fatalf("got:\n%s", out.String())
	}
}
