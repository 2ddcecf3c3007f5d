package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/console"
	"github.com/tribunal-dev/tribunal/pkg/trust"
)

// handMadeReport is a report over three judges: "first" always picks slot A (biased,
// and every swapped pair flips), "fair" follows content, "odd" disagrees on AC-2; two
// HE-2 checks name one dimension.
func handMadeReport(t *testing.T) *trust.Report {
	t.Helper()
	var in trust.Input
	for i := range 12 {
		ac := fmt.Sprintf("AC-%d", i)
		in.Outcomes = append(in.Outcomes, trust.Outcome{AC: ac, Winner: trust.WinnerOurs})
		ok := func(judge, order, raw string, w trust.Winner) trust.Judgment {
			return trust.Judgment{AC: ac, Judge: judge, Order: order, Status: trust.StatusOK, RawWinner: raw, Winner: w, Confidence: 0.9,
				LenOurs: 100 + i, LenRef: 300}
		}
		in.Judgments = append(in.Judgments,
			ok("openai/first", "AB", "A", trust.WinnerOurs), ok("openai/first", "BA", "A", trust.WinnerReference),
			ok("openai/fair", "AB", "A", trust.WinnerOurs), ok("openai/fair", "BA", "B", trust.WinnerOurs))
		w := trust.WinnerOurs
		if i == 2 {
			w = trust.WinnerReference
		}
		in.Judgments = append(in.Judgments, ok("openai/odd", "AB", "A", w))
	}
	in.Calls = []trust.Call{{Judge: "openai/fair", Status: "ok", PromptTokens: 10, LatencyMillis: 20}}
	in.SpotChecks = []trust.SpotCheck{{AC: "v", Judge: "openai/vision", Approved: true}, {AC: "w", Judge: "openai/vision", Dimension: "color"}}
	in.Dimensions = []string{"color", "layout"}
	rep, err := trust.BuildReport(in)
	if err != nil {
		t.Fatal(err)
	}
	return &rep
}

// TestReportPage: the batch page links the trust report; the report page draws its
// figures as inline SVG charts without any script or inline style (the console's CSP
// forbids both), flags a biased judge and a flip rate above the limit, lists the split
// ACs with links to their jobs, and is a 404 for another team; a failing report says so.
// The job page shows how each call was sampled.
func TestReportPage(t *testing.T) {
	s := startStack(t)
	subA := s.Submit(batchA(t), tenantA)
	s.WaitComplete(subA, 30*time.Second)
	rep := handMadeReport(t)
	var asked []string
	h := console.New(console.Config{Buckets: s.run.Buckets, Store: s.Store, Pub: s.run.Pub,
		Tenants: map[string]string{tokA: tenantA, tokB: tenantB},
		Report: func(_ context.Context, tenant, batch string) (*trust.Report, error) {
			asked = append(asked, tenant+"/"+batch)
			if batch != subA.BatchID {
				return nil, errors.New("no such batch in the stream")
			}
			return rep, nil
		}})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	w := newWeb(t, srv.URL)
	batchPath := "/t/" + tenantA + "/b/" + subA.BatchID

	_, body := w.get(batchPath, tokA)
	if !strings.Contains(body, `href="`+batchPath+`/report" id="report-link"`) {
		t.Fatalf("the batch page does not link the report:\n%s", body)
	}
	resp, body := w.get(batchPath+"/report", tokA)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("report page %d:\n%s", resp.StatusCode, body)
	}
	for _, want := range []string{
		"<svg", "Slot A won, of decided answers", "Swapped pairs that flipped", "Outcomes (12 ab ACs)",
		`<g class="row flagged"><title>openai/first: 24/24 = 1.000`, // biased: always slot A
		`<g class="row flagged"><title>openai/first: 12/12 = 1.000`, // every pair flipped
		`<g class="row"><title>openai/fair: 12/24 = 0.500`,
		fmt.Sprintf(`id="alpha">%.3f over 12 ACs`, rep.Panel.Alpha.Alpha),
		`<a href="` + batchPath + `/j/AC-2">AC-2</a></td><td>openai/fair: ours; openai/first: tie; openai/odd: reference`,
		"Longer text won, by length ratio (openai/fair)", "People agreed with the judge in HE-2 spot checks",
		"A-&gt;B 12", "Every interval is 95%",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("report page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script") || regexp.MustCompile(`\sstyle=`).MatchString(body) {
		t.Error("the report page carries a script or an inline style, which the console's CSP would block")
	}
	if resp, _ := w.get(batchPath+"/report", tokB); resp.StatusCode != http.StatusNotFound {
		t.Errorf("team-b reads team-a's report: %d", resp.StatusCode)
	}
	if len(asked) != 1 {
		t.Errorf("report computed for %v; another team's request must not reach it", asked)
	}

	// A report that cannot be computed says why, with a 502.
	subOther := s.Submit(batchB(t), tenantA)
	s.WaitComplete(subOther, 30*time.Second)
	resp, body = w.get("/t/"+tenantA+"/b/"+subOther.BatchID+"/report", tokA)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "The trust report failed: no such batch in the stream") {
		t.Errorf("failing report: %d\n%s", resp.StatusCode, body)
	}

	// The scripted stack pins no temperature: the job page shows each call's sampling and
	// marks it.
	_, body = w.get(batchPath+"/j/AC-text", tokA)
	if !strings.Contains(body, `<td class="sampling"><b class="unpinned">unpinned temperature</b>: temperature not pinned, no max tokens, none, reported`) {
		t.Errorf("job page lacks the call's sampling:\n%s", body)
	}

	// A console without a report hook says the report is not available.
	h2 := httptest.NewServer(console.New(console.Config{Buckets: s.run.Buckets, Store: s.Store, Tenants: map[string]string{tokA: tenantA}}))
	t.Cleanup(h2.Close)
	if _, body := newWeb(t, h2.URL).get(batchPath+"/report", tokA); !strings.Contains(body, "not available in this console") {
		t.Errorf("no hook:\n%s", body)
	}
}
