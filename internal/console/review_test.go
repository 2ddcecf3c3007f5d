package console_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/console"
	"github.com/tribunal-dev/tribunal/internal/testutil/jsontest"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestReviewPages drives the review pages over HTTP on a real stack: two batches of
// every offline kind, the second answered from the judge-call cache. The AC table
// filters and exports, the job page shows the diff, the slot legend and the judge calls,
// a call's page the prompt and the answer, the compare page the (absent) changes, the
// audit page the decisions re-derived from the events, and every page has its JSON in
// snake_case behind /api, with the same tenant isolation.
func TestReviewPages(t *testing.T) {
	s := startStack(t)
	first := s.Submit(batchA(t), tenantA)
	s.WaitComplete(first, 30*time.Second)
	second := s.Submit(batchA(t), tenantA)
	s.WaitComplete(second, 30*time.Second)
	subB := s.Submit(batchB(t), tenantB)
	s.WaitComplete(subB, 30*time.Second)

	auditHook := func(ctx context.Context, tenant, batch string) (any, error) {
		rep, err := audit.Run(ctx, s.run.JS, audit.Filter{Tenant: tenant, BatchID: batch}, s.Store)
		if err != nil {
			return nil, err
		}
		if err := audit.CheckBatchState(ctx, &rep, records.New(s.run.Buckets), tenant, batch); err != nil {
			return nil, err
		}
		return &rep, nil
	}
	srv := httptest.NewServer(console.New(console.Config{Buckets: s.run.Buckets, Store: s.Store, Audit: auditHook,
		Tenants: map[string]string{tokA: tenantA, tokB: tenantB}}))
	t.Cleanup(srv.Close)
	w := newWeb(t, srv.URL)
	base := "/t/" + tenantA + "/b/" + second.BatchID

	t.Run("the AC table", func(t *testing.T) {
		resp, body := w.get(base, tokA)
		if resp.StatusCode != 200 {
			t.Fatalf("batch page %d", resp.StatusCode)
		}
		for _, want := range []string{`id="kind-mix">3 ab, 1 critic, 1 equivalence`, `id="chart-outcomes"`, "<svg", `id="chart-calls"`, `id="filters"`, "5 ACs", "export.csv"} {
			if !strings.Contains(body, want) {
				t.Errorf("batch page lacks %q", want)
			}
		}
		_, body = w.get(base+"?outcome=blocked", tokA)
		if !strings.Contains(body, "1 of 5 ACs match") || !strings.Contains(body, ">AC-missing<") || strings.Contains(body, ">AC-text<") {
			t.Fatalf("filtered page:\n%s", body)
		}
		_, body = w.get(base+"?q=brand+colours", tokA)
		if !strings.Contains(body, ">AC-img<") || strings.Contains(body, ">AC-text<") {
			t.Fatal("the search over criteria does not find AC-img alone")
		}
		_, body = w.get(base+"?per=2&page=2", tokA)
		if !strings.Contains(body, "page 2 of 3") || !strings.Contains(body, ">AC-missing<") || strings.Contains(body, ">AC-img<") {
			t.Fatal("the second page of two rows is not AC-missing and AC-crit")
		}
	})

	t.Run("CSV export", func(t *testing.T) {
		resp, body := w.get(base+"/export.csv?kind=ab", tokA)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") {
			t.Fatalf("export %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
		if err != nil || len(rows) != 4 || rows[0][1] != "ac_id" || rows[1][1] != "AC-img" {
			t.Fatalf("csv %v %v", rows, err)
		}
	})

	t.Run("an AC, its diff and its judge calls", func(t *testing.T) {
		_, body := w.get(base+"/j/AC-text", tokA)
		for _, want := range []string{`id="diff"`, "Ours against the reference", "no judge ever sees a diff", `id="calls"`, "prompt and answer", "(cached)"} {
			if !strings.Contains(body, want) {
				t.Errorf("job page lacks %q", want)
			}
		}
		// The image comparison's gap is the judge's, with which slot was ours.
		_, body = w.get(base+"/j/AC-img", tokA)
		if !regexp.MustCompile(`id="gap-slots">\(slot A was (ours, slot B the reference|the reference, slot B ours)\)`).MatchString(body) {
			t.Fatal("the biggest gap does not say which artifact slot A was")
		}
		// The cached call points at the record of the call the first batch made.
		resp, body := w.get(base+"/j/AC-text/call/0", tokA)
		if resp.StatusCode != 200 {
			t.Fatalf("call page %d", resp.StatusCode)
		}
		for _, want := range []string{"The release notes tell a user what changed.", "BEGIN ARTIFACT A", "Exports finish in seconds.", `id="response-0"`, "raw_winner", "answered from the cache", `id="slots"`} {
			if !strings.Contains(body, want) {
				t.Errorf("call page lacks %q", want)
			}
		}
		// Artifact text is data on this page too.
		if strings.Contains(body, "<script>alert('notes')</script>") {
			t.Fatal("an artifact's markup is not escaped on the call page")
		}
		if resp, _ := w.get(base+"/j/AC-text/call/7", tokA); resp.StatusCode != 404 {
			t.Fatalf("a call the job does not have: %d", resp.StatusCode)
		}
	})

	t.Run("compare", func(t *testing.T) {
		_, body := w.get(base+"/compare?with="+first.BatchID, tokA)
		if !strings.Contains(body, `id="changed">0<`) || !strings.Contains(body, `id="same">5<`) || !strings.Contains(body, "No verdict changed.") {
			t.Fatalf("compare page:\n%s", body)
		}
		if resp, _ := w.get(base+"/compare?with="+subB.BatchID, tokA); resp.StatusCode != 404 {
			t.Fatalf("comparing with another team's batch: %d", resp.StatusCode)
		}
	})

	t.Run("audit report", func(t *testing.T) {
		_, body := w.get(base+"/audit", tokA)
		for _, want := range []string{"The audit <b class=\"av-passed\">passed", `id="rederived">5<`, `id="mismatched">0<`, `id="decisions"`, "job.submitted", "verdict.emitted", "re-derived"} {
			if !strings.Contains(body, want) {
				t.Errorf("audit page lacks %q", want)
			}
		}
	})

	t.Run("JSON API", func(t *testing.T) {
		allow := map[string]bool{"A": true, "B": true}
		for _, p := range []string{"/api/batches", "/api/t/team-a/batches", "/api" + base, "/api" + base + "?status=compared&per=2",
			"/api" + base + "/j/AC-text", "/api" + base + "/j/AC-img", "/api" + base + "/j/AC-eq", "/api" + base + "/j/AC-crit",
			"/api" + base + "/j/AC-text/call/0", "/api" + base + "/compare?with=" + first.BatchID, "/api" + base + "/audit"} {
			resp, body := w.get(p, tokA)
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("%s: %d %s\n%s", p, resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			if bad, err := jsontest.NonSnakeKeys([]byte(body), allow); err != nil || len(bad) > 0 {
				t.Errorf("%s: keys not in snake_case: %v %v", p, bad, err)
			}
		}
		var b struct {
			Rows []struct {
				ACID    string `json:"ac_id"`
				Outcome string `json:"outcome"`
			} `json:"rows"`
			Matched   int  `json:"matched"`
			FromIndex bool `json:"from_index"`
			Charts    []struct {
				ID string `json:"id"`
			} `json:"charts"`
		}
		_, body := w.get("/api"+base+"?outcome=blocked", tokA)
		if err := json.Unmarshal([]byte(body), &b); err != nil || b.Matched != 1 || len(b.Rows) != 1 || b.Rows[0].ACID != "AC-missing" || !b.FromIndex || len(b.Charts) == 0 {
			t.Fatalf("batch API %+v %v", b, err)
		}
		// Another team's batch is a JSON 404, as for one that does not exist.
		resp, body := w.get("/api"+base, tokB)
		if resp.StatusCode != 404 || !strings.Contains(body, `"error"`) {
			t.Fatalf("team-b reading team-a's batch: %d %s", resp.StatusCode, body)
		}
		if resp, _ := w.get("/api/t/team-a/b/"+second.BatchID+"/j/AC-text/call/0", tokB); resp.StatusCode != 404 {
			t.Fatalf("team-b reading team-a's call record: %d", resp.StatusCode)
		}
		if resp, _ := w.get("/api/nothing-here", tokA); resp.StatusCode != 404 {
			t.Fatalf("unknown API path: %d", resp.StatusCode)
		}
		if resp, _ := w.get("/api/batches", ""); resp.StatusCode != 401 {
			t.Fatalf("the API without a token: %d", resp.StatusCode)
		}
	})
}
