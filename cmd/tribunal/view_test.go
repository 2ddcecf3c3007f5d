package main

import (
	"bytes"
	"context"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	openai "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/internal/testutil/browsertest"
	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/internal/testutil/freeport"
)

// screenshots, when set, is where TestViewAfterRuns writes the console's screenshots
// (the docs' are made with -screenshots ../../docs/console).
var screenshots = flag.String("screenshots", "", "write the console screenshots of TestViewAfterRuns into this folder")

// startView starts `tribunal view` in dir on a free loopback port and returns its URL
// once it serves pages.
func startView(t *testing.T, dir string, args ...string) string {
	t.Helper()
	addr := freeport.Addr(t)
	startIn(t, dir, append([]string{"view", "--listen", addr}, args...)...)
	waitHTTP(t, "http://"+addr+"/")
	return "http://" + addr
}

// TestViewAfterRuns runs the quickstart twice on one state folder (the openai provider
// against a local server; the second run with another model, whose answers differ), then
// starts `tribunal view` on the folder and looks at it in real Chromium: both batches are
// listed, newest first, with kinds, judges, counts and exit codes; the AC table filters;
// an AC shows its verdict un-blinded; the compare page shows the verdicts that changed.
func TestViewAfterRuns(t *testing.T) {
	bctx := browsertest.Start(t, 1360, 900)
	llm := fakellm.New(fakellm.Options{Latency: 15 * time.Millisecond, Respond: func(req openai.ChatCompletionRequest, n int) fakellm.Reply {
		r := answerByKind(req, n)
		if req.Model == "judge-v2" && req.ResponseFormat != nil && req.ResponseFormat.JSONSchema != nil && req.ResponseFormat.JSONSchema.Name == "ab_verdict" {
			// The second model prefers slot A (AC-1 and AC-2 put the reference there).
			r.Content = `{"raw_winner":"A","confidence":0.7,"biggest_gap":"Slot B does not say what to do next.","reasoning":"A is complete."}`
		}
		return r
	}})
	defer llm.Close()
	dir := projectDir(t)
	t.Setenv("OPENAI_API_KEY", "sk-local")
	run := func(model string) string {
		stdout, stderr, code := runState(t, dir, "run", "examples/quickstart", "--judge", "openai", "--judge-model", model, "--openai-base-url", llm.BaseURL())
		if code != 1 {
			t.Fatalf("run with %s: exit %d\n%s\n%s", model, code, stdout, stderr)
		}
		return strings.TrimSuffix(strings.TrimPrefix(batchIDs(stdout)[0], "batch "), " (tenant")
	}
	first, second := run("judge-v1"), run("judge-v2")

	base := startView(t, dir)
	// A second view on the folder names the first instead of fighting over it.
	if stdout, _, code := runState(t, dir, "view", "--listen", freeport.Addr(t)); code != 0 || !strings.Contains(stdout, "already shows .tribunal at "+base) {
		t.Fatalf("second view: exit %d %s", code, stdout)
	}

	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		for _, a := range actions {
			if err := chromedp.Do(ctx, a); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
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
		t.Helper()
		return eval(`(() => { const e = document.querySelector(` + strconv.Quote(sel) + `); return e ? e.textContent.replace(/\s+/g, " ").trim() : "(no ` + sel + `)"; })()`)
	}
	rows := func() string {
		return eval(`Array.from(document.querySelectorAll("#results tbody tr td:first-child")).map(td => td.textContent.trim()).join(",")`)
	}
	shot := func(name, sel string) {
		t.Helper()
		if *screenshots == "" {
			return
		}
		ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		var png []byte
		var err error
		if sel == "" {
			png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
		} else {
			png, err = chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(sel)))
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*screenshots, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The list: both batches, newest first, with what each held and how it ended.
	do("open the list", chromedp.Navigate(base+"/"))
	list := eval(`Array.from(document.querySelectorAll("#batches tbody tr")).map(tr => Array.from(tr.cells).map(c => c.textContent.replace(/\s+/g, " ").trim()).join("|")).join("\n")`)
	lines := strings.Split(list, "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], second) || !strings.Contains(lines[1], first) {
		t.Fatalf("batches listed:\n%s\nwant %s then %s", list, second, first)
	}
	for i, model := range []string{"judge-v2", "judge-v1"} {
		for _, want := range []string{"6 ab, 1 critic, 1 equivalence", "openai/" + model, "8/8", "complete", "|6|2|0|", "|1"} {
			if !strings.Contains(lines[i], want) {
				t.Errorf("row %d lacks %q: %s", i, want, lines[i])
			}
		}
	}

	// The batch page: the charts, then the table, filtered to the blocked ACs.
	do("open the second batch", chromedp.Click(chromedp.CSS(`#batches a[href$="`+second+`"]`)), chromedp.WaitVisible(chromedp.ID("results")))
	if got := rows(); got != "AC-1,AC-2,AC-3,AC-7,AC-9,AC-10,AC-11,AC-12" {
		t.Fatalf("rows %s", got)
	}
	if n := eval(`String(document.querySelectorAll("#charts svg").length)`); n == "0" || !strings.Contains(text("#chart-tokens"), "openai/judge-v2") {
		t.Fatalf("charts: %s svg, tokens chart %q", n, text("#chart-tokens"))
	}
	shot("batch.png", "")
	shot("charts.png", "#charts")
	// The trust report the batch page links: the same report `tribunal report` prints.
	do("open the trust report", chromedp.Click(chromedp.ID("report-link")), chromedp.WaitVisible(chromedp.ID("outcomes")))
	if got := text("main"); strings.Contains(got, "not available") || !strings.Contains(got, "Position bias") || !strings.Contains(got, "openai/judge-v2") {
		t.Fatalf("trust report page: %s", got)
	}
	do("back to the batch", chromedp.Navigate(base+"/t/default/b/"+second), chromedp.WaitVisible(chromedp.ID("results")))
	do("filter the blocked ACs", chromedp.SetValue(chromedp.ID("f-outcome"), "blocked"), chromedp.Click(chromedp.ID("apply")), chromedp.WaitVisible(chromedp.ID("clear")))
	if got := rows(); got != "AC-9,AC-10" {
		t.Fatalf("filtered rows %s, want AC-9,AC-10", got)
	}
	if got := text("#matched"); !strings.HasPrefix(got, "2 of 8 ACs match") {
		t.Fatalf("matched %q", got)
	}
	do("search the criteria", chromedp.Click(chromedp.ID("clear")), chromedp.WaitVisible(chromedp.ID("q")),
		chromedp.SendKeys(chromedp.ID("q"), "error message"), chromedp.Click(chromedp.ID("apply")), chromedp.WaitVisible(chromedp.ID("clear")))
	if got := rows(); got != "AC-2" {
		t.Fatalf("search rows %s, want AC-2", got)
	}

	// An AC: the verdict, the judge's words with which slot was ours, the diff, the calls.
	do("open AC-2", chromedp.Click(chromedp.CSS(`#results a[href$="/j/AC-2"]`)), chromedp.WaitVisible(chromedp.ID("ab")))
	if got := text("#winner"); got != "REFERENCE" && got != "reference" {
		t.Errorf("AC-2 winner %q", got)
	}
	if got := text("#gap"); !strings.Contains(got, "Slot B does not say what to do next. (slot A was the reference, slot B ours)") {
		t.Errorf("AC-2 gap %q", got)
	}
	if n := eval(`String(document.querySelectorAll("#diff tbody tr").length)`); n == "0" {
		t.Error("no diff of the two texts")
	}
	shot("ac.png", "")
	do("open the call", chromedp.Click(chromedp.CSS("#calls a.call-link")), chromedp.WaitVisible(chromedp.ID("response-0")))
	// The judge's JSON answer, laid out over lines for a person to read.
	if got := text("#response-0"); !strings.Contains(got, `"raw_winner": "A"`) || !strings.Contains(eval(`document.getElementById("response-0").textContent`), "\n  \"confidence\": 0.7") {
		t.Errorf("raw answer %q", got)
	}
	shot("call.png", "")

	// The compare page: the second model's verdicts against the first's, the previous run
	// of the same batch file, which the form offers first and the batch page links.
	do("open the compare page", chromedp.Navigate(base+"/t/default/b/"+second), chromedp.WaitVisible(chromedp.ID("compare-previous")))
	if got := eval(`document.getElementById("with").value`); got != first {
		t.Errorf("the compare form offers %q first, want the previous run %s", got, first)
	}
	do("compare with the previous run", chromedp.Click(chromedp.CSS("#compare-previous a")), chromedp.WaitVisible(chromedp.ID("changes")))
	changes := eval(`Array.from(document.querySelectorAll("#changes tbody tr")).map(tr => Array.from(tr.cells).map(c => c.textContent.replace(/\s+/g, " ").trim()).join("|")).join("\n")`)
	// judge-v1 always answered B, judge-v2 A: the ACs whose slots differ changed winner;
	// AC-1 (the reference in slot A) went from ours to the reference: a regression.
	if !strings.Contains(changes, "AC-1|ab|regressed|clean · compared ours") || !strings.Contains(changes, "compared reference") || text("#regressed") == "0" {
		t.Fatalf("changes:\n%s", changes)
	}
	shot("compare.png", "")

	// The view steps aside for a run on its folder and shows the new batch afterwards.
	if _, stderr, code := runState(t, dir, "run", "examples/quickstart"); code != 1 || !strings.Contains(stderr, "steps aside") {
		t.Fatalf("a run beside the view: exit %d\n%s", code, stderr)
	}
	waitFor(t, 30*time.Second, "the view to list the third batch", func() bool {
		resp, err := http.Get(base + "/api/batches")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode == 200 && strings.Count(b.String(), `"batch":`) == 3
	})
}

