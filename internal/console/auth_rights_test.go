package console_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"image/color"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/console"
	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

var updateRights = flag.Bool("update-rights", false, "rewrite the console rights table of docs/security.md from the console's routes")

const securityDoc = "../../docs/security.md"

// documentedRights reads the console rights table of docs/security.md: for each route,
// the roles whose tokens may open it. With -update-rights it first rewrites the table;
// otherwise the table must be what the console's routes render.
func documentedRights(t *testing.T) map[string]map[tokens.Role]bool {
	t.Helper()
	data, err := os.ReadFile(securityDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	begin, end := strings.Index(doc, console.RightsBegin), strings.Index(doc, console.RightsEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s has no console rights table between %q and %q", securityDoc, console.RightsBegin, console.RightsEnd)
	}
	want := console.RightsTable()
	if *updateRights {
		doc = doc[:begin+len(console.RightsBegin)] + "\n" + want + doc[end:]
		if err := os.WriteFile(securityDoc, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		begin, end = strings.Index(doc, console.RightsBegin), strings.Index(doc, console.RightsEnd)
	}
	table := strings.TrimSpace(doc[begin+len(console.RightsBegin) : end])
	if table != strings.TrimSpace(want) {
		t.Errorf("the console rights table of %s is not what the console's routes render; `go test ./internal/console -run TestConsoleRights -update-rights` rewrites it", securityDoc)
	}
	out, err := tokens.ParseRightsTable(table)
	if err != nil {
		t.Fatalf("%s: %v", securityDoc, err)
	}
	return out
}

// colorOf is a grey of level i, so every artifact of a batch differs.
func colorOf(i int) color.Color { return color.Gray{Y: uint8(40 * (i + 1))} }

const (
	rightsTeamTok     = "rights-token-team-a-0123456789"
	rightsReviewerTok = "rights-token-team-a-reviewer-0123456789"
	rightsTeamBTok    = "rights-token-team-b-0123456789"
)

// TestConsoleRights: the console's rights table in docs/security.md is what its routes
// render, and every route holds to it, walked with a team's and a reviewer's token of
// team-a. A right the table gives is served; every other route refuses a reviewer with a
// 403 naming its role (the JSON API with "role": "reviewer"), and on another team's batch,
// whatever the route, with the 404 of a batch nobody submitted. A reviewer signs in with
// the form, works through the queue, sees the images an item shows and answers as the
// holder of its token, named by the token's fingerprint as the ingress names it.
func TestConsoleRights(t *testing.T) {
	doc := documentedRights(t)
	var routes []console.RouteRights
	for _, rt := range console.Routes() {
		routes = append(routes, rt)
		if _, ok := doc[rt.Pattern]; !ok {
			t.Fatalf("route %s is not in the rights table of %s", rt.Pattern, securityDoc)
		}
	}

	s := startStack(t)
	files := map[string]string{"batch.yaml": "version: 1\nname: rights\nreview: {count: 2, seed: s}\nacs:\n"}
	for i := range 2 {
		files[fmt.Sprintf("ours/%d.png", i)] = pngBytes(t, 40+i, 30, colorOf(i))
		files[fmt.Sprintf("ref/%d.png", i)] = pngBytes(t, 50+i, 30, colorOf(i+2))
		files["batch.yaml"] += fmt.Sprintf("  - id: AC-%d\n    criterion: the badge is legible\n    ours: ours/%d.png\n    reference: ref/%d.png\n", i+1, i, i)
	}
	sub := s.Submit(e2e.WriteBatch(t, files), tenantA)
	subB := s.Submit(e2e.WriteBatch(t, e2e.TextBatch(1, "review: {count: 1}\n")), tenantB)
	s.WaitComplete(sub, 30*time.Second)
	s.WaitComplete(subB, 30*time.Second)
	q, _, err := client.ReviewQueue(t.Context(), s.run.Buckets, tenantA, sub.BatchID)
	if err != nil || len(q) == 0 {
		t.Fatalf("team-a's queue: %v %v", q, err)
	}
	entry := q[0]
	it, err := client.ReviewItemOf(t.Context(), s.Store, entry)
	if err != nil {
		t.Fatal(err)
	}
	image := ""
	for _, p := range it.Shown {
		if p.Image != nil {
			image = p.Image.SHA256
		}
	}
	if image == "" {
		t.Fatalf("item %s shows no image: %+v", entry.Item, it.Shown)
	}
	srv := httptest.NewServer(console.New(console.Config{Buckets: s.run.Buckets, Store: s.Store, Pub: s.run.Pub,
		Tenants: map[string]string{rightsTeamTok: tenantA, rightsReviewerTok: tokens.ReviewerOf(tenantA), rightsTeamBTok: tenantB}}))
	t.Cleanup(srv.Close)
	w := newWeb(t, srv.URL)

	// path fills a route's pattern in for a tenant and batch.
	path := func(pattern, tenant, batch string) (method, p string) {
		method, p, ok := strings.Cut(pattern, " ")
		if !ok {
			method, p = http.MethodGet, pattern
		}
		p = strings.NewReplacer("{tenant}", tenant, "{batch}", batch, "{job}", entry.AC, "{item}", entry.Item,
			"{sha256}", image, "{n}", "0", "{action}", "spotcheck", "{$}", "").Replace(p)
		if strings.HasSuffix(p, "/") && (pattern == "/" || pattern == "/api/") {
			p += "nothing-here"
		}
		return method, p
	}
	csrf := func(tok, itemPath string) string {
		t.Helper()
		_, body := w.get(itemPath, tok)
		m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no form at %s:\n%s", itemPath, body)
		}
		return m[1]
	}
	request := func(pattern, tok, tenant, batch string) (*http.Response, string) {
		t.Helper()
		method, p := path(pattern, tenant, batch)
		if method != http.MethodPost {
			return w.do(method, p, tok, nil, nil)
		}
		form := url.Values{"answer": {`{"raw_winner":"A","confidence":0.7,"biggest_gap":"slot A is sharper"}`}, "token": {tok}}
		if strings.Contains(pattern, "/review/") && tenant == tenantA {
			form.Set("csrf", csrf(tok, p))
		}
		return w.do(method, p, tok, form, map[string]string{"Origin": srv.URL})
	}
	refusal := regexp.MustCompile(`may not open ([A-Z]+ )?/`)

	for _, rt := range routes {
		for _, who := range []struct {
			role tokens.Role
			tok  string
		}{{tokens.RoleTeam, rightsTeamTok}, {tokens.RoleReviewer, rightsReviewerTok}} {
			resp, body := request(rt.Pattern, who.tok, tenantA, sub.BatchID)
			body = html.UnescapeString(body)
			may := doc[rt.Pattern][who.role]
			switch {
			case may && (resp.StatusCode == http.StatusUnauthorized || refusal.MatchString(body)):
				t.Errorf("%s with a %s's token: refused %d, the table gives the right\n%s", rt.Pattern, who.role, resp.StatusCode, body)
			case may && who.role == tokens.RoleReviewer && !rt.Open && rt.Pattern != "/" && rt.Pattern != "/api/" &&
				resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusSeeOther:
				t.Errorf("%s with a reviewer's token: %d, want it served\n%s", rt.Pattern, resp.StatusCode, body)
			case !may && (resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "A "+string(who.role)+"'s token of "+tenantA+" may not open "+rt.Pattern)):
				t.Errorf("%s with a %s's token: %d, want 403 naming the role\n%s", rt.Pattern, who.role, resp.StatusCode, body)
			case !may && strings.HasPrefix(rt.Pattern, "GET /api/"):
				var p struct{ Error, Role string }
				if err := json.Unmarshal([]byte(body), &p); err != nil || p.Role != string(who.role) {
					t.Errorf("%s with a %s's token: the API's refusal %q does not carry the role", rt.Pattern, who.role, body)
				}
			}
			if may || !strings.Contains(rt.Pattern, "{tenant}") {
				continue
			}
			// Another team's batch, and one nobody submitted: the same 404, whatever
			// the route.
			theirs, theirBody := request(rt.Pattern, who.tok, tenantB, subB.BatchID)
			none, noneBody := request(rt.Pattern, who.tok, tenantB, "no-such-batch")
			if theirs.StatusCode != http.StatusNotFound || none.StatusCode != http.StatusNotFound || theirBody != noneBody ||
				!strings.Contains(theirBody, "nothing you may see") {
				t.Errorf("%s with a %s's token on team-b's batch: %d, on none %d\n%s\n%s", rt.Pattern, who.role, theirs.StatusCode, none.StatusCode, theirBody, noneBody)
			}
		}
	}
	// The review routes on another team's batch: the 404 of a batch nobody submitted.
	for _, rt := range routes {
		if !strings.Contains(rt.Pattern, "/review") {
			continue
		}
		theirs, theirBody := request(rt.Pattern, rightsReviewerTok, tenantB, subB.BatchID)
		none, noneBody := request(rt.Pattern, rightsReviewerTok, tenantB, "no-such-batch")
		if theirs.StatusCode != http.StatusNotFound || none.StatusCode != http.StatusNotFound || theirBody != noneBody {
			t.Errorf("%s with a reviewer's token on team-b's batch: %d, on none %d", rt.Pattern, theirs.StatusCode, none.StatusCode)
		}
	}

	// The reviewer's answer, posted by the walk, is the token holder's: the tenant and
	// the token's fingerprint, as the ingress names it.
	want := ingress.Reviewer(tenantA, rightsReviewerTok)
	job := s.waitJob(t, sub, entry.AC, 10*time.Second, "the reviewer's answer recorded", func(j *records.Job) bool {
		return slices.ContainsFunc(j.Reviews, func(r records.Review) bool { return r.By == want })
	})
	for _, r := range job.Reviews {
		if r.By == want && r.Via != "console" {
			t.Errorf("the reviewer's review %+v", r)
		}
	}

	// A reviewer signs in with the form; the queue and its item lead nowhere but the
	// queue, and show the item's image from the queue's own route.
	resp, _ := w.do(http.MethodPost, "/login", "", url.Values{"token": {rightsReviewerTok}, "next": {"/t/" + tenantA + "/b/" + sub.BatchID + "/review"}},
		map[string]string{"Origin": srv.URL})
	var cookie string
	for _, c := range resp.Cookies() {
		if c.Name == console.CookieName {
			cookie = c.Name + "=" + c.Value
		}
	}
	if resp.StatusCode != http.StatusSeeOther || cookie == "" {
		t.Fatalf("a reviewer's sign-in: %d, cookie %q", resp.StatusCode, cookie)
	}
	queuePath := "/t/" + tenantA + "/b/" + sub.BatchID + "/review"
	resp, body := w.do(http.MethodGet, queuePath, "", nil, map[string]string{"Cookie": cookie})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, entry.Item) || !strings.Contains(body, "team-a (reviewer)") ||
		strings.Contains(body, `href="/t/`+tenantA+`/"`) || strings.Contains(body, `href="/t/`+tenantA+`/b/`+sub.BatchID+`"`) {
		t.Fatalf("the reviewer's queue, signed in: %d\n%s", resp.StatusCode, body)
	}
	resp, body = w.do(http.MethodGet, queuePath+"/"+entry.Item, "", nil, map[string]string{"Cookie": cookie})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, queuePath+"/"+entry.Item+"/image/"+image) || strings.Contains(body, entry.AC) {
		t.Fatalf("the reviewer's item page: %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := w.do(http.MethodGet, "/blob/"+tenantA+"/"+image, "", nil, map[string]string{"Cookie": cookie}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the item's image by digest, signed in as a reviewer: %d", resp.StatusCode)
	}
	// The header's "tribunal" leads a reviewer to `/`: the team's review queues, each a
	// link to its queue with what the reviewer answered, nothing of a batch's verdicts and
	// no other team's batch.
	if !strings.Contains(body, `class="brand" href="/"`) {
		t.Fatalf("the item page has no link home:\n%s", body)
	}
	resp, body = w.do(http.MethodGet, "/", "", nil, map[string]string{"Cookie": cookie})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `href="`+queuePath+`"`) ||
		!regexp.MustCompile(`you answered 1 of \d+`).MatchString(body) || strings.Contains(body, subB.BatchID) ||
		strings.Contains(body, `href="/t/`+tenantA+`/b/`+sub.BatchID+`"`) || strings.Contains(body, "AC-") {
		t.Fatalf("a reviewer's /: %d\n%s", resp.StatusCode, body)
	}
}
