package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadersOpenTheRunsState: after `tribunal run` in a project folder, audit, report
// and results answer from the state folder run kept, with no NATS server and no flag;
// --data-dir reads it from elsewhere; --nats still means a server (the folder is not
// read behind a URL the user named), and a folder without state dials NATS as before.
func TestReadersOpenTheRunsState(t *testing.T) {
	dir := projectDir(t)
	stdout, stderr, code := runState(t, dir, "run", "examples/quickstart")
	if code != 1 {
		t.Fatalf("run exit %d\n%s", code, stderr)
	}
	ids := batchIDs(stdout)
	if len(ids) != 1 {
		t.Fatalf("batch ids in the run's output: %q", ids)
	}
	batchID := strings.Fields(ids[0])[1]

	stdout, stderr, code = runState(t, dir, "audit", "--batch", batchID)
	if code != 0 || !strings.Contains(stdout, "ok: every decision of batch "+batchID+" re-derives") ||
		!strings.Contains(stdout, "key-value state: compared") || !strings.Contains(stderr, "state: reading .tribunal") {
		t.Fatalf("audit in the project folder: exit %d\n%s\n%s", code, stdout, stderr)
	}
	stdout, stderr, code = runState(t, dir, "report", "--batch", batchID)
	if code != 0 || !strings.Contains(stdout, "judge scripted/fixed-A") {
		t.Fatalf("report in the project folder: exit %d\n%s\n%s", code, stdout, stderr)
	}
	stdout, stderr, code = runState(t, dir, "results", "--batch", batchID, "--json")
	if code != 1 { // the batch's own exit code: it has findings
		t.Fatalf("results in the project folder: exit %d\n%s", code, stderr)
	}
	var res struct {
		Summary struct {
			Total    int `json:"total"`
			ExitCode int `json:"exit_code"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Summary.Total != 8 || res.Summary.ExitCode != 1 {
		t.Fatalf("results --json: %+v %v\n%s", res.Summary, err, stdout)
	}

	elsewhere := t.TempDir()
	stdout, stderr, code = runState(t, elsewhere, "audit", "--batch", batchID, "--data-dir", filepath.Join(dir, ".tribunal"))
	if code != 0 || !strings.Contains(stdout, "ok: every decision") {
		t.Fatalf("audit --data-dir: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, stderr, code = runState(t, elsewhere, "audit", "--batch", batchID, "--data-dir", filepath.Join(elsewhere, "none")); code != 2 || !strings.Contains(stderr, "no tribunal state in") {
		t.Fatalf("audit --data-dir of a folder without state: exit %d\n%s", code, stderr)
	}
	for _, d := range []string{dir, elsewhere} {
		args := []string{"audit", "--batch", batchID, "--connect-timeout", "300ms", "--nats", "nats://127.0.0.1:1"}
		_, stderr, code = runState(t, d, args...)
		if code == 0 || strings.Contains(stderr, "state: reading") || !strings.Contains(stderr, "not reachable") {
			t.Fatalf("audit %v in %s: exit %d, want the NATS server dialled\n%s", args, d, code, stderr)
		}
	}
}

// TestReadersWithoutStateFailAtOnce: in a folder with no state and nothing naming a
// server, results, report and audit exit 2 saying there is no state here and what to
// do, instead of dialling a NATS server nobody started.
func TestReadersWithoutStateFailAtOnce(t *testing.T) {
	empty := t.TempDir()
	for _, command := range []string{"results", "report", "audit"} {
		stdout, stderr, code := runState(t, empty, command, "--batch", "x")
		if code != 2 || !strings.Contains(stderr, "no tribunal state here") || !strings.Contains(stderr, "tribunal run <batch>") ||
			!strings.Contains(stderr, "--nats URL") || strings.Contains(stderr, "not reachable") {
			t.Errorf("%s --batch x in an empty folder: exit %d\n%s%s", command, code, stdout, stderr)
		}
	}
}
