package ingress_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
)

// get sends a GET with tok and reads the answer's status and problem.
func get(t *testing.T, f *fixture, tok, path string) (int, ingress.Problem, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var p ingress.Problem
	_ = json.Unmarshal(data, &p)
	return resp.StatusCode, p, data
}

// submitReviewed submits an n-AC text batch through c with extra batch settings and
// waits for it to complete.
func submitReviewed(t *testing.T, c *ingress.Client, n int, extra string) client.Submission {
	t.Helper()
	b := e2e.WriteBatch(t, e2e.TextBatch(n, extra))
	sub, err := (&client.Submitter{Pub: c, Store: c}).Submit(ctxT(t), b, c.Tenant(), client.NewBatchID(b))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Poll(ctxT(t), 50*time.Millisecond, func(ctx context.Context) (*client.Progress, error) { return c.Progress(ctx, sub.BatchID) }, func(client.Progress) {}); err != nil {
		t.Fatal(err)
	}
	return sub
}

// TestReviewQueueThroughIngress: team-a lists its batch's review queue through the
// ingress, blind (what a reviewer is shown of each item, and nothing of the AC behind
// it), exports it blind (what the state folder's export holds: every image it shows is
// team-a's blob, which team-b's token cannot fetch), records answers by item id by its
// token's holder, and sees them in the listing as its own. Team-b's token gets, on every
// review endpoint, exactly the answer a batch it never had gets from GET
// /v1/batches/{batch}.
func TestReviewQueueThroughIngress(t *testing.T) {
	f := start(t, true, ingress.Config{})
	c := dial(t, f, tokA)
	sub := submitReviewed(t, c, 3, "review: {count: 2}\n")

	q, err := c.ReviewQueue(ctxT(t), sub.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	local, _, err := client.ReviewQueue(ctxT(t), f.running.Buckets, "team-a", sub.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 2 || len(local) != 2 {
		t.Fatalf("queue through the ingress %+v, on the services' state %+v: want 2 each", q, local)
	}
	for i, it := range q {
		want, err := client.ReviewItemOf(ctxT(t), f.env.Store, local[i])
		if err != nil {
			t.Fatal(err)
		}
		g, _ := json.Marshal(it.ReviewItem)
		w, _ := json.Marshal(want)
		if string(g) != string(w) || it.Status != ingress.StatusUnreviewed || it.Yours != nil {
			t.Errorf("item %d: %s %s %+v, want %s unreviewed", i, g, it.Status, it.Yours, w)
		}
	}

	ex, err := c.ReviewExport(ctxT(t), sub.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	want, err := client.BlindReview(ctxT(t), f.env.Store, local)
	if err != nil {
		t.Fatal(err)
	}
	if err := want.AddImages(ctxT(t), f.env.Store, "team-a"); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(ex)
	if w, _ := json.Marshal(want); string(got) != string(w) {
		t.Errorf("export through the ingress\n%s\nwant the state folder's\n%s", got, w)
	}
	if len(ex.Items) != 2 || len(ex.Answer) != 2 {
		t.Fatalf("export %s", got)
	}
	// What the items show is team-a's: the call records they are read from and every
	// image they show are fetched under team-a's tenant only.
	var shas []string
	for _, e := range local {
		for _, call := range e.Job().Calls {
			if call.Record != nil {
				shas = append(shas, call.Record.SHA256)
			}
		}
	}
	for sha := range ex.Images {
		shas = append(shas, sha)
	}
	if len(shas) == 0 {
		t.Fatal("no call record or image to fetch")
	}
	for _, sha := range shas {
		if code, _, _ := get(t, f, tokA, ingress.PathBlobs+"/"+sha); code != http.StatusOK {
			t.Errorf("team-a GET its blob %s: %d", sha, code)
		}
		if code, p, _ := get(t, f, tokB, ingress.PathBlobs+"/"+sha); code != http.StatusNotFound {
			t.Errorf("team-b GET team-a's blob %s: %d %+v", sha, code, p)
		}
	}

	// Team-b is answered on team-a's batch exactly as on a batch nobody submitted.
	other := dial(t, f, tokB)
	for _, path := range []string{"", "/review", "/review/export", "/review/gold"} {
		code, p, _ := get(t, f, tokB, ingress.PathBatches+"/"+sub.BatchID+path)
		ncode, np, _ := get(t, f, tokB, ingress.PathBatches+"/never-submitted"+path)
		if code != http.StatusNotFound || p.Error != "batch team-b/"+sub.BatchID+": not found" || p.Class != ingress.ClassNotFound ||
			ncode != code || np.Error != strings.ReplaceAll(p.Error, sub.BatchID, "never-submitted") {
			t.Errorf("team-b GET %s: %d %q; a batch nobody submitted: %d %q", path, code, p.Error, ncode, np.Error)
		}
	}
	if _, err := other.ReviewQueue(ctxT(t), sub.BatchID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("team-b's ReviewQueue of team-a's batch: %v", err)
	}
	if _, err := other.ReviewExport(ctxT(t), sub.BatchID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("team-b's ReviewExport of team-a's batch: %v", err)
	}
	answer := []byte(`{"raw_winner":"B","confidence":0.7,"biggest_gap":"slot B is the target"}`)
	if _, err := other.RecordAnswers(ctxT(t), sub.BatchID, []byte(`{"`+q[0].Item+`":`+string(answer)+`}`)); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("team-b recorded a review of team-a's item: %v", err)
	}
	// Team-b holding team-a's queue entries still publishes nothing on them.
	if err := client.RecordReview(other, local[0], answer, other.Reviewer(), "ingress"); err == nil {
		t.Error("team-b recorded a review of team-a's AC")
	}

	// Team-a records its answers by item: checked as on the state folder, none recorded
	// when one is wrong, and the refusal names the item, never the AC.
	_, err = c.RecordAnswers(ctxT(t), sub.BatchID, []byte(`{"`+q[0].Item+`":`+string(answer)+`,"`+q[1].Item+`":{"raw_winner":"C"}}`))
	var ie *ingress.Error
	if !errors.As(err, &ie) || ie.Status != http.StatusUnprocessableEntity || ie.Problem.Class != ingress.ClassRefused || !errors.Is(err, errclass.Refused) ||
		len(ie.Problem.Refusals) != 1 || ie.Problem.Refusals[0].Field != q[1].Item || strings.Contains(err.Error(), local[1].AC) {
		t.Fatalf("an answer outside the kind's contract: %v", err)
	}
	if _, err := c.RecordAnswers(ctxT(t), sub.BatchID, []byte(`{"item-000000000000":`+string(answer)+`}`)); !errors.As(err, &ie) || ie.Status != http.StatusUnprocessableEntity {
		t.Errorf("an answer to no item: %v", err)
	}
	body := []byte(`{"` + q[0].Item + `":` + string(answer) + `,"` + q[1].Item + `":` + string(answer) + `}`)
	rec, err := c.RecordAnswers(ctxT(t), sub.BatchID, body)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Items) != 2 || rec.Items[0].Item != q[0].Item || len(rec.Later) != 0 {
		t.Fatalf("recorded %+v", rec)
	}
	me := ingress.Reviewer("team-a", tokA)
	poll.Until(t, 20*time.Second, "the reviews in the listing", func() (bool, string) {
		q, err := c.ReviewQueue(ctxT(t), sub.BatchID)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range q {
			if it.Status != ingress.StatusReviewed || it.Yours == nil || string(it.Yours.Answer) != string(answer) {
				return false, it.Item + " " + it.Status
			}
		}
		return true, ""
	})
	for _, e := range mustQueue(t, f, sub.BatchID) {
		if r := e.Job().Reviews; len(r) != 1 || r[0].By != me || r[0].Via != "ingress" {
			t.Errorf("%s: reviews %+v", e.Item, r)
		}
	}
	// Another token of team-a is another reviewer: reviewed, and not their answer.
	for _, it := range mustList(t, f, tokA2, sub.BatchID).Items {
		if it.Status != ingress.StatusReviewed || it.Yours != nil {
			t.Errorf("%s to another reviewer of team-a: %s, yours %+v", it.Item, it.Status, it.Yours)
		}
	}
	// The gold set's records are the reviewed ACs, with nothing of the judge.
	gold, err := c.ReviewGold(ctxT(t), sub.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	if len(gold) != 2 {
		t.Fatalf("gold %+v", gold)
	}
	for _, j := range gold {
		if len(j.Calls) != 0 || len(j.Reviews) != 1 || j.Reviews[0].Model != "" || j.Reviews[0].Judge.Label != "" || j.Reviews[0].Person.Label == "" {
			t.Errorf("gold record of %s: %+v", j.ACID, j)
		}
	}
}

func mustQueue(t *testing.T, f *fixture, batchID string) []client.ReviewEntry {
	t.Helper()
	q, _, err := client.ReviewQueue(ctxT(t), f.running.Buckets, "team-a", batchID)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// mustList reads one page of the raw listing with tok.
func mustList(t *testing.T, f *fixture, tok, batchID string) ingress.ReviewQueue {
	t.Helper()
	code, p, data := get(t, f, tok, ingress.PathBatches+"/"+batchID+"/review")
	var q ingress.ReviewQueue
	if code != http.StatusOK || json.Unmarshal(data, &q) != nil {
		t.Fatalf("GET review: %d %+v", code, p)
	}
	return q
}
