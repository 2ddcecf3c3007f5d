package ingress_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/client"
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

// TestReviewQueueThroughIngress: team-a lists its batch's review queue through the
// ingress, exports it blind (what the state folder's export holds: no AC id, and every
// image it shows is team-a's blob, which team-b's token cannot fetch), imports answers
// as review.recorded events by its token's holder, and sees them in the queue as
// reviewed. Team-b's token gets, on every review endpoint, exactly the answer a batch
// it never had gets from GET /v1/batches/{batch}.
func TestReviewQueueThroughIngress(t *testing.T) {
	f := start(t, true, ingress.Config{})
	c := dial(t, f, tokA)
	b := e2e.WriteBatch(t, e2e.TextBatch(3, "review: {count: 2}\n"))
	sub, err := (&client.Submitter{Pub: c, Store: c}).Submit(ctxT(t), b, c.Tenant(), client.NewBatchID(b))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Poll(ctxT(t), 50*time.Millisecond, func(ctx context.Context) (*client.Progress, error) { return c.Progress(ctx, sub.BatchID) }, func(client.Progress) {}); err != nil {
		t.Fatal(err)
	}

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
	for i, e := range q {
		if e.Item != local[i].Item || e.AC != local[i].AC || len(e.Reviewers) != 0 || e.Job() == nil || e.Job().ACID != e.AC {
			t.Errorf("entry %d: %+v (job %v), want %+v unreviewed", i, e, e.Job(), local[i])
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
	for _, e := range local {
		if strings.Contains(string(got), e.AC) {
			t.Errorf("the blind export names %s", e.AC)
		}
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
	for _, path := range []string{"", "/review", "/review/export"} {
		code, p, _ := get(t, f, tokB, ingress.PathBatches+"/"+sub.BatchID+path)
		ncode, np, _ := get(t, f, tokB, ingress.PathBatches+"/never-submitted"+path)
		if code != http.StatusNotFound || p.Error != "batch team-b/"+sub.BatchID+": not found" ||
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
	// Team-b holding team-a's queue entries still publishes nothing on them.
	if err := client.RecordReview(other, q[0], []byte(`{"raw_winner":"A","confidence":0.9,"biggest_gap":"none"}`), other.Reviewer(), "ingress"); err == nil {
		t.Error("team-b recorded a review of team-a's AC")
	}

	// Team-a imports its answers: checked as on the state folder, by its token's holder.
	if err := client.RecordReview(c, q[0], []byte(`{"raw_winner":"C"}`), c.Reviewer(), "import"); err == nil {
		t.Error("an answer outside the kind's contract was sent")
	}
	for _, e := range q {
		if err := client.RecordReview(c, e, []byte(`{"raw_winner":"B","confidence":0.7,"biggest_gap":"slot B is the target"}`), c.Reviewer(), "import"); err != nil {
			t.Fatal(err)
		}
	}
	me := ingress.Reviewer("team-a", tokA)
	poll.Until(t, 20*time.Second, "the reviews in the queue", func() (bool, string) {
		q, err := c.ReviewQueue(ctxT(t), sub.BatchID)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range q {
			if !slices.Equal(e.Reviewers, []string{me}) {
				return false, e.Item + " reviewed by " + strings.Join(e.Reviewers, ", ")
			}
			if r := e.Job().Reviews; r[0].Via != "ingress" {
				t.Fatalf("%s: reviews %+v", e.Item, r)
			}
		}
		return true, ""
	})
}
