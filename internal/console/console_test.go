package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/chromedp/chromedp"

	"github.com/tribunal-dev/tribunal/internal/console"
	"github.com/tribunal-dev/tribunal/internal/testutil/browsertest"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/views"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

const (
	tokA     = "team-a-console-token-0001"
	tokB     = "team-b-console-token-0002"
	tokAdmin = "admin-console-token-00003"
	viewJob  = "tasks--list--populated--light"
)

// TestConsole runs the whole flow once: real NATS, the four services, a scripted judge
// and (with Chromium) a rubric view rendered in real Chromium; then the console is
// checked over plain HTTP (tenant isolation, every page, CSRF, the spot-check) and in
// real headless Chromium (what a reviewer sees), with screenshots.
func TestConsole(t *testing.T) {
	s := startStack(t)
	subA := s.Submit(batchA(t), tenantA)
	subB := s.Submit(batchB(t), tenantB)
	var subR client.Submission
	withChromium := browsertest.Available()
	if withChromium {
		subR = s.Submit(s.rubricBatch(t), tenantA)
	}
	s.WaitComplete(subA, 30*time.Second)
	s.WaitComplete(subB, 30*time.Second)
	if withChromium {
		s.waitJob(t, subR, viewJob, 45*time.Second, "a sign-off waiting for a person", func(r *records.Job) bool {
			return r.Status == events.StatusAwaitingSpotcheck
		})
	}

	h := console.New(console.Config{Buckets: s.run.Buckets, Store: s.Store, Pub: s.run.Pub,
		Tenants: map[string]string{tokA: tenantA, tokB: tenantB, tokAdmin: console.AllTenants}})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	w := newWeb(t, srv.URL)
	batchPath := func(sub client.Submission) string { return "/t/" + sub.Tenant + "/b/" + sub.BatchID }
	jobPath := func(sub client.Submission, job string) string { return batchPath(sub) + "/j/" + job }

	t.Run("tenant isolation", func(t *testing.T) {
		w := newWeb(t, srv.URL)
		resp, body := w.get("/", tokA)
		if resp.StatusCode != 200 || !strings.Contains(body, subA.BatchID) || strings.Contains(body, subB.BatchID) {
			t.Fatalf("team-a's index: %d, has own batch %v, has team-b's %v", resp.StatusCode, strings.Contains(body, subA.BatchID), strings.Contains(body, subB.BatchID))
		}
		_, body = w.get("/", tokAdmin)
		if !strings.Contains(body, subA.BatchID) || !strings.Contains(body, subB.BatchID) {
			t.Fatal("the admin token does not see every tenant's batches")
		}
		// The 404 for another team's batch is the 404 for a batch that never existed.
		_, unknown := w.get("/t/team-b/b/no-such-batch", tokA)
		bRec := s.job(t, subB, "AC-1")
		aRec := s.job(t, subA, "AC-img")
		for _, p := range []string{
			batchPath(subB), jobPath(subB, "AC-1"), batchPath(subB) + "/audit", "/t/team-b/",
			"/t/team-a/b/" + subB.BatchID, "/t/team-a/b/" + subB.BatchID + "/j/AC-1",
			"/blob/team-b/" + ab.SpecOf(bRec.Spec.KindPart).Ours.Blob.SHA256,
		} {
			resp, body := w.get(p, tokA)
			if resp.StatusCode != http.StatusNotFound || body != unknown {
				t.Errorf("team-a GET %s: %d, want the same 404 as for an unknown batch", p, resp.StatusCode)
			}
		}
		resp, body = w.get("/blob/team-b/"+ab.SpecOf(bRec.Spec.KindPart).Ours.Blob.SHA256, tokB)
		if resp.StatusCode != 200 || body != "team b's private release notes\n" || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Fatalf("team-b's own blob: %d %q %s", resp.StatusCode, body, resp.Header.Get("Content-Type"))
		}
		if resp, _ := w.get("/blob/team-a/"+ab.SpecOf(aRec.Spec.KindPart).Ours.Blob.SHA256, tokB); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("team-b reads team-a's image: %d", resp.StatusCode)
		}
		resp, _ = w.get("/blob/team-a/"+ab.SpecOf(aRec.Spec.KindPart).Ours.Blob.SHA256, tokA)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") {
			t.Fatalf("team-a's image: %d %s csp %q", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Security-Policy"))
		}
		// Team b cannot record a spot-check on team a's view either.
		form := url.Values{"decision": {"approve"}, "csrf": {"x"}}
		if resp, _ := w.do(http.MethodPost, jobPath(subA, "AC-img")+"/spotcheck", tokB, form, map[string]string{"Origin": srv.URL}); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("team-b POST on team-a's job: %d", resp.StatusCode)
		}
		// Anonymous and wrong credentials.
		if resp, _ := w.get(batchPath(subA), ""); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login?next=") {
			t.Fatalf("anonymous: %d %s", resp.StatusCode, resp.Header.Get("Location"))
		}
		if resp, _ := w.get(batchPath(subA), "not-a-token-at-all-123"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong token: %d", resp.StatusCode)
		}
	})

	t.Run("pages", func(t *testing.T) {
		resp, body := w.get(batchPath(subA), tokA)
		if resp.StatusCode != 200 {
			t.Fatalf("batch page %d", resp.StatusCode)
		}
		for _, want := range []string{"AC-img", "AC-text", "AC-missing", "AC-crit", "AC-eq", "block / high", "missing artifact", "/audit"} {
			if !strings.Contains(body, want) {
				t.Errorf("batch page lacks %q", want)
			}
		}
		for _, job := range []string{"AC-img", "AC-text", "AC-missing", "AC-crit", "AC-eq"} {
			resp, body := w.get(jobPath(subA, job), tokA)
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %d", job, resp.StatusCode)
			}
			if strings.Contains(body, "<script") {
				t.Errorf("%s: the page carries a script element", job)
			}
			switch job {
			case "AC-img":
				for _, want := range []string{`id="winner"><b class="winner w-reference">reference</b>`, "0.92", ab.Assign("AC-img", 0).String(), "&lt;img src=x onerror=alert(1)&gt;", "S001"} {
					if !strings.Contains(body, want) {
						t.Errorf("ab page lacks %q", want)
					}
				}
			case "AC-text":
				if !strings.Contains(body, "&lt;script&gt;alert(&#39;notes&#39;)&lt;/script&gt;") {
					t.Error("the text artifact is not shown escaped")
				}
			case "AC-crit":
				if !strings.Contains(body, `id="critic-verdict"><b>pass</b>`) {
					t.Error("critic verdict missing")
				}
			case "AC-eq":
				// The judge's transcripts are recorded on the job and shown per case.
				if strings.Contains(body, `id="no-transcripts"`) || !strings.Contains(body, "scripted runner") {
					t.Error("equivalence page does not show the runner transcripts")
				}
				for _, want := range []string{"candidate-regressed", "drops the compatibility warning &lt;b&gt;loudly&lt;/b&gt;", "rename and break compatibility"} {
					if !strings.Contains(body, want) {
						t.Errorf("equivalence page lacks %q", want)
					}
				}
			}
		}
		resp, body = w.get(batchPath(subA)+"/audit", tokA)
		if resp.StatusCode != 200 || !strings.Contains(body, "The audit is not available") {
			t.Fatalf("audit without a hook: %d", resp.StatusCode)
		}
	})

	t.Run("audit hook", func(t *testing.T) {
		var asked string
		audited := console.New(console.Config{Buckets: s.run.Buckets, Store: s.Store, Audit: func(_ context.Context, tenant, batch string) (any, error) {
			asked = tenant + "/" + batch
			if batch == subA.BatchID {
				return &auditReport{Verified: true, Note: "<b>chain ok</b>"}, nil
			}
			return nil, errors.New("no digest")
		}})
		rec := httptest.NewRecorder()
		audited.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, batchPath(subA)+"/audit", nil))
		if rec.Code != 200 || asked != tenantA+"/"+subA.BatchID || !strings.Contains(rec.Body.String(), `&#34;verified&#34;: true`) || !strings.Contains(rec.Body.String(), "&lt;b&gt;chain ok") || !strings.Contains(rec.Body.String(), `class="av-passed">passed`) {
			t.Fatalf("audit page %d asked %q: %s", rec.Code, asked, rec.Body.String())
		}
		rec = httptest.NewRecorder()
		audited.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, batchPath(subB)+"/audit", nil))
		if rec.Code != http.StatusBadGateway || !strings.Contains(rec.Body.String(), "no digest") {
			t.Fatalf("failing audit: %d", rec.Code)
		}
	})

	var bctx context.Context
	shots := artifactDir(t)
	shot := func(t *testing.T, name string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(shots, name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot %s", p)
	}
	open := func(t *testing.T, path string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(srv.URL+path))
		if err != nil {
			t.Fatalf("open %s: %v", path, err)
		}
		if resp.Status != 200 {
			t.Fatalf("open %s: HTTP %d", path, resp.Status)
		}
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.textContent.replace(/\s+/g, " ")`))
		if err != nil {
			t.Fatal(err)
		}
		return text
	}
	eval := func(t *testing.T, expr string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}

	// text is the whitespace-collapsed text content of the first element matching sel.
	text := func(t *testing.T, sel string) string {
		t.Helper()
		return eval(t, `(() => { const e = document.querySelector(`+strconv.Quote(sel)+`); return e ? e.textContent.replace(/\s+/g, " ").trim() : "(no `+sel+`)"; })()`)
	}
	if withChromium {
		bctx = browser(t)
	}

	t.Run("chromium", func(t *testing.T) {
		browsertest.Need(t)
		// Sign in through the login form, as a reviewer would.
		ctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
			t.Fatal(err)
		}
		if loc, _ := chromedp.Run(ctx, chromedp.Location()); !strings.Contains(loc, "/login") {
			t.Fatalf("anonymous browser landed on %s, want the login form", loc)
		}
		if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("token"), tokA)); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.ID("signin"))); err != nil {
			t.Fatal(err)
		}
		body := open(t, "/")
		if !strings.Contains(body, subA.BatchID) || !strings.Contains(body, subR.BatchID) || strings.Contains(body, subB.BatchID) || text(t, ".who b") != tenantA {
			t.Fatalf("index after login: %s", body)
		}
		if got := eval(t, `(document.querySelector("a.awaiting") || {}).pathname || ""`); got != jobPath(subR, viewJob) {
			t.Errorf("index links the awaiting view as %q", got)
		}
		shot(t, "index.png")

		open(t, batchPath(subA))
		if got := text(t, "#exit-code"); got != "1" {
			t.Errorf("exit code shown %q, want 1", got)
		}
		results := text(t, "#results")
		for _, want := range []string{"AC-img ab compared reference 0.92 block / high", "AC-missing ab blocked", "AC-crit critic compared pass", "AC-eq equivalence compared fail"} {
			if !strings.Contains(results, want) {
				t.Errorf("results table lacks %q: %s", want, results)
			}
		}
		shot(t, "batch.png")

		// The ab page: both artifacts side by side, labelled after un-blinding. The
		// images differ in size, so their widths prove which one is shown as ours.
		open(t, jobPath(subA, "AC-img"))
		for sel, want := range map[string]string{
			"#winner": "reference", "#route": "suggestion: block, impact high", "#assignment": ab.Assign("AC-img", 0).String(),
			"#gap": gapText, "#judges": "scripted/fixed-A",
		} {
			if got := text(t, sel); !strings.HasPrefix(got, want) {
				t.Errorf("%s shows %q, want %q", sel, got, want)
			}
		}
		if got := text(t, "#confidence"); !strings.HasPrefix(got, "0.92") {
			t.Errorf("confidence shown %q", got)
		}
		if got := text(t, "#suggestion"); !strings.Contains(got, "S001 · block · high") {
			t.Errorf("suggestion shown %q", got)
		}
		widths := eval(t, `["ours","reference"].map(l => { const i = document.querySelector('figure[data-label="'+l+'"] img'); return l+"="+(i && i.complete ? i.naturalWidth : 0); }).join(",")`)
		if widths != "ours=160,reference=200" {
			t.Fatalf("images shown %s, want ours=160,reference=200", widths)
		}
		if n := eval(t, `String(document.images.length)+"/"+document.scripts.length`); n != "2/0" {
			t.Fatalf("images/scripts on the ab page %s, want 2/0: artifact text must stay text", n)
		}
		shot(t, "ab.png")

		open(t, jobPath(subA, "AC-eq"))
		if got := text(t, "#case-c-comp"); !strings.Contains(got, "candidate-regressed") || !strings.Contains(got, deltaText) {
			t.Errorf("case c-comp shows %q", got)
		}
		if got := text(t, "#equivalence-gate"); !strings.HasPrefix(got, "fail: 1 regressed") {
			t.Errorf("gate shows %q", got)
		}
		shot(t, "equivalence.png")

		body = open(t, jobPath(subR, viewJob))
		for _, want := range []string{"awaiting_spotcheck", "Spot-check (HE-2)", "visual_fidelity", "Approve", "Reject"} {
			if !strings.Contains(body, want) {
				t.Errorf("rubric page lacks %q: %s", want, body)
			}
		}
		if got := text(t, "#human-spotcheck"); got != "pending" {
			t.Errorf("human spot-check shows %q", got)
		}
		if got := text(t, "#loop"); !strings.Contains(got, "2 of 2 required") {
			t.Errorf("loop shows %q", got)
		}
		if n := eval(t, `String(document.querySelectorAll("#dimensions tbody tr.pass").length)`); n == "0" {
			t.Error("no passing dimension rows")
		}
		if loaded := eval(t, `Array.from(document.images).map(i => i.complete && i.naturalWidth > 0 ? "ok" : "broken:"+i.alt).join(",")`); !strings.HasPrefix(loaded, "ok,ok") || strings.Contains(loaded, "broken") {
			t.Fatalf("rubric images %s: want the render and the reference loaded", loaded)
		}
		shot(t, "rubric-awaiting.png")
	})

	t.Run("spot-check", func(t *testing.T) {
		browsertest.Need(t)
		path := jobPath(subR, viewJob)
		_, body := w.get(path, tokA)
		m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(body)
		if m == nil {
			t.Fatal("no spot-check form on the awaiting view")
		}
		reject := url.Values{"csrf": {m[1]}, "decision": {"reject"}, "dimension": {"typography"}}
		for name, c := range map[string]struct {
			form   url.Values
			header map[string]string
			token  string
		}{
			"no origin":         {reject, nil, tokA},
			"foreign origin":    {reject, map[string]string{"Origin": "https://evil.example"}, tokA},
			"cross-site fetch":  {reject, map[string]string{"Sec-Fetch-Site": "cross-site"}, tokA},
			"no csrf token":     {url.Values{"decision": {"approve"}}, map[string]string{"Origin": srv.URL}, tokA},
			"another session's": {reject, map[string]string{"Origin": srv.URL}, tokAdmin},
		} {
			if resp, _ := w.do(http.MethodPost, path+"/spotcheck", c.token, c.form, c.header); resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s: %d, want 403", name, resp.StatusCode)
			}
		}
		bad := url.Values{"csrf": {m[1]}, "decision": {"reject"}, "dimension": {"not-a-dimension"}}
		if resp, _ := w.do(http.MethodPost, path+"/spotcheck", tokA, bad, map[string]string{"Origin": srv.URL}); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("unknown dimension: %d, want 400", resp.StatusCode)
		}
		if got := s.job(t, subR, viewJob).Status; got != events.StatusAwaitingSpotcheck {
			t.Fatalf("a refused POST changed the view: %s", got)
		}
		resp, _ := w.do(http.MethodPost, path+"/spotcheck", tokA, reject, map[string]string{"Origin": srv.URL})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != path+"?sent=reject" {
			t.Fatalf("spot-check POST: %d %s", resp.StatusCode, resp.Header.Get("Location"))
		}
		rec := s.waitJob(t, subR, viewJob, 15*time.Second, "the spot-check to be recorded", func(r *records.Job) bool {
			return r.Status == events.StatusSignedOff
		})
		if st, _ := rubric.StateOf(rec); st == nil || st.SignOff == nil || st.SignOff.HumanSpotcheck != "typography" {
			t.Fatalf("sign-off %+v", st)
		}
		s.WaitComplete(subR, 15*time.Second)
		if resp, _ := w.do(http.MethodPost, path+"/spotcheck", tokA, reject, map[string]string{"Origin": srv.URL}); resp.StatusCode != http.StatusConflict {
			t.Fatalf("a second spot-check: %d, want 409", resp.StatusCode)
		}
		if bctx == nil {
			return
		}
		body = open(t, path)
		if got := text(t, "#human-spotcheck"); got != "typography" {
			t.Errorf("human spot-check shows %q after the rejection", got)
		}
		if !strings.Contains(body, "signed_off") || !strings.Contains(body, "Runs of this view") {
			t.Errorf("signed-off rubric page: %s", body)
		}
		if strings.Contains(body, "Spot-check (HE-2)") {
			t.Error("the spot-check form is still offered after the decision")
		}
		shot(t, "rubric-signed-off.png")
	})

	t.Run("reset", func(t *testing.T) {
		browsertest.Need(t)
		path := jobPath(subR, viewJob)
		_, body := w.get(path, tokA)
		m := regexp.MustCompile(`action="[^"]*/reset"[^>]*>\s*<input type="hidden" name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(body)
		if m == nil || !strings.Contains(body, "Reset the loop") {
			t.Fatalf("no reset form on a view whose run ended: %s", body)
		}
		form := url.Values{"csrf": {m[1]}, "reason": {"typography is tuned in rubric.json now"}}
		for name, c := range map[string]struct {
			form   url.Values
			header map[string]string
			token  string
			want   int
		}{
			"no origin":         {form, nil, tokA, http.StatusForbidden},
			"foreign origin":    {form, map[string]string{"Origin": "https://evil.example"}, tokA, http.StatusForbidden},
			"no csrf token":     {url.Values{"reason": {"x"}}, map[string]string{"Origin": srv.URL}, tokA, http.StatusForbidden},
			"another session's": {form, map[string]string{"Origin": srv.URL}, tokAdmin, http.StatusForbidden},
			"another team":      {form, map[string]string{"Origin": srv.URL}, tokB, http.StatusNotFound},
		} {
			if resp, _ := w.do(http.MethodPost, path+"/reset", c.token, c.form, c.header); resp.StatusCode != c.want {
				t.Errorf("%s: %d, want %d", name, resp.StatusCode, c.want)
			}
		}
		key := views.Key(tenantA, &rubricwire.Spec{Feature: "rubric-feature", Target: "list", State: "populated", Appearance: "light"})
		if v, _, err := views.Load(t.Context(), s.run.Buckets.Views, key); err != nil || v.Generation != 0 {
			t.Fatalf("a refused POST reset the view: %+v %v", v, err)
		}
		resp, _ := w.do(http.MethodPost, path+"/reset", tokA, form, map[string]string{"Origin": srv.URL})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != path+"?sent=reset&loop=0" {
			t.Fatalf("reset POST: %d %s", resp.StatusCode, resp.Header.Get("Location"))
		}
		var v views.Record
		poll.Until(t, 15*time.Second, "the view's loop to be reset", func() (bool, string) {
			var err error
			v, _, err = views.Load(t.Context(), s.run.Buckets.Views, key)
			return err == nil && v.Generation == 1, fmt.Sprintf("%+v %v", v, err)
		})
		if v.Reset == nil || v.Reset.Reason != "typography is tuned in rubric.json now" || !strings.HasPrefix(v.Reset.By, "console:") || v.SignOff != nil {
			t.Fatalf("view after the reset %+v", v)
		}
		_, body = w.get(path, tokA)
		if !strings.Contains(body, "loop 1, 0 iterations spent") || !strings.Contains(body, "typography is tuned in rubric.json now") {
			t.Errorf("the page does not show the new loop: %s", body)
		}
	})
}

// auditReport stands in for the audit's report: any value renders, and an OK method
// gives the page its headline.
type auditReport struct {
	Verified bool   `json:"verified"`
	Note     string `json:"note"`
}

func (r *auditReport) OK() bool { return r.Verified }