// TestViewFormsOnRunState drives `tribunal view` in real Chromium over the state folders
// `tribunal run` keeps. A view whose run spent its budget offers "Reset the loop" (and no
// spot-check); the form resets it, the page says so and shows the reset, and the next run
// (the view steps aside for it) starts the view's next loop. A sign-off an interrupted
// interactive run left waiting offers the HE-2 form; rejecting it naming a dimension
// records it on the sign-off. The audit lists both as inputs from people and stays clean.
func TestViewFormsOnRunState(t *testing.T) {
	bctx := browsertest.Start(t, 1280, 900)
	job := "tasks--list--populated--light"
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
		defer cancel()
		for _, a := range actions {
			if err := chromedp.Do(ctx, a); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
	}
	text := func(sel string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const e = document.querySelector(`+strconv.Quote(sel)+`); return e ? e.textContent.replace(/\s+/g, " ").trim() : "(none)"; })()`))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return v
	}

	// Reset: a view whose budget the run spent.
	dir := copyFeature(t, "version: 1\nname: rubric\nacs:\n  - {id: tasks, kind: rubric, spec: spec.json, mode: headless, max_iterations: 1}\n")
	failing := rubricAnswers(t, map[string]float64{"typography": 0}, false, []string{"typography"})
	first, row := rubricRun(t, dir, failing)
	if !strings.HasPrefix(row, "budget_exhausted: ") {
		t.Fatalf("run 1: %s", row)
	}
	base := startView(t, dir)
	do("open the spent view", chromedp.Navigate(base+"/t/default/b/"+first+"/j/"+job), chromedp.WaitVisible(chromedp.ID("reset")))
	if got := text("#spotcheck"); got != "(none)" {
		t.Errorf("a spent view offers a spot-check: %q", got)
	}
	do("reset the loop", chromedp.SendKeys(chromedp.ID("reason"), "typography tuned in rubric.json"),
		chromedp.Click(chromedp.ID("reset-loop")), chromedp.WaitVisible(chromedp.ID("reset-done")))
	if got := text("#reset-done"); !strings.Contains(got, "Loop 0 is reset: the view's next run starts loop 1 at iteration 1") {
		t.Errorf("after the reset the page says %q", got)
	}
	if got := text("#view-loop"); !strings.Contains(got, "loop 1, 0 iterations spent; began: reset") || !strings.Contains(got, "by console:") ||
		!strings.Contains(got, "typography tuned in rubric.json") {
		t.Errorf("the view's loop after the reset: %q", got)
	}
	if got := text("#reset"); got != "(none)" {
		t.Errorf("the reset form is still offered: %q", got)
	}
	_, row = rubricRun(t, dir, failing)
	if !strings.Contains(row, "loop iteration 1 of loop 1;") {
		t.Fatalf("the run after the console's reset: %s", row)
	}
	stdout, stderr, code := runState(t, dir, "audit", "--batch", first)
	if code != 0 || !regexp.MustCompile(`view\.reset \S+ \(seq \d+\): reset loop 0 by console:\S* at \S+: typography tuned in rubric.json`).MatchString(stdout) ||
		!strings.Contains(stdout, "ok: every decision") {
		t.Fatalf("audit after the console's reset: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// Spot-check: a sign-off an interrupted interactive run left waiting for a person.
	dir = copyFeature(t, "version: 1\nname: rubric\nacs:\n  - {id: tasks, kind: rubric, spec: spec.json, mode: interactive}\n")
	batchID := awaitingSpotcheck(t, dir)
	base = startView(t, dir)
	do("open the waiting sign-off", chromedp.Navigate(base+"/t/default/b/"+batchID+"/j/"+job), chromedp.WaitVisible(chromedp.ID("approve")),
		chromedp.SetValue(chromedp.ID("dimension"), "typography"), chromedp.Click(chromedp.ID("reject")), chromedp.WaitVisible(chromedp.ID("spotcheck-recorded")))
	if got := text("#human-spotcheck"); got != "typography" {
		t.Errorf("human spot-check after the rejection %q", got)
	}
	if got := text("#spotcheck"); got != "(none)" {
		t.Errorf("the spot-check form is still offered: %q", got)
	}
	stdout, stderr, code = runState(t, dir, "audit", "--batch", batchID)
	if code != 0 || !regexp.MustCompile(`spotcheck\.recorded \S+ \(seq \d+\): rejected typography by console:`).MatchString(stdout) ||
		!strings.Contains(stdout, "ok: every decision") {
		t.Fatalf("audit after the console's spot-check: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
