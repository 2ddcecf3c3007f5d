package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tribunal-dev/tribunal/internal/testutil/browsertest"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// TestReviewerTokenPageInChromium: `tribunal view --tokens` holding a reviewer's token
// ("default:reviewer"). In real Chromium the reviewer signs in with the form, is sent to
// the queue it asked for, answers an item blind, and is named by the token's fingerprint
// as the ingress names it; the batch page refuses it naming its role.
func TestReviewerTokenPageInChromium(t *testing.T) {
	bctx := browsertest.Start(t, 1280, 900)
	dir := reviewBatch(t, 20, "{share: 0.5, seed: s1}")
	id := runBatch(t, dir)
	q := queue(t, dir, id)
	tok, err := tokens.Generate()
	if err != nil {
		t.Fatal(err)
	}
	tf := filepath.Join(t.TempDir(), "tokens.json")
	data, _ := json.Marshal(map[string]string{tok: tokens.ReviewerOf("default")})
	if err := os.WriteFile(tf, data, 0o600); err != nil {
		t.Fatal(err)
	}
	base := startView(t, dir, "--tokens", tf)
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	page := func() string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	do := func(as ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		for _, a := range as {
			if err := chromedp.Do(ctx, a); err != nil {
				t.Fatal(err)
			}
		}
	}
	queuePath := "/t/default/b/" + id + "/review"
	do(chromedp.Navigate(base+queuePath), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SetValue(chromedp.ID("token"), tok), chromedp.Click(chromedp.ID("signin")), chromedp.WaitVisible(chromedp.ID("review-queue")))
	item := q[3]
	if text := page(); strings.Contains(text, "AC-") || !strings.Contains(text, item.Item) || !strings.Contains(text, "default (reviewer)") ||
		!strings.Contains(text, "You answered 0 of 10") {
		t.Fatalf("the reviewer's queue shows:\n%s", text)
	}
	do(chromedp.Navigate(base+queuePath+"/"+item.Item), chromedp.WaitVisible(chromedp.ID("review-form")))
	text := page()
	for _, leak := range []string{"AC-", "ours", "reference", ".md", dir} {
		if strings.Contains(text, leak) {
			t.Errorf("the reviewer's page shows %q:\n%s", leak, text)
		}
	}
	do(chromedp.SetValue(chromedp.ID("review-answer"), `{"raw_winner":"B","confidence":0.7,"biggest_gap":"slot B says less"}`),
		chromedp.Click(chromedp.ID("review-submit")), chromedp.WaitVisible(chromedp.ID("review-sent")))
	if text := page(); !strings.Contains(text, "You answered 1 of 10") {
		t.Fatalf("the queue after the answer:\n%s", text)
	}
	do(chromedp.Navigate(base + "/t/default/b/" + id))
	if text := page(); !strings.Contains(text, "A reviewer's token of default may not open GET /t/{tenant}/b/{batch}") || strings.Contains(text, "AC-") {
		t.Fatalf("the batch page, to a reviewer:\n%s", text)
	}
	// `tribunal review` takes the state folder from the view, so it reads last.
	want := ingress.Reviewer("default", tok)
	at := slices.IndexFunc(queue(t, dir, id), func(e client.ReviewEntry) bool { return e.Item == item.Item && slices.Contains(e.Reviewers, want) })
	if at < 0 {
		t.Fatalf("item %s is not reviewed by %s in the queue", item.Item, want)
	}
}
