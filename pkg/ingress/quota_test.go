package ingress_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

func randomBlob(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func putBlob(t *testing.T, url, tok string, data []byte) (int, ingress.Problem) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url+ingress.PathBlobs, bytes.NewReader(data))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set(ingress.HeaderExpectedSHA256, sha(data))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p ingress.Problem
	_ = jsonDecode(resp.Body, &p)
	return resp.StatusCode, p
}

// TestQuotaStored: a team at its quota of stored bytes gets 413 naming the quota for a
// new blob, and nothing is stored; the same blob again costs nothing; the other team,
// whose quota is its own, stores and submits as before. On de157a3 one team filled the
// shared store and the other's next submit failed with a bare 500.
func TestQuotaStored(t *testing.T) {
	m := telemetry.Reset()
	f := start(t, true, ingress.Config{Quotas: ingress.Quotas{Default: ingress.Quota{Stored: 96 << 10}}})
	first := randomBlob(t, 64<<10)
	if code, p := putBlob(t, f.url, tokA, first); code != http.StatusCreated {
		t.Fatalf("first blob: %d %+v", code, p)
	}
	second := randomBlob(t, 64<<10)
	code, p := putBlob(t, f.url, tokA, second)
	if code != http.StatusRequestEntityTooLarge || p.Quota != ingress.RefusedQuotaStored || !strings.Contains(p.Error, "--tenant-max-stored") || !strings.Contains(p.Error, "96.0 KiB") {
		t.Fatalf("a blob past the quota: %d %+v", code, p)
	}
	if _, err := f.env.Store.Stat(ctxT(t), blob.Ref{Tenant: "team-a", SHA256: sha(second)}); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("the refused blob was stored: %v", err)
	}
	if got := m.Value("tribunal_refusals_total", "service=ingress", "reason="+ingress.RefusedQuotaStored); got != 1 {
		t.Errorf("refusals counted: %v", got)
	}
	if code, p := putBlob(t, f.url, tokA, first); code != http.StatusCreated {
		t.Errorf("a blob the team stores already: %d %+v", code, p)
	}
	// Through the client, the refusal stops the submission, naming the quota.
	a := dial(t, f, tokA)
	files := e2e.TextBatch(1, "")
	files["ours/0.md"] = "# Notes\n" + hex.EncodeToString(randomBlob(t, 20<<10)) + "\n"
	big := e2e.WriteBatch(t, files)
	if _, err := (&client.Submitter{Pub: a, Store: a}).Submit(ctxT(t), big, "team-a", client.NewBatchID(big)); !errors.Is(err, ingress.ErrQuota) || !strings.Contains(err.Error(), "--tenant-max-stored") {
		t.Errorf("team-a's submission at its quota: %v", err)
	}

	// team-b is untouched by team-a's full quota.
	b := dial(t, f, tokB)
	batch := e2e.WriteBatch(t, e2e.TextBatch(3, ""))
	sub, err := (&client.Submitter{Pub: b, Store: b}).Submit(ctxT(t), batch, "team-b", client.NewBatchID(batch))
	if err != nil {
		t.Fatalf("team-b's submit while team-a is at its quota: %v", err)
	}
	waitDone(t, b, sub)
}

// TestQuotaInFlight: a team's batches and ACs in flight are bounded: the batch past the
// quota is refused whole with 429 naming the quota, and nothing of it is published; the
// other team submits as before, and once the first batch completes the team may open
// another.
func TestQuotaInFlight(t *testing.T) {
	f := start(t, false, ingress.Config{Quotas: ingress.Quotas{Default: ingress.Quota{Batches: 1, ACs: 5},
		Tenants: map[string]ingress.Quota{"team-b": {Batches: 4, ACs: 8}}}})
	a := dial(t, f, tokA)
	submit := func(c *ingress.Client, tenant string, n int, suffix string) (client.Submission, error) {
		b := e2e.WriteBatch(t, e2e.TextBatch(n, ""))
		return (&client.Submitter{Pub: c, Store: c}).Submit(ctxT(t), b, tenant, client.NewBatchID(b)+"-"+suffix)
	}
	// No services run: the first batch stays in flight.
	if _, err := submit(a, "team-a", 3, "x1"); err != nil {
		t.Fatal(err)
	}
	before := streamCount(t, f.js)
	_, err := submit(a, "team-a", 1, "x2")
	var ie *ingress.Error
	if !errors.As(err, &ie) || ie.Status != http.StatusTooManyRequests || ie.Problem.Quota != ingress.RefusedQuotaBatches || !strings.Contains(ie.Problem.Error, "--tenant-max-batches") {
		t.Fatalf("a second batch past the quota of 1: %v", err)
	}
	if after := streamCount(t, f.js); after != before {
		t.Errorf("%d events of the refused batch were published", after-before)
	}
	b := dial(t, f, tokB)
	if _, err := submit(b, "team-b", 6, "y1"); err != nil {
		t.Fatalf("team-b, whose own quota is 4 batches of 8 ACs: %v", err)
	}
	_, err = submit(b, "team-b", 3, "y2")
	if !errors.As(err, &ie) || ie.Problem.Quota != ingress.RefusedQuotaACs {
		t.Fatalf("team-b past its ACs in flight: %v", err)
	}
}

// TestStoreFullIsNot500: the blob store itself out of space (a small filesystem) answers
// 507 saying so, not a bare 500.
func TestStoreFullIsNot500(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("a full store needs a small filesystem: mounting a tmpfs failed (root, or CAP_SYS_ADMIN, is needed): %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	store, err := fileblob.New(dir, fileblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ingress.New(ingress.Config{Tokens: map[string]string{tokA: "team-a"}, Store: store,
		Quotas: ingress.Quotas{Default: ingress.Quota{Stored: -1}}}))
	defer srv.Close()
	for i := range 8 {
		code, p := putBlob(t, srv.URL, tokA, randomBlob(t, 300<<10))
		if code == http.StatusCreated {
			continue
		}
		if code != http.StatusInsufficientStorage || !strings.Contains(p.Error, "out of space") {
			t.Fatalf("blob %d on a full store: %d %+v", i, code, p)
		}
		return
	}
	t.Fatal("eight 300 KiB blobs fit a 1 MiB filesystem")
}

func sha(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// waitDone follows a batch through the ingress to its completion.
func waitDone(t *testing.T, c *ingress.Client, sub client.Submission) {
	t.Helper()
	if _, err := client.Poll(ctxT(t), 50*time.Millisecond, func(ctx context.Context) (*client.Progress, error) { return c.Progress(ctx, sub.BatchID) }, func(client.Progress) {}); err != nil {
		t.Fatalf("batch %s did not complete: %v", sub.BatchID, err)
	}
}
