package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/tribunal-dev/tribunal/internal/console"
	"github.com/tribunal-dev/tribunal/internal/testutil/browsertest"
)

// TestViewExportOpensFromDisk: after two runs, `tribunal view --export site` writes a
// site whose every link resolves inside site/; opened with file:// in real Chromium it
// shows the batch, its charts, an AC, the trust report and the audit, and the browser
// makes no request that is not a file of the site.
func TestViewExportOpensFromDisk(t *testing.T) {
	bctx := browsertest.Start(t, 1400, 900)
	dir := projectDir(t)
	var ids []string
	for range 2 {
		stdout, stderr, code := runState(t, dir, "run", "examples/quickstart", "--rerun")
		if code != 1 {
			t.Fatalf("run: exit %d\n%s", code, stderr)
		}
		ids = append(ids, strings.Fields(batchIDs(stdout)[0])[1])
	}
	stdout, stderr, code := runState(t, dir, "view", "--export", "site")
	if code != 0 || !strings.Contains(stdout, "exported 2 batches") || !strings.Contains(stdout, "open "+filepath.Join("site", "index.html")) {
		t.Fatalf("view --export: exit %d\n%s\n%s", code, stdout, stderr)
	}
	site := filepath.Join(dir, "site")
	if err := console.VerifyExport(site); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var requests []string
	chromedp.Listen(bctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			requests = append(requests, e.Request.URL)
			mu.Unlock()
		}
	})
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	text := func(sel string) string {
		return eval(`(() => { const e = document.querySelector(` + strconv.Quote(sel) + `); return e ? e.textContent.replace(/\s+/g, " ").trim() : "(no ` + sel + `)"; })()`)
	}
	index := (&url.URL{Scheme: "file", Path: filepath.Join(site, "index.html")}).String()
	newest := ids[1]
	do("open the site", chromedp.Navigate(index), chromedp.WaitVisible(chromedp.ID("batches")))
	if list := text("#batches"); !strings.Contains(list, ids[0]) || !strings.Contains(list, newest) {
		t.Fatalf("the index lists %q", list)
	}
	do("open the batch", chromedp.Click(chromedp.CSS(`#batches a[href$="`+newest+`.html"]`)), chromedp.WaitVisible(chromedp.ID("results")))
	if n := eval(`String(document.querySelectorAll("#charts svg").length)`); n == "0" {
		t.Fatal("the batch page has no chart")
	}
	if got := eval(`getComputedStyle(document.querySelector("header.top")).display`); got != "flex" {
		t.Errorf("the stylesheet is not applied from disk: header display %q", got)
	}
	do("open AC-1", chromedp.Click(chromedp.CSS(`#results a[href$="/j/AC-1.html"]`)), chromedp.WaitVisible(chromedp.ID("ab")))
	if got := text("#winner"); !strings.EqualFold(got, "reference") {
		t.Errorf("AC-1 winner %q", got)
	}
	do("back to the batch", chromedp.Navigate(index), chromedp.Click(chromedp.CSS(`#batches a[href$="`+newest+`.html"]`)), chromedp.WaitVisible(chromedp.ID("report-link")))
	do("open the trust report", chromedp.Click(chromedp.ID("report-link")), chromedp.WaitVisible(chromedp.ID("outcomes")))
	if got := text("main"); !strings.Contains(got, "Position bias") || !strings.Contains(got, "scripted/fixed-A") {
		t.Errorf("trust report: %s", got)
	}
	do("open the compare page", chromedp.Navigate(index), chromedp.Click(chromedp.CSS(`#batches a[href$="`+newest+`.html"]`)), chromedp.WaitVisible(chromedp.ID("compare-previous")),
		chromedp.Click(chromedp.CSS("#compare-previous a")), chromedp.WaitVisible(chromedp.ID("changes")))
	if got := text("#compare-summary"); !strings.Contains(got, ids[0]) {
		t.Errorf("compare summary %q", got)
	}
	audit, err := os.ReadFile(filepath.Join(site, "t", "default", "b", newest, "audit.html"))
	if err != nil || !strings.Contains(string(audit), "passed") {
		t.Errorf("audit page: %v\n%s", err, audit)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(requests) < 5 {
		t.Fatalf("requests seen: %v", requests)
	}
	for _, r := range requests {
		u, err := url.Parse(r)
		if err != nil || u.Scheme != "file" || !strings.HasPrefix(u.Path, site+"/") {
			t.Errorf("a request outside the site: %s", r)
		}
	}
}
