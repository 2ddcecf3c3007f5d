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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge/scripted"
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
	srv := natstest.Start(t)
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	blobDir := t.TempDir()
	store, err := fileblob.New(blobDir, fileblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := scripted.New(scripted.Options{Winner: "A"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := app.Start(ctx, nc, app.Options{Store: store, Provider: p, Instance: "test", CloseTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)

	dir := t.TempDir()
	yaml := "version: 1\nname: audit\nacs:\n"
	for i := 1; i <= 3; i++ {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("o%d.md", i)), []byte(fmt.Sprintf("ours %d\n", i)), 0o644)
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("r%d.md", i)), []byte(fmt.Sprintf("reference %d\n", i)), 0o644)
		yaml += fmt.Sprintf("  - {id: AC-%d, criterion: clear, ours: o%d.md, reference: r%d.md}\n", i, i, i)
	}
	os.WriteFile(filepath.Join(dir, "batch.yaml"), []byte(yaml), 0o644)
	b, err := batch.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := (&client.Submitter{Pub: r.Pub, Store: store}).Submit(ctx, b, "team-a", client.NewBatchID(b))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Watch(ctx, r.Buckets, sub.Tenant, sub.BatchID, 20*time.Millisecond, func(client.Progress) {})
	if err != nil {
		t.Fatal(err)
	}

	// The completion is recorded before its events are published: wait for the last one.
	js, _ := jetstream.New(nc)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err := js.Stream(ctx, "TRIBUNAL")
		if err == nil {
			if m, err := st.GetLastMsgForSubject(ctx, "tribunal.team-a.batch.completed"); err == nil {
				if ev, err := events.Decode(m.Data); err == nil && ev.BatchID == sub.BatchID {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("batch.completed never reached the stream")
		}
	}
	conn := []string{"--nats", srv.URL, "--blob", "file://" + blobDir}
	out, code := runAudit(t, append(conn, "--batch", sub.BatchID, "--tenant", "team-a")...)
	if code != 0 || !strings.Contains(out, "jobs: 3") || !strings.Contains(out, "mismatches: 0") || !strings.Contains(out, "ok: every decision") {
		t.Fatalf("clean batch: exit %d\n%s", code, out)
	}
	out, code = runAudit(t, append(conn, "--batch", sub.BatchID, "--json")...)
	var rep audit.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || rep.Jobs != 3 || len(rep.Mismatches) != 0 || rep.Batches[0].Digest != c.Digest {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, out)
	}

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
