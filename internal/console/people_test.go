package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/console"
	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

const (
	reviewTokA1 = "review-token-team-a-ann-0123456789"
	reviewTokA2 = "review-token-team-a-bob-0123456789"
	reviewTokB  = "review-token-team-b-eve-0123456789"
)

// TestReviewQueuePerTeam: the shared console's review queue is a team's own. A team-b
// token neither sees team-a's queue nor records an answer in it (404, as for a batch that
// does not exist, with its own valid form token); two people of team-a, each with a token
// of their own, are two reviewers, named by their credential; the same person answering
// again is one answer, the later, counted as a change.
func TestReviewQueuePerTeam(t *testing.T) {
	s := startStack(t)
	files := e2e.TextBatch(3, "review: {count: 2, seed: s}\n")
	sub := s.Submit(e2e.WriteBatch(t, files), tenantA)
	subB := s.Submit(e2e.WriteBatch(t, e2e.TextBatch(1, "review: {count: 1}\n")), tenantB)
	s.WaitComplete(sub, 30*time.Second)
	s.WaitComplete(subB, 30*time.Second)
	srv := httptest.NewServer(console.New(console.Config{Buckets: s.run.Buckets, Store: s.Store, Pub: s.run.Pub,
		Tenants: map[string]string{reviewTokA1: tenantA, reviewTokA2: tenantA, reviewTokB: tenantB}}))
	t.Cleanup(srv.Close)
	w := newWeb(t, srv.URL)
	queuePath := "/t/" + tenantA + "/b/" + sub.BatchID + "/review"

	resp, body := w.get(queuePath, reviewTokA1)
	items := regexp.MustCompile(`item-[0-9a-f]{12}`).FindAllString(body, -1)
	if resp.StatusCode != http.StatusOK || len(items) < 2 || strings.Contains(body, "AC-") {
		t.Fatalf("team-a's queue: %d\n%s", resp.StatusCode, body)
	}
	itemPath := queuePath + "/" + items[0]
	csrf := func(tok string, path string) string {
		t.Helper()
		_, body := w.get(path, tok)
		m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no form at %s:\n%s", path, body)
		}
		return m[1]
	}
	answer := func(tok, form, raw string) *http.Response {
		t.Helper()
		resp, _ := w.do(http.MethodPost, itemPath, tok, url.Values{"csrf": {form}, "answer": {`{"raw_winner":"` + raw + `","confidence":0.8,"biggest_gap":"one slot says more"}`}},
			map[string]string{"Origin": srv.URL})
		return resp
	}

	if resp, _ := w.get(queuePath, reviewTokB); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("team-b sees team-a's queue: %d", resp.StatusCode)
	}
	if resp, _ := w.get(itemPath, reviewTokB); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("team-b sees team-a's item: %d", resp.StatusCode)
	}
	// team-b's own form token, from its own queue's item.
	bItem := client.ReviewItemID(tenantB, subB.BatchID, "AC-1")
	if resp := answer(reviewTokB, csrf(reviewTokB, "/t/"+tenantB+"/b/"+subB.BatchID+"/review/"+bItem), "A"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("team-b's answer to team-a's item: %d", resp.StatusCode)
	}
	reviews := func() []records.Review {
		t.Helper()
		recs, err := records.New(s.run.Buckets).LoadJobs(t.Context(), tenantA, sub.BatchID)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if client.ReviewItemID(tenantA, sub.BatchID, r.ACID) == items[0] {
				return r.Reviews
			}
		}
		t.Fatal("no job for the item")
		return nil
	}
	if r := reviews(); len(r) != 0 {
		t.Fatalf("team-b's answer was recorded: %+v", r)
	}

	if resp := answer(reviewTokA1, csrf(reviewTokA1, itemPath), "A"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("team-a's answer: %d", resp.StatusCode)
	}
	if resp := answer(reviewTokA2, csrf(reviewTokA2, itemPath), "B"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("team-a's second reviewer: %d", resp.StatusCode)
	}
	if resp := answer(reviewTokA1, csrf(reviewTokA1, itemPath), "B"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("team-a's changed answer: %d", resp.StatusCode)
	}
	s.waitJob(t, sub, reviewJob(t, s, sub, items[0]), 10*time.Second, "the changed answer recorded", func(j *records.Job) bool {
		return len(j.Reviews) == 2 && j.Reviews[0].Changes == 1
	})
	r := reviews()
	if r[0].By == r[1].By || !strings.HasPrefix(r[0].By, "team-a (token ") || r[0].Via != "console" || r[0].Person.Slot != "B" {
		t.Fatalf("reviews %+v", r)
	}
	// The team's report page: the agreement, each disagreement one click from its AC.
	ac := reviewJob(t, s, sub, items[0])
	_, body = w.get("/t/"+tenantA+"/b/"+sub.BatchID+"/report", reviewTokA1)
	if !strings.Contains(body, "Agreement with people") || !strings.Contains(body, "agreement 0/2 = 0.000") ||
		!strings.Contains(body, `href="/t/`+tenantA+`/b/`+sub.BatchID+`/j/`+ac+`"`) {
		t.Fatalf("the report page:\n%s", body)
	}
	if resp, body := w.do(http.MethodPost, itemPath, reviewTokA1, url.Values{"csrf": {csrf(reviewTokA1, itemPath)}, "answer": {`{"raw_winner":"ours"}`}},
		map[string]string{"Origin": srv.URL}); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "review-error") {
		t.Fatalf("an answer outside the contract: %d\n%s", resp.StatusCode, body)
	}
}

