package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/judge/scripted"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// runAudit runs the audit command in-process and returns its output and exit code.
func runAudit(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := newAuditCmd()
	var out bytes.Buffer
	cmd.SilenceUsage, cmd.SilenceErrors = true, true // as under the root command
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	var ee exitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		if ee.err != nil {
			out.WriteString(ee.err.Error())
		}
		return out.String(), ee.code
	}
	t.Fatalf("audit %v: %v", args, err)
	return "", -1
}

// TestAuditCmd audits a batch judged by running services: clean (exit 0, text and JSON),
// then with its ab manifest overwritten (exit 1, the manifest named), and usage errors
// (exit 2).
func TestAuditCmd(t *testing.T) {
	env := e2e.NewEnv(t)
	env.Bus = bus.Config{}
	p, err := scripted.New(scripted.Options{Fixtures: map[string]string{"ab": "A"}, Named: "ab"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := env.StartWith(app.Options{Provider: p, Instance: "test", CloseTimeout: 5 * time.Second})

	files := map[string]string{}
	yaml := "version: 1\nname: audit\nacs:\n"
	for i := 1; i <= 3; i++ {
		files[fmt.Sprintf("o%d.md", i)] = fmt.Sprintf("ours %d\n", i)
		files[fmt.Sprintf("r%d.md", i)] = fmt.Sprintf("reference %d\n", i)
		yaml += fmt.Sprintf("  - {id: AC-%d, criterion: clear, ours: o%d.md, reference: r%d.md}\n", i, i, i)
	}
	files["batch.yaml"] = yaml
	sub := env.Submit(e2e.WriteBatch(t, files), "team-a")
	c, err := client.Watch(ctx, r.Buckets, sub.Tenant, sub.BatchID, 20*time.Millisecond, func(client.Progress) {})
	if err != nil {
		t.Fatal(err)
	}
	_, js := natstest.Connect(t, env.NATS.URL)
	e2e.WaitBatchCompleted(t, js, sub.Tenant, sub.BatchID)
	blobDir := env.BlobDir
	conn := []string{"--nats", env.NATS.URL, "--blob", "file://" + blobDir}
	out, code := runAudit(t, append(conn, "--batch", sub.BatchID, "--tenant", "team-a")...)
	if code != 0 || !strings.Contains(out, "jobs: 3") || !strings.Contains(out, "mismatches: 0") || !strings.Contains(out, "ok: every decision") {
		t.Fatalf("clean batch: exit %d\n%s", code, out)
	}
	out, code = runAudit(t, append(conn, "--batch", sub.BatchID, "--json")...)
	var rep audit.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || rep.Jobs != 3 || len(rep.Mismatches) != 0 || rep.Batches[0].Digest != c.Digest {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, out)
	}

	auditJobs(t, conn, sub.BatchID, records.New(r.Buckets))

	ref := c.Manifests["ab"]
	path := filepath.Join(blobDir, "team-a", "sha256", ref.SHA256[:2], ref.SHA256)
	if err := os.WriteFile(path, []byte(`{"review_id":"forged"}`), 0o640); err != nil {
		t.Fatal(err)
	}
	out, code = runAudit(t, append(conn, "--since", "1h")...)
	if code != 1 || !strings.Contains(out, "UNREADABLE") || !strings.Contains(out, ref.SHA256) {
		t.Fatalf("tampered manifest: exit %d\n%s", code, out)
	}

	if out, code = runAudit(t, append(conn, "--batch", "no-such-batch")...); code != 2 || !strings.Contains(out, "no events") {
		t.Fatalf("unknown batch: exit %d\n%s", code, out)
	}
	if out, code = runAudit(t, conn...); code != 2 || !strings.Contains(out, "--batch") {
		t.Fatalf("no selection: exit %d\n%s", code, out)
	}
	if out, code = runAudit(t, append(conn, "--since", "yesterday")...); code != 2 || !strings.Contains(out, "RFC 3339") {
		t.Fatalf("bad time: exit %d\n%s", code, out)
	}
}

// auditJobs audits single jobs of TestAuditCmd's clean batch (--job): one of its jobs
// passes, its JSON mismatches [] as a batch's are; a job the batch never had fails
// (exit 2), the error naming the tenant, the batch and the job and saying the stream
// holds no event of it and the aggregator no record (it passed, "ok: every decision of
// job NOPE-1 ... re-derives"); a record of a job the stream holds no event of is a
// finding (exit 1).
func auditJobs(t *testing.T, conn []string, batch string, st records.Store) {
	t.Helper()
	args := append(conn, "--batch", batch, "--tenant", "team-a", "--job")
	out, code := runAudit(t, append(args, "AC-2")...)
	if code != 0 || !strings.Contains(out, "jobs: 1") || !strings.Contains(out, "ok: every decision of job AC-2") {
		t.Fatalf("--job AC-2: exit %d\n%s", code, out)
	}
	out, code = runAudit(t, append(args, "AC-2", "--json")...)
	if code != 0 || !strings.Contains(out, `"mismatches": []`) {
		t.Fatalf("--job AC-2 --json: exit %d, want \"mismatches\": []\n%s", code, out)
	}

	for _, extra := range [][]string{nil, {"--json"}} {
		out, code = runAudit(t, append(append(args, "NOPE-1"), extra...)...)
		if code != 2 || strings.Contains(out, "ok: every decision") {
			t.Fatalf("--job NOPE-1 %v: want exit 2, got %d\n%s", extra, code, out)
		}
		for _, want := range []string{"job NOPE-1 of batch " + batch + " of tenant team-a", "the stream holds no event of the job", "the aggregator holds no record of it"} {
			if !strings.Contains(out, want) {
				t.Fatalf("--job NOPE-1 %v: the error does not say %q\n%s", extra, want, out)
			}
		}
	}
	if out, code = runAudit(t, append(args, "NOPE-1", "--no-state")...); code != 2 || !strings.Contains(out, "not looked up (--no-state)") {
		t.Fatalf("--job NOPE-1 --no-state: exit %d\n%s", code, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	j, _, err := st.Job(ctx, "team-a", batch, "AC-1")
	if err != nil {
		t.Fatal(err)
	}
	j.ACID = "NOPE-2"
	if _, err := st.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	out, code = runAudit(t, append(args, "NOPE-2")...)
	if code != 1 || !strings.Contains(out, "MISSING team-a/"+batch+" job NOPE-2") || !strings.Contains(out, "the stream holds no event of it") {
		t.Fatalf("--job NOPE-2, a record without events: exit %d\n%s", code, out)
	}
}
