package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tribunal-dev/tribunal/internal/testutil/browsertest"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// reviewBatch writes an ab batch of n ACs sharing two small artifacts, with the review
// setting given, and returns its folder.
func reviewBatch(t *testing.T, n int, review string) string {
	t.Helper()
	dir := t.TempDir()
	y := "version: 1\nname: rev\nreview: " + review + "\nacs:\n"
	for i := 1; i <= n; i++ {
		y += fmt.Sprintf("  - {id: AC-%d, criterion: The notes tell a user what changed., ours: ours.md, reference: ref.md}\n", i)
	}
	for name, data := range map[string]string{"batch.yaml": y, "ours.md": "The release notes say what changed.\n", "ref.md": "Various improvements.\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runBatch runs the batch in dir keeping its state there and returns the batch id.
func runBatch(t *testing.T, dir string, extra ...string) string {
	t.Helper()
	out := t.TempDir()
	if _, stderr, code := runState(t, dir, append([]string{"run", ".", "-q", "--out", out}, extra...)...); code > 1 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	ids, _ := os.ReadDir(out)
	if len(ids) != 1 {
		t.Fatalf("run wrote %d batch folders", len(ids))
	}
	return ids[0].Name()
}

func queue(t *testing.T, dir, batchID string) []client.ReviewEntry {
	t.Helper()
	stdout, stderr, code := runState(t, dir, "review", "--batch", batchID, "--json")
	var q []client.ReviewEntry
	if code != 0 || json.Unmarshal([]byte(stdout), &q) != nil {
		t.Fatalf("review --json: exit %d\n%s\n%s", code, stdout, stderr)
	}
	return q
}

func answersFile(t *testing.T, v any) string {
	t.Helper()
	data, _ := json.Marshal(v)
	p := filepath.Join(t.TempDir(), "answers.json")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// peopleReport is what these tests read of `tribunal report --json`.
type peopleReport struct {
	People *client.ReviewReport `json:"people"`
}

func report(t *testing.T, dir, batchID string) *client.ReviewReport {
	t.Helper()
	stdout, stderr, code := runState(t, dir, "report", "--batch", batchID, "--json")
	var r peopleReport
	if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil || r.People == nil {
		t.Fatalf("report --json: exit %d\n%s\n%s", code, stdout, stderr)
	}
	return r.People
}

// TestReviewSampleIsBlindAndRederived: a 200-AC ab batch with a 10 % review sample
// queues 20 ACs, the same 20 when the batch file runs again (drawn under its seed and
// name, not the run id); the export a reviewer reads shows slots A and B with no AC id,
// path or role; answers imported from a file (keyed by item id) are checked, recorded
// with the local user and appear in the report.
func TestReviewSampleIsBlindAndRederived(t *testing.T) {
	dir := reviewBatch(t, 200, "{share: 0.1, seed: s1}")
	first := runBatch(t, dir)
	q := queue(t, dir, first)
	if len(q) != 20 {
		t.Fatalf("queued %d of 200 at 10 %%", len(q))
	}
	second := runBatch(t, dir, "--rerun")
	if second == first {
		t.Fatal("the rerun kept the batch id")
	}
	acs := func(q []client.ReviewEntry) []string {
		var out []string
		for _, e := range q {
			out = append(out, e.AC)
			if len(e.Reasons) == 0 || e.Reasons[0] != "sample" {
				t.Fatalf("%s queued for %v", e.AC, e.Reasons)
			}
		}
		return out
	}
	if a, b := acs(q), acs(queue(t, dir, second)); !slices.Equal(a, b) {
		t.Fatalf("the rerun sampled %v, the first run %v", b, a)
	}

	stdout, stderr, code := runState(t, dir, "review", "--batch", first, "--export", "-")
	if code != 0 {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	for _, leak := range []string{"AC-", "ours", "reference", ".md", dir, first} {
		if strings.Contains(stdout, leak) {
			t.Errorf("the export shows %q", leak)
		}
	}
	var ex client.ReviewExport
	if err := json.Unmarshal([]byte(stdout), &ex); err != nil || len(ex.Items) != 20 {
		t.Fatalf("export: %v, %d items", err, len(ex.Items))
	}
	shown := ""
	for _, p := range ex.Items[0].Shown {
		shown += p.Text
	}
	if !strings.Contains(shown, "Slot A") || !strings.Contains(shown, "Slot B") || !strings.Contains(shown, "The notes tell a user what changed.") {
		t.Fatalf("the item shows %q", shown)
	}

	bad := answersFile(t, map[string]any{ex.Items[0].Item: map[string]any{"raw_winner": "ours", "confidence": 0.9, "biggest_gap": "x"}})
	if _, stderr, code := runState(t, dir, "review", "--batch", first, "--import", bad); code != 2 || !strings.Contains(stderr, "raw_winner") {
		t.Fatalf("a role word as raw_winner: exit %d\n%s", code, stderr)
	}
	answers := map[string]any{}
	for _, it := range ex.Items[:5] {
		answers[it.Item] = map[string]any{"raw_winner": "A", "confidence": 0.8, "biggest_gap": "slot A says what changed"}
	}
	stdout, stderr, code = runState(t, dir, "review", "--batch", first, "--import", answersFile(t, answers))
	if code != 0 || !strings.Contains(stdout, "5 review(s) recorded by "+client.LocalReviewer()) {
		t.Fatalf("import: exit %d\n%s\n%s", code, stdout, stderr)
	}
	r := report(t, dir, first)
	if r.Reviewed != 5 || r.Agreement[0].N != 5 || r.Agreement[0].Kind != "ab" {
		t.Fatalf("report %+v", r)
	}
}

// TestReviewDecidesAndAgreement: 100 ab ACs all queued (count 100), the batch letting
// people decide; scripted reviewers agree with the judge on 90 and answer the other slot
// on 10. The report's agreement is 90/100 with an interval, its kappa is the one computed
// here from the confusion table, the 10 disagreements are listed; each disagreeing AC's
// outcome follows the review in the results and the manifest (which says a review
// decided), and the audit re-derives it all.
func TestReviewDecidesAndAgreement(t *testing.T) {
	dir := reviewBatch(t, 100, "{count: 100, decides: true}")
	id := runBatch(t, dir)
	q := queue(t, dir, id)
	if len(q) != 100 {
		t.Fatalf("queued %d", len(q))
	}
	answers := map[string]any{}
	person := map[string]ab.Winner{}
	judge := map[string]ab.Winner{}
	var disagree []string
	for i, e := range q {
		slot := "A" // the scripted judge answers A throughout
		if i%10 == 3 {
			slot = "B"
			disagree = append(disagree, e.AC)
		}
		// A team reviewing in its own tool may key answers by AC id (seed 000's shape).
		answers[e.AC] = map[string]any{"raw_winner": slot, "confidence": 0.9, "biggest_gap": "slot " + slot + " is better"}
		judge[e.AC] = ab.Unshuffle("A", ab.Assign(e.AC, 0))
		person[e.AC] = ab.Unshuffle(slot, ab.Assign(e.AC, 0))
	}
	if _, stderr, code := runState(t, dir, "review", "--batch", id, "--import", answersFile(t, answers)); code != 0 {
		t.Fatalf("import: exit %d\n%s", code, stderr)
	}
	r := report(t, dir, id)
	a := r.Agreement[0]
	if !r.Decides || a.Share.K != 90 || a.Share.N != 100 || !(a.Share.Lo < 0.9 && a.Share.Hi > 0.9) {
		t.Fatalf("agreement %+v", a.Share)
	}
	// Kappa, independently: a table of judge by person winners.
	labels := []ab.Winner{ab.WinnerOurs, ab.WinnerReference, ab.WinnerTie}
	var m [3][3]float64
	at := func(w ab.Winner) int { return slices.Index(labels, w) }
	for ac := range judge {
		m[at(judge[ac])][at(person[ac])]++
	}
	var po, pe float64
	for i := range 3 {
		po += m[i][i] / 100
		var row, col float64
		for j := range 3 {
			row, col = row+m[i][j], col+m[j][i]
		}
		pe += row / 100 * col / 100
	}
	if want := (po - pe) / (1 - pe); math.Abs(a.Kappa.Point-want) > 1e-9 || !(a.Kappa.Lo < want && want < a.Kappa.Hi) {
		t.Fatalf("kappa %+v, want %v", a.Kappa, want)
	}
	var listed []string
	for _, d := range a.Disagreements {
		listed = append(listed, d.AC)
	}
	slices.Sort(listed)
	slices.Sort(disagree)
	if !slices.Equal(listed, disagree) {
		t.Fatalf("disagreements %v, want %v", listed, disagree)
	}
	stdout, _, _ := runState(t, dir, "report", "--batch", id)
	if !strings.Contains(stdout, "agreement 90/100 = 0.900 [") || !strings.Contains(stdout, "disagreements (10)") || !strings.Contains(stdout, "decides the outcome") {
		t.Fatalf("report text:\n%s", stdout)
	}

	out := t.TempDir()
	stdout, stderr, code := runState(t, dir, "results", "--batch", id, "--json", "--out", out)
	if code > 1 {
		t.Fatalf("results: exit %d\n%s", code, stderr)
	}
	var m2 ab.Manifest
	data, err := os.ReadFile(filepath.Join(out, id, "manifest.json"))
	if err != nil || json.Unmarshal(data, &m2) != nil {
		t.Fatalf("manifest: %v", err)
	}
	for _, c := range m2.Comparisons {
		if c.Winner != person[c.ACID] || c.Tribunal == nil || c.Tribunal.Review == nil || c.Tribunal.Review.DecidedBy != "review" || c.Tribunal.Review.JudgeWinner != judge[c.ACID] {
			t.Fatalf("%s in the manifest: winner %s (the person said %s), %+v", c.ACID, c.Winner, person[c.ACID], c.Tribunal)
		}
	}
	// The reviews came after the batch completed: the aggregator folded it again and
	// stored the people's completion and manifest (the results above read it from the
	// store), saying it was revised and by which review.
	revised := func() records.Revision {
		t.Helper()
		stdout, stderr, code := runState(t, dir, "results", "--batch", id, "--json")
		var res struct {
			Revised *records.Revision `json:"revised"`
		}
		if code > 1 || json.Unmarshal([]byte(stdout), &res) != nil || res.Revised == nil {
			t.Fatalf("results --json: exit %d, revised %+v\n%s", code, res.Revised, stderr)
		}
		return *res.Revised
	}
	first := revised()
	if first.Reviews != 100 || first.By == "" {
		t.Fatalf("the stored completion's revision %+v, want 100 reviews", first)
	}
	if stdout, _, _ := runState(t, dir, "results", "--batch", id); !strings.Contains(stdout, "revised after it completed: 100 outcomes decided by people's reviews, the latest by review "+first.By) {
		t.Fatalf("the results table does not say the completion was revised:\n%s", stdout)
	}
	if stdout, stderr, code := runState(t, dir, "audit", "--batch", id); code != 0 || !strings.Contains(stdout, "reviewed {") {
		t.Fatalf("audit: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// The same person answering again is one answer, the later, counted as a change.
	again := map[string]any{disagree[0]: map[string]any{"raw_winner": "A", "confidence": 0.7, "biggest_gap": "on a second look, slot A"}}
	stdout, stderr, code = runState(t, dir, "review", "--batch", id, "--import", answersFile(t, again))
	if code != 0 || !strings.Contains(stdout, "1 changed an earlier answer") {
		t.Fatalf("second answer: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if r := report(t, dir, id); r.Reviews != 100 || r.Agreement[0].Share.K != 91 {
		t.Fatalf("after the change: %d reviews, %v", r.Reviews, r.Agreement[0].Share)
	}
	if again := revised(); again.Reviews != 100 || again.By == first.By {
		t.Fatalf("after the change the stored completion's revision is %+v (was %+v): the changed answer did not revise it", again, first)
	}
	if stdout, stderr, code := runState(t, dir, "audit", "--batch", id); code != 0 {
		t.Fatalf("audit after the change: exit %d\n%s\n%s", code, stdout, stderr)
	}

	gold := t.TempDir()
	if stdout, stderr, code := runState(t, dir, "review", "--batch", id, "--export-gold", gold); code != 0 || !strings.Contains(stdout, "100 reviewed AC(s)") {
		t.Fatalf("export-gold: exit %d\n%s\n%s", code, stdout, stderr)
	}
	stdout, stderr, code = run(t, dir, "calibrate", gold, "--json", "-q", "--scripted-winner", "A")
	var cal struct {
		Judges []struct {
			Judge  string `json:"judge"`
			Checks []struct {
				Name  string `json:"name"`
				Value struct {
					K int `json:"k"`
					N int `json:"n"`
				} `json:"value"`
			} `json:"checks"`
		} `json:"judges"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &cal) != nil || len(cal.Judges) != 1 {
		t.Fatalf("calibrate on the gold set: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// The scripted judge answers A as before: right on the 91 ACs people now agree on.
	if c := cal.Judges[0].Checks[0]; c.Name != "accuracy" || c.Value.K != 91 || c.Value.N != 100 {
		t.Fatalf("calibration %+v", cal.Judges[0])
	}
}

// TestReviewerPageInChromium: the reviewer's page of a 200-AC ab batch's 10 % queue, in
// `tribunal view` and real Chromium, shows slots A and B and the criterion with no AC id,
// role or path; an answer given there and answers imported with `tribunal review
// --import` both appear in the report, each as it came.
func TestReviewerPageInChromium(t *testing.T) {
	bctx := browsertest.Start(t, 1280, 900)
	dir := reviewBatch(t, 200, "{share: 0.1, seed: s1}")
	id := runBatch(t, dir)
	q := queue(t, dir, id)
	imported := map[string]any{}
	for _, e := range q[:2] {
		imported[e.Item] = map[string]any{"raw_winner": "B", "confidence": 0.6, "biggest_gap": "slot B is shorter"}
	}
	if _, stderr, code := runState(t, dir, "review", "--batch", id, "--import", answersFile(t, imported)); code != 0 {
		t.Fatalf("import: exit %d\n%s", code, stderr)
	}
	base := startView(t, dir)
	item := q[5]
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
	for _, a := range []chromedp.Action[chromedp.Void]{chromedp.Navigate(base + "/t/default/b/" + id + "/review"), chromedp.WaitVisible(chromedp.ID("review-queue"))} {
		if err := chromedp.Do(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if text := page(); strings.Contains(text, "AC-") || !strings.Contains(text, item.Item) || !strings.Contains(text, "You answered 2 of 20") {
		t.Fatalf("the queue page shows:\n%s", text)
	}
	for _, a := range []chromedp.Action[chromedp.Void]{chromedp.Navigate(base + "/t/default/b/" + id + "/review/" + item.Item), chromedp.WaitVisible(chromedp.ID("review-form"))} {
		if err := chromedp.Do(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	text := page()
	for _, want := range []string{"Slot A (text/markdown)", "Slot B (text/markdown)", "The notes tell a user what changed.", "The release notes say what changed.", "Various improvements."} {
		if !strings.Contains(text, want) {
			t.Errorf("the reviewer's page lacks %q", want)
		}
	}
	for _, leak := range []string{"AC-", "ours", "reference", ".md", dir} {
		if strings.Contains(text, leak) {
			t.Errorf("the reviewer's page shows %q:\n%s", leak, text)
		}
	}
	answer := `{"raw_winner":"A","confidence":0.85,"biggest_gap":"slot A says what changed"}`
	for _, a := range []chromedp.Action[chromedp.Void]{chromedp.SetValue(chromedp.ID("review-answer"), answer), chromedp.Click(chromedp.ID("review-submit")),
		chromedp.WaitVisible(chromedp.ID("review-sent"))} {
		if err := chromedp.Do(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	r := report(t, dir, id)
	if r.Reviews != 3 || r.Via["import"] != 2 || r.Via["viewer"] != 1 || r.Agreement[0].N != 3 {
		t.Fatalf("report after the viewer's answer: %+v", r)
	}
}