// reviewJob is the AC id of a queue item.
func reviewJob(t *testing.T, s *stack, sub client.Submission, item string) string {
	t.Helper()
	q, _, err := client.ReviewQueue(t.Context(), s.run.Buckets, sub.Tenant, sub.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := client.FindReviewEntry(q, item)
	if !ok {
		t.Fatalf("no %s in the queue", item)
	}
	return e.AC
}

// TestLateDecidingReviewOnTheBatchPage: in a batch whose reviews decide, a person's
// answer in the console after the batch completed revises the stored completion: the
// batch page says it was revised by people, and its AC table (the stored index) shows
// the person's winner.
func TestLateDecidingReviewOnTheBatchPage(t *testing.T) {
	s := startStack(t)
	sub := s.Submit(e2e.WriteBatch(t, e2e.TextBatch(2, "review: {count: 1, seed: s, decides: true}\n")), tenantA)
	s.WaitComplete(sub, 30*time.Second)
	srv := httptest.NewServer(console.New(console.Config{Buckets: s.run.Buckets, Store: s.Store, Pub: s.run.Pub,
		Tenants: map[string]string{reviewTokA1: tenantA}}))
	t.Cleanup(srv.Close)
	w := newWeb(t, srv.URL)
	base := "/t/" + tenantA + "/b/" + sub.BatchID
	_, body := w.get(base+"/review", reviewTokA1)
	item := regexp.MustCompile(`item-[0-9a-f]{12}`).FindString(body)
	if item == "" {
		t.Fatalf("queue:\n%s", body)
	}
	itemPath := base + "/review/" + item
	ac := reviewJob(t, s, sub, item)
	judged := s.waitJob(t, sub, ac, 10*time.Second, "the judged job", func(j *records.Job) bool { return j.Final() })
	judgeWinner := ab.DecidedOf(judged.Decided.KindPart).Winner
	// The slot the judge did not pick.
	slot := "A"
	if string(ab.Unshuffle("A", ab.Assign(ac, 0))) == judgeWinner {
		slot = "B"
	}
	person := string(ab.Unshuffle(slot, ab.Assign(ac, 0)))
	_, form := w.get(itemPath, reviewTokA1)
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(form)
	if m == nil {
		t.Fatalf("no form:\n%s", form)
	}
	resp, _ := w.do(http.MethodPost, itemPath, reviewTokA1, url.Values{"csrf": {m[1]}, "answer": {`{"raw_winner":"` + slot + `","confidence":0.8,"biggest_gap":"one slot says more"}`}},
		map[string]string{"Origin": srv.URL})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("answer: %d", resp.StatusCode)
	}
	poll.Until(t, 10*time.Second, "the completion revised", func() (bool, string) {
		h, _, err := records.New(s.run.Buckets).Header(t.Context(), sub.Tenant, sub.BatchID)
		if err != nil {
			t.Fatal(err)
		}
		return h.Completion.Revised != nil, fmt.Sprintf("%+v", h.Completion)
	})
	_, body = w.get(base, reviewTokA1)
	if !strings.Contains(body, `id="revised">by people: 1 outcome(s) decided by review`) {
		t.Fatalf("the batch page does not say it was revised:\n%s", body)
	}
	_, api := w.get("/api"+base, reviewTokA1)
	var d struct {
		FromIndex bool `json:"from_index"`
		Rows      []struct {
			ACID   string `json:"ac_id"`
			Winner string `json:"winner"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(api), &d); err != nil || !d.FromIndex {
		t.Fatalf("batch API (from the index: %v): %v\n%s", d.FromIndex, err, api)
	}
	found := false
	for _, r := range d.Rows {
		if r.ACID == ac {
			found = true
			if r.Winner != person || person == judgeWinner {
				t.Fatalf("%s in the AC table: %s; the person said %s, the judge %s", ac, r.Winner, person, judgeWinner)
			}
		}
	}
	if !found {
		t.Fatalf("no row of %s in the AC table:\n%s", ac, api)
	}
}
