package attack

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
)

// rss is this process's resident memory in bytes (the ingress runs in it).
func rss(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("resident memory needs /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if kb, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(kb), " kB"), 10, 64)
			return n << 10
		}
	}
	t.Skip("no VmRSS in /proc/self/status")
	return 0
}

// TestHostileBodiesAtTheSharedIngress: five bytes, an array32 header claiming
// 4,294,967,295 events, ended the shared ingress on de157a3 with "fatal error: runtime:
// out of memory" (msgpack allocated the claim), and a claim of 10,000,000 took it from 70
// to 267 MiB; while it was down every team's submit failed. Each is now a 4xx at once,
// the ingress's memory grows by under 10 MiB, and the victim's batch completes.
func TestHostileBodiesAtTheSharedIngress(t *testing.T) {
	w := newWorld(t, worldOptions{})
	claim := func(n uint32) []byte {
		b := []byte{0xdd, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[1:], n)
		return b
	}
	before := rss(t)
	for _, body := range [][]byte{claim(0xffffffff), claim(10_000_000), append(claim(10_000_000), bytes.Repeat([]byte{0xc4, 0}, 1000)...)} {
		start := time.Now()
		code, answer := w.request("team-a", http.MethodPost, ingress.PathEvents, ingress.MediaMsgpack, body, nil)
		took := time.Since(start)
		if code < 400 || code >= 500 || !strings.Contains(string(answer), "claims") {
			t.Errorf("a %d-byte body claiming millions of events: %d %s", len(body), code, answer)
		}
		t.Logf("%d-byte body: %d in %s", len(body), code, took.Round(time.Microsecond))
	}
	if grew := rss(t) - before; grew > 10<<20 {
		t.Errorf("the ingress's resident memory grew by %d MiB refusing them", grew>>20)
	}
	c, sub := w.victim(3)
	w.victimIntact(c, sub)
}

// TestBatchSizeBombs: a job claiming a batch of 2^31 or 2^62 jobs was accepted on
// de157a3 and panicked the aggregator (recovered), leaving a dead letter too large to
// record. The ingress refuses it naming the field, and the victim's batch completes.
func TestBatchSizeBombs(t *testing.T) {
	w := newWorld(t, worldOptions{})
	for _, size := range []int{1 << 31, 1 << 62} {
		ev := events.New(&events.JobSubmitted{Spec: events.JobSpec{Kind: events.KindAB, ACID: "AC-1"}, BatchSize: size}, "team-a", "bomb", "AC-1", 0, "", nil)
		raw, err := json.Marshal(map[string]any{"events": []any{map[string]any{"v": 1, "id": ev.ID, "type": "job.submitted", "tenant": "team-a", "batch": "bomb", "job": "AC-1",
			"data": map[string]any{"spec": map[string]any{"kind": "ab", "ac_id": "AC-1", "criterion": "clear", "ab": map[string]any{
				"ours": map[string]any{"name": "a.md", "error": "missing"}, "reference": map[string]any{"name": "b.md", "error": "missing"}, "threshold": 0.5}},
				"index": 0, "batch_size": size}}}})
		if err != nil {
			t.Fatal(err)
		}
		code, answer := w.request("team-a", http.MethodPost, ingress.PathEvents, ingress.MediaJSON, raw, nil)
		if code != http.StatusBadRequest || !strings.Contains(string(answer), "batch_size") {
			t.Errorf("batch_size %d: %d %s", size, code, answer)
		}
	}
	c, sub := w.victim(3)
	w.victimIntact(c, sub)
}

// TestTeamAtItsQuota: on de157a3 one team filled the shared blob store through PUT
// /v1/blobs and the other team's next submit failed with an unexplained 500. Now a team
// at its quota of stored bytes gets 413 naming the quota, a team at its quota of batches
// in flight 429, and the other team's batch completes with a clean audit.
func TestTeamAtItsQuota(t *testing.T) {
	w := newWorld(t, worldOptions{judgeLatency: 2 * time.Second, ingress: func(c *ingress.Config) {
		c.Quotas = ingress.Quotas{Default: ingress.Quota{Stored: 512 << 10, Batches: 1}}
	}})
	refused := false
	for i := range 8 {
		data := make([]byte, 100<<10)
		if _, err := rand.Read(data); err != nil {
			t.Fatal(err)
		}
		code, answer := w.request("team-a", http.MethodPut, ingress.PathBlobs, "application/octet-stream", data, nil)
		if code == http.StatusCreated {
			continue
		}
		var p ingress.Problem
		_ = json.Unmarshal(answer, &p)
		if code != http.StatusRequestEntityTooLarge || p.Quota != ingress.RefusedQuotaStored || !strings.Contains(p.Error, "--tenant-max-stored") {
			t.Fatalf("team-a's blob %d: %d %s", i, code, answer)
		}
		refused = true
		break
	}
	if !refused {
		t.Fatal("team-a stored 800 KiB under a quota of 512 KiB")
	}
	// team-b's batch is in flight (the judge takes 2 s): a second one is past its quota.
	c, sub := w.victim(3)
	b := w.team("team-b")
	err := w.trySubmit(b, textBatch(1, "second"))
	var ie *ingress.Error
	if !errors.As(err, &ie) || ie.Status != http.StatusTooManyRequests || ie.Problem.Quota != ingress.RefusedQuotaBatches {
		t.Errorf("team-b's second batch in flight: %v", err)
	}
	w.victimIntact(c, sub)
}

// trySubmit submits files as c's team through the ingress and returns the error.
func (w *world) trySubmit(c *ingress.Client, files map[string]string) error {
	w.t.Helper()
	b := e2e.WriteBatch(w.t, files)
	s := &client.Submitter{Pub: c, Store: c}
	_, err := s.Submit(ctxT(w.t), b, c.Tenant(), client.NewBatchID(b)+"-2")
	return err
}

// TestSameIDOtherContent: on de157a3 an event sent again under its id with other content
// (a batch edited and submitted again under its id, a job's spec changed) got 202
// accepted while nothing was published: the team believed its change was in. Now it is
// 409 naming the field that differs, and the first content stands.
func TestSameIDOtherContent(t *testing.T) {
	w := newWorld(t, worldOptions{})
	a := w.team("team-a")
	files := textBatch(2, "first")
	b := e2e.WriteBatch(w.t, files)
	id := client.NewBatchID(b)
	if _, err := (&client.Submitter{Pub: a, Store: a}).Submit(ctxT(t), b, "team-a", id); err != nil {
		t.Fatal(err)
	}
	files["batch.yaml"] = strings.Replace(files["batch.yaml"], "the notes are clear", "the notes are short", 1)
	edited := e2e.WriteBatch(w.t, files)
	_, err := (&client.Submitter{Pub: a, Store: a}).Submit(ctxT(t), edited, "team-a", id)
	var ie *ingress.Error
	if !errors.As(err, &ie) || ie.Status != http.StatusConflict || !strings.Contains(ie.Problem.Error, "the payload's digest differs") {
		t.Fatalf("the edited batch under the same id: %v", err)
	}
	c, sub := w.victim(3)
	w.victimIntact(c, sub)
}
