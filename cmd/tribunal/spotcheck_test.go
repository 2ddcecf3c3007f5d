package main

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/browsertest"
	"github.com/tribunal-dev/tribunal/internal/testutil/freeport"
)

// awaitingSpotcheck runs the rubric feature in dir in interactive mode with a console
// (the person answers there), waits until its sign-off waits for the spot-check, and
// interrupts the run, as a person who closes the terminal at the HE-2 question would: the
// state folder keeps the sign-off waiting. It returns the batch id.
func awaitingSpotcheck(t *testing.T, dir string) string {
	t.Helper()
	addr := freeport.Addr(t)
	passing := rubricAnswers(t, nil, true, []string{})
	cmd := startInWithEnv(t, dir, []string{"TRIBUNAL_EPHEMERAL="}, "run", ".", "--scripted-answers", passing, "--console", addr, "--out", t.TempDir())
	getJSON := func(path string, v any) bool {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(v) == nil
	}
	batchID := ""
	waitFor(t, 90*time.Second, "the run's sign-off to wait for a person", func() bool {
		var list struct{ Batches []struct{ Batch string } }
		if !getJSON("/api/batches", &list) || len(list.Batches) != 1 {
			return false
		}
		batchID = list.Batches[0].Batch
		var job struct{ Status string }
		return getJSON("/api/t/default/b/"+batchID+"/j/tasks--list--populated--light", &job) && job.Status == "awaiting_spotcheck"
	})
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	return batchID
}

// TestSpotcheckOnRunState: a sign-off left waiting for HE-2 in the state folder `tribunal
// run` keeps is spot-checked by `tribunal spotcheck` in the project folder, with no
// server: a `tribunal view` holding the folder steps aside for it, the aggregator records
// the decision before the command returns, results show it, a second answer is refused
// with the reason, and the audit lists the spot-check and re-derives everything.
func TestSpotcheckOnRunState(t *testing.T) {
	browsertest.Need(t)
	dir := copyFeature(t, "version: 1\nname: rubric\nacs:\n  - {id: tasks, kind: rubric, spec: spec.json, mode: interactive}\n")
	batchID := awaitingSpotcheck(t, dir)
	job := "tasks--list--populated--light"
	startView(t, dir)
	args := []string{"spotcheck", "reject", "--batch", batchID, "--job", job}
	if _, stderr, code := runState(t, dir, append(args, "--dimension", "no-such-dimension")...); code != 2 || !strings.Contains(stderr, "--dimension") ||
		!strings.Contains(stderr, "steps aside for this spotcheck") {
		t.Fatalf("a dimension the rubric lacks, the view holding the folder: exit %d\n%s", code, stderr)
	}
	stdout, stderr, code := runState(t, dir, append(args, "--dimension", "typography")...)
	if code != 0 || !strings.Contains(stdout, "spot-check recorded for "+job+": human_spotcheck typography") {
		t.Fatalf("spotcheck on the run's state: exit %d\n%s\n%s", code, stdout, stderr)
	}
	stdout, stderr, code = runState(t, dir, "results", "--batch", batchID)
	if code != 0 || !regexp.MustCompile(job+`\s+rubric\s+signed_off.*human spot-check typography`).MatchString(stdout) {
		t.Fatalf("results after the spot-check: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, stderr, code = runState(t, dir, "spotcheck", "approve", "--batch", batchID, "--job", job); code != 2 || !strings.Contains(stderr, "its status is signed_off") {
		t.Fatalf("a second spot-check: exit %d\n%s", code, stderr)
	}
	stdout, stderr, code = runState(t, dir, "audit", "--batch", batchID)
	if code != 0 || !regexp.MustCompile(`job `+job+` spotcheck\.recorded \S+ \(seq \d+\): rejected typography by `).MatchString(stdout) ||
		!strings.Contains(stdout, "ok: every decision") {
		t.Fatalf("audit: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
