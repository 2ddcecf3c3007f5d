package console_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/console"
	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// TestReviewOneIdentityBothDoors: one reviewer's token answering an AC through the
// ingress, then through the shared console, is one reviewer (tokens.Reviewer, whatever the
// door): the console's queue marks the ingress's answer as theirs, the console's answer
// replaces it as a change, the ingress shows the later answer as theirs, and the judges'
// agreement counts one review.
func TestReviewOneIdentityBothDoors(t *testing.T) {
	s := startStack(t)
	sub := s.Submit(e2e.WriteBatch(t, e2e.TextBatch(3, "review: {count: 2, seed: s}\n")), tenantA)
	s.WaitComplete(sub, 30*time.Second)
	toks := map[string]string{reviewTokA1: tokens.ReviewerOf(tenantA)}
	js, err := jetstream.New(s.Conn())
	if err != nil {
		t.Fatal(err)
	}
	ing := httptest.NewServer(ingress.New(ingress.Config{Tokens: toks, Pub: bus.NewPublisher(js, bus.ComparePayloads()), Store: s.Store, Buckets: s.run.Buckets}))
	t.Cleanup(ing.Close)
	con := httptest.NewServer(console.New(console.Config{Buckets: s.run.Buckets, Store: s.Store, Pub: s.run.Pub, Tenants: toks}))
	t.Cleanup(con.Close)
	me := tokens.Reviewer(tenantA, reviewTokA1)

	c, err := ingress.Dial(t.Context(), ing.URL, reviewTokA1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Reviewer() != me {
		t.Fatalf("the ingress names the token %q, want %q", c.Reviewer(), me)
	}
	q, err := c.ReviewQueue(t.Context(), sub.BatchID)
	if err != nil || len(q) == 0 {
		t.Fatalf("the ingress's queue: %v %+v", err, q)
	}
	item := q[0].Item
	ac := reviewJob(t, s, sub, item)
	answerA := `{"raw_winner":"A","confidence":0.8,"biggest_gap":"slot A says more"}`
	if _, err := c.RecordAnswers(t.Context(), sub.BatchID, []byte(`{"`+item+`":`+answerA+`}`)); err != nil {
		t.Fatal(err)
	}
	first := s.waitJob(t, sub, ac, 10*time.Second, "the ingress's answer recorded", func(j *records.Job) bool { return len(j.Reviews) == 1 })
	if r := first.Reviews[0]; r.By != me || r.Via != "ingress" {
		t.Fatalf("the ingress's review %+v, want by %q via ingress", r, me)
	}

	// The console sees that answer as the token holder's own.
	w := newWeb(t, con.URL)
	queuePath := "/t/" + tenantA + "/b/" + sub.BatchID + "/review"
	if _, body := w.get(queuePath, reviewTokA1); !strings.Contains(body, "You answered 1 of ") {
		t.Fatalf("the console's queue after the ingress's answer:\n%s", body)
	}
	itemPath := queuePath + "/" + item
	_, body := w.get(itemPath, reviewTokA1)
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no form at %s:\n%s", itemPath, body)
	}
	answerB := `{"raw_winner":"B","confidence":0.6,"biggest_gap":"slot B says it plainer"}`
	if resp, _ := w.do(http.MethodPost, itemPath, reviewTokA1, url.Values{"csrf": {m[1]}, "answer": {answerB}},
		map[string]string{"Origin": con.URL}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the console's answer: %d", resp.StatusCode)
	}
	job := s.waitJob(t, sub, ac, 10*time.Second, "the console's answer recorded", func(j *records.Job) bool {
		return len(j.Reviews) == 1 && j.Reviews[0].Changes == 1
	})
	if r := job.Reviews[0]; r.By != me || r.Via != "console" || r.Replaced != first.Reviews[0].Event || r.Person.Slot != "B" {
		t.Fatalf("the changed review %+v, want by %q via console replacing %s", r, me, first.Reviews[0].Event)
	}

	// The ingress shows the later answer as theirs, and the agreement counts one review.
	poll.Until(t, 10*time.Second, "the ingress's listing shows the change", func() (bool, string) {
		q, err := c.ReviewQueue(t.Context(), sub.BatchID)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range q {
			if it.Item == item {
				return it.Yours != nil && it.Yours.Changes == 1 && strings.Contains(string(it.Yours.Answer), `"B"`), string(it.Status)
			}
		}
		return false, "no item"
	})
	// The same answer again, through the other door, is the same answer: nothing changes.
	if _, err := c.RecordAnswers(t.Context(), sub.BatchID, []byte(`{"`+item+`":`+answerB+`}`)); err != nil {
		t.Fatalf("the console's answer again through the ingress: %v", err)
	}
	jobs, err := records.New(s.run.Buckets).LoadJobs(t.Context(), tenantA, sub.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := client.ReviewAgreement(jobs, 1)
	if err != nil || rep == nil || rep.Reviews != 1 || rep.Reviewed != 1 || rep.Via["console"] != 1 || len(rep.Via) != 1 {
		t.Fatalf("agreement %+v, %v: want one review, via the console", rep, err)
	}
}
