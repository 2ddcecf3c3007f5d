package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
)

// writeTextBatch writes a batch of n ab ACs over small distinct text files into dir.
func writeTextBatch(t *testing.T, dir string, n int) {
	t.Helper()
	var b strings.Builder
	b.WriteString("version: 1\nname: killed\nacs:\n")
	for i := range n {
		for _, side := range []string{"o", "r"} {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s%d.md", side, i)), []byte(fmt.Sprintf("# %s %d\nItem %d.\n", side, i, i)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Fprintf(&b, "  - {id: AC-%d, criterion: the notes are clear, ours: o%d.md, reference: r%d.md}\n", i+1, i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "batch.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// killedSubmission starts `tribunal submit` on dir, reads the batch id from its first
// line, and kills it as soon as more than after of its jobs reached the stream.
func killedSubmission(t *testing.T, dir string, conn []string, submitted func() uint64, after uint64) (id string, published uint64) {
	t.Helper()
	before := submitted()
	cmd := exec.Command(binary, append([]string{"submit", dir}, conn...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	if !lines.Scan() {
		t.Fatalf("submit printed nothing: %s", errb.String())
	}
	id = lines.Text()
	// Freeze it as soon as its jobs reach the stream, then kill it.
	deadline := time.Now().Add(2 * time.Minute)
	for submitted() <= before+after {
		if time.Now().After(deadline) {
			t.Fatalf("no job.submitted reached the stream; stderr: %s", errb.String())
		}
		time.Sleep(time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGSTOP)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	// What it had sent before it stopped may still be arriving.
	for published = submitted() - before; ; {
		time.Sleep(200 * time.Millisecond)
		now := submitted() - before
		if now == published {
			break
		}
		published = now
	}
	if lines.Scan() {
		t.Fatalf("submit printed more than its batch id on stdout: %q", lines.Text())
	}
	return id, published
}

// results reads a batch's results through `tribunal results --json` and checks there is
// exactly one per AC.
func results(t *testing.T, id string, n int, conn []string) map[string]resultRow {
	t.Helper()
	stdout, stderr, code := run(t, "", append([]string{"results", "--batch", id, "--json"}, conn...)...)
	var res struct {
		Summary struct{ Total int }
		Results []resultRow
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Summary.Total != n || len(res.Results) != n {
		t.Fatalf("results exit %d: %v, %d results\n%s", code, err, len(res.Results), stderr)
	}
	rows := map[string]resultRow{}
	for _, r := range res.Results {
		if _, dup := rows[r.ACID]; dup {
			t.Fatalf("%s has two results", r.ACID)
		}
		rows[r.ACID] = r
	}
	return rows
}

type resultRow struct {
	ACID   string `json:"ac_id"`
	Status string `json:"status"`
	Reason string `json:"reason"`
}

// TestSubmitKilledThenResumedOrCancelled: `tribunal submit` prints the batch id as its
// first line before it publishes anything, so a submission killed mid-publish can be
// named. `submit --resume <id>` finishes one: exactly N results, none twice, each
// job.submitted stored once, a clean audit. `tribunal cancel <id>` ends another: every AC
// without an outcome, the never-published ones included, blocked as cancelled, the batch
// complete once, a clean audit.
func TestSubmitKilledThenResumedOrCancelled(t *testing.T) {
	const n = 2000
	natsURL, blobURL, _ := serveStack(t)
	conn := []string{"--nats", natsURL, "--blob", blobURL, "--tenant", "team-a"}

	_, js := natstest.Connect(t, natsURL)
	submitted := func() uint64 { return natstest.SubjectCount(t, js, "tribunal.team-a.job.submitted") }

	// Published in windows of 300 ACs, killed in its second window or later: the resume
	// plans the windows again and sends exactly what is missing.
	windowed := append([]string{"--window", "300"}, conn...)
	dir := t.TempDir()
	writeTextBatch(t, dir, n)
	id, got := killedSubmission(t, dir, windowed, submitted, 450)
	t.Logf("submit of %s killed with %d of %d jobs in the stream", id, got, n)
	if got <= 300 || got >= n {
		t.Fatalf("killed with %d of %d jobs published, want it past its first window and before the end", got, n)
	}
	stdout, stderr, code := run(t, "", append([]string{"submit", dir, "--resume", id}, windowed...)...)
	if code != 0 || strings.TrimSpace(stdout) != id || !strings.Contains(stderr, "recorded already") {
		t.Fatalf("resume exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if _, stderr, code := run(t, "", append([]string{"watch", "--batch", id, "-q"}, conn...)...); code > 1 {
		t.Fatalf("watch exit %d: %s", code, stderr)
	}
	results(t, id, n, conn)
	if got := submitted(); got != n {
		t.Errorf("%d job.submitted in the stream, want each of the %d once", got, n)
	}
	if stdout, stderr, code := run(t, "", append([]string{"audit", "--batch", id}, conn...)...); code != 0 {
		t.Fatalf("audit of the resumed batch: exit %d\n%s\n%s", code, stdout, stderr)
	}

	dir = t.TempDir()
	writeTextBatch(t, dir, n)
	id, got = killedSubmission(t, dir, conn, submitted, 0)
	t.Logf("submit of %s killed with %d of %d jobs in the stream", id, got, n)
	var stopped bool
	deadline := time.Now().Add(time.Minute)
	for !stopped {
		// The cancel needs the batch's plan recorded, which the aggregator may not have
		// got to yet.
		_, stderr, code = run(t, "", append([]string{"cancel", id, "--by", "tester"}, conn...)...)
		switch {
		case code == 0 && strings.Contains(stderr, "complete:"):
			stopped = true
		case strings.Contains(stderr, "no plan recorded") && time.Now().Before(deadline):
			time.Sleep(200 * time.Millisecond)
		default:
			t.Fatalf("cancel exit %d: %s", code, stderr)
		}
	}
	rows := results(t, id, n, conn)
	cancelled := 0
	for i := range n {
		r := rows[fmt.Sprintf("AC-%d", i+1)]
		if r.Status == "blocked" {
			cancelled++
			if r.Reason != "cancelled by tester" {
				t.Errorf("%s: blocked %q", r.ACID, r.Reason)
			}
		}
	}
	if cancelled < n-int(got) {
		t.Errorf("%d ACs cancelled, but %d were never published", cancelled, n-int(got))
	}
	if stdout, stderr, code := run(t, "", append([]string{"audit", "--batch", id}, conn...)...); code != 0 {
		t.Fatalf("audit of the cancelled batch: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, stderr, code := run(t, "", append([]string{"cancel", id}, conn...)...); code != 2 || !strings.Contains(stderr, "nothing to cancel") {
		t.Fatalf("cancelling a complete batch: exit %d: %s", code, stderr)
	}
}
