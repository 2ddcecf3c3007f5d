package console_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/console"
	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/internal/testutil/browsertest"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestRubricReviewInTheConsole: a rubric view signed off by its loop is in its team's
// review queue on the console; its page shows the judge's call (the render and the
// reference as images, the fenced documents) without the view's job id, and asks for
// the view's rubric dimensions; an answer in seed 004's verdict shape is recorded by
// the token's holder, one outside the judge's verdict schema is refused on the page; the
// report page gives the agreement per rubric dimension and nothing of slots.
func TestRubricReviewInTheConsole(t *testing.T) {
	browsertest.Need(t)
	s := startStack(t)
	dir, u := e2e.ServeRubricFeature(t, filepath.Join("..", ".."), "")
	s.featureURL = u
	if err := os.WriteFile(filepath.Join(dir, "batch.yaml"), []byte("version: 1\nname: rubric\nreview: {count: 1, seed: s}\nacs:\n  - {id: tasks, kind: rubric, spec: spec.json}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := batch.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	sub := s.Submit(b, tenantA)
	s.WaitComplete(sub, 60*time.Second)
	const job = "tasks--list--populated--light"
	srv := httptest.NewServer(console.New(console.Config{Buckets: s.run.Buckets, Store: s.Store, Pub: s.run.Pub,
		Tenants: map[string]string{reviewTokA1: tenantA}}))
	t.Cleanup(srv.Close)
	w := newWeb(t, srv.URL)
	queuePath := "/t/" + tenantA + "/b/" + sub.BatchID + "/review"
	resp, body := w.get(queuePath, reviewTokA1)
	items := regexp.MustCompile(`item-[0-9a-f]{12}`).FindAllString(body, -1)
	if resp.StatusCode != http.StatusOK || len(items) == 0 || strings.Contains(body, job) {
		t.Fatalf("the queue: %d\n%s", resp.StatusCode, body)
	}
	itemPath := queuePath + "/" + items[0]
	resp, body = w.get(itemPath, reviewTokA1)
	if resp.StatusCode != http.StatusOK || strings.Contains(body, job) || strings.Count(body, "<img") < 2 ||
		!strings.Contains(body, "The rubric (dimensions, thresholds, anchors)") || !strings.Contains(body, "layout_spacing") {
		t.Fatalf("the item page: %d\n%s", resp.StatusCode, body)
	}
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no form:\n%s", body)
	}
	post := func(answer []byte) (*http.Response, string) {
		_, page := w.get(itemPath, reviewTokA1)
		form := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)[1]
		return w.do(http.MethodPost, itemPath, reviewTokA1, url.Values{"csrf": {form}, "answer": {string(answer)}}, map[string]string{"Origin": srv.URL})
	}
	bad, _ := json.Marshal(e2e.RubricVerdict(map[string]float64{"hierarchy": 2}, true, []string{}))
	if resp, body := post(bad); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "review-error") || !strings.Contains(body, "dimensions.hierarchy.score") {
		t.Fatalf("an answer outside the verdict schema: %d\n%s", resp.StatusCode, body)
	}
	answer, _ := json.Marshal(e2e.RubricVerdict(map[string]float64{"typography": 0.5}, true, []string{}))
	if resp, body := post(answer); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the answer: %d\n%s", resp.StatusCode, body)
	}
	rec := s.waitJob(t, sub, job, 20*time.Second, "the review recorded", func(j *records.Job) bool { return len(j.Reviews) == 1 })
	if r := rec.Reviews[0]; r.Person.Label != "fail" || r.Judge.Label != "pass" || !strings.HasPrefix(r.By, "team-a (token ") || r.Via != "console" {
		t.Fatalf("review %+v", r)
	}
	_, body = w.get("/t/"+tenantA+"/b/"+sub.BatchID+"/report", reviewTokA1)
	if !strings.Contains(body, "Agreement with people") || !strings.Contains(body, " on rubric</h3>") || !strings.Contains(body, "typography: exact 0/1") ||
		strings.Contains(body, "slot A") || !strings.Contains(body, "/j/"+job+`"`) {
		t.Fatalf("the report page:\n%s", body)
	}
}
