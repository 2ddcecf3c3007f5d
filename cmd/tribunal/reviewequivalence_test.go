package main

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tribunal-dev/tribunal/internal/testutil/browsertest"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/kind/equivalence"
)

// eqAnswer is an equivalence answer of the given verdict.
func eqAnswer(verdict string) map[string]any {
	delta := ""
	if verdict != equivalence.VerdictEquivalent {
		delta = "the candidate drops the component name"
	}
	return map[string]any{"verdict": verdict, "behaviour_delta": delta,
		"efficiency_signal": map[string]any{"original_directness": 3, "candidate_directness": 4, "interpretation_notes": "both runs act at once"}}
}

// TestReviewEquivalencePerCase: an equivalence batch of two ACs (the quickstart's skill,
// four cases each) judged by the scripted judge, every AC queued: the queue holds one
// item per case, each showing what the judge saw for that case (its case input, the two
// transcripts) with no AC or case id. Answers imported per case (keyed by AC id with
// their case, or by item id) are checked, a missing or unknown case refused naming the AC
// and the field; `tribunal report --json` gives the judge's agreement with the person on
// equivalence, kappa as computed here from the table, and the disagreeing cases. The
// same person answering a case again is one answer, the later. With a batch letting
// people decide, a case's review decides its verdict and the AC's outcome follows.
func TestReviewEquivalencePerCase(t *testing.T) {
	dir := projectDir(t)
	ac := func(id string) string {
		return "  - {id: " + id + ", kind: equivalence, original: skill/original.md, candidate: skill/candidate.md, cases_file: skill/cases.yaml}\n"
	}
	batch := filepath.Join(dir, "examples", "quickstart", "eqrev.yaml")
	if err := os.WriteFile(batch, []byte("version: 1\nname: eqrev\nreview: {count: 2, seed: s}\nacs:\n"+ac("AC-12")+ac("AC-13")), 0o644); err != nil {
		t.Fatal(err)
	}
	// The judge: equivalent but for two cases of each AC (the ACs judge the same
	// transcripts, which the judge's cache may answer once).
	judge := map[string]string{}
	cases := []string{"plain-fix", "no-component", "asks-for-lies", "breaking-rename"}
	for _, a := range []string{"AC-12", "AC-13"} {
		for _, c := range cases {
			judge[a+"/"+c] = equivalence.VerdictEquivalent
		}
	}
	recorded := map[string]any{}
	for _, a := range []string{"AC-12", "AC-13"} {
		judge[a+"/no-component"], judge[a+"/asks-for-lies"] = equivalence.VerdictRegressed, equivalence.VerdictDiverged
		recorded[a+"/no-component"], recorded[a+"/asks-for-lies"] = eqAnswer(equivalence.VerdictRegressed), eqAnswer(equivalence.VerdictDiverged)
	}
	out := t.TempDir()
	if _, stderr, code := runState(t, dir, "run", batch, "-q", "--out", out, "--scripted-answers", answersFile(t, recorded)); code > 1 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	ids, _ := os.ReadDir(out)
	if len(ids) != 1 {
		t.Fatalf("run wrote %d batch folders", len(ids))
	}
	id := ids[0].Name()

	q := queue(t, dir, id)
	if len(q) != 8 {
		t.Fatalf("queued %d items, want one per case of the two ACs: %+v", len(q), q)
	}
	items := map[string]client.ReviewEntry{}
	for _, e := range q {
		if e.Kind != "equivalence" || !slices.Contains(cases, e.Case) || e.Item != client.ReviewCaseItemID("default", id, e.AC, e.Case) || e.Reasons[0] != "sample" {
			t.Fatalf("queue entry %+v", e)
		}
		items[e.Item] = e
	}
	if len(items) != 8 {
		t.Fatal("two cases share an item id")
	}

	stdout, stderr, code := runState(t, dir, "review", "--batch", id, "--export", "-")
	if code != 0 {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	for _, leak := range append([]string{"AC-1", "SKILL", "original.md", "candidate.md", id}, cases...) {
		if strings.Contains(stdout, leak) {
			t.Errorf("the export shows %q", leak)
		}
	}
	var ex client.ReviewExport
	if err := json.Unmarshal([]byte(stdout), &ex); err != nil || len(ex.Items) != 8 {
		t.Fatalf("export: %v, %d items", err, len(ex.Items))
	}
	inputs := map[string]string{"plain-fix": "fixed a crash in the CSV exporter", "no-component": "made things faster", "asks-for-lies": "reviewed by the security team", "breaking-rename": "--time-zone"}
	for _, it := range ex.Items {
		shown := ""
		for _, p := range it.Shown {
			shown += p.Text
		}
		e := items[it.Item]
		if !strings.Contains(shown, "CASE INPUT") || !strings.Contains(shown, inputs[e.Case]) || !strings.Contains(shown, "ORIGINAL TRANSCRIPT") || !strings.Contains(it.Answer, "candidate-regressed") {
			t.Fatalf("the item of %s case %s shows %q (answer shape %s)", e.AC, e.Case, shown, it.Answer)
		}
		for c, in := range inputs {
			if c != e.Case && strings.Contains(shown, in) {
				t.Fatalf("the item of case %s shows case %s's input", e.Case, c)
			}
		}
	}

	// Refused before anything is recorded: no case, an unknown case.
	for name, tc := range map[string]struct {
		answers map[string]any
		want    string
	}{
		"no case":      {map[string]any{"AC-12": eqAnswer(equivalence.VerdictEquivalent)}, "AC-12 is reviewed per case: the answer names no case (field case"},
		"unknown case": {map[string]any{"AC-12": withCase("nope", equivalence.VerdictEquivalent)}, `AC AC-12: case "nope" is not in the review queue (field case`},
		"bad verdict":  {map[string]any{"AC-12": withCase("plain-fix", "same")}, "verdict"},
	} {
		if _, stderr, code := runState(t, dir, "review", "--batch", id, "--import", answersFile(t, tc.answers)); code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, want 2 naming %q:\n%s", name, code, tc.want, stderr)
		}
	}
	if r := queue(t, dir, id); len(r[0].Reviewers) != 0 {
		t.Fatal("a refused import recorded a review")
	}

	// The person: agrees but on AC-12 plain-fix (regressed: the judge too lenient) and
	// AC-13 asks-for-lies (equivalent: the judge too strict). AC-12 is answered by AC id
	// with a list of cases, AC-13 by item id.
	person := map[string]string{}
	for k, v := range judge {
		person[k] = v
	}
	person["AC-12/plain-fix"], person["AC-13/asks-for-lies"] = equivalence.VerdictRegressed, equivalence.VerdictEquivalent
	var list []any
	answers := map[string]any{}
	for _, e := range q {
		if e.AC == "AC-12" {
			list = append(list, withCase(e.Case, person[e.AC+"/"+e.Case]))
			continue
		}
		answers[e.Item] = eqAnswer(person[e.AC+"/"+e.Case])
	}
	answers["AC-12"] = list
	stdout, stderr, code = runState(t, dir, "review", "--batch", id, "--import", answersFile(t, answers))
	if code != 0 || !strings.Contains(stdout, "8 review(s) recorded by "+client.LocalReviewer()) {
		t.Fatalf("import: exit %d\n%s\n%s", code, stdout, stderr)
	}
	r := report(t, dir, id)
	if r.Reviewed != 2 || r.Reviews != 8 || r.Decides || len(r.Agreement) != 1 {
		t.Fatalf("report %+v", r)
	}
	a := r.Agreement[0]
	if a.Kind != "equivalence" || !strings.HasPrefix(a.Model, "scripted/") || a.N != 8 || a.Share.K != 6 || !(a.Share.Lo < 0.75 && a.Share.Hi > 0.75) || a.Lenient != 1 || a.Strict != 1 {
		t.Fatalf("agreement %+v", a)
	}
	// Kappa, independently: a table of judge by person verdicts.
	labels := []string{equivalence.VerdictEquivalent, equivalence.VerdictDiverged, equivalence.VerdictRegressed}
	var m [3][3]float64
	for k := range judge {
		m[slices.Index(labels, judge[k])][slices.Index(labels, person[k])]++
	}
	var po, pe float64
	for i := range 3 {
		po += m[i][i] / 8
		var row, col float64
		for j := range 3 {
			row, col = row+m[i][j], col+m[j][i]
		}
		pe += row / 8 * col / 8
	}
	if want := (po - pe) / (1 - pe); !a.Kappa.Defined || math.Abs(a.Kappa.Point-want) > 1e-9 {
		t.Fatalf("kappa %+v, want %v", a.Kappa, want)
	}
	var listed []string
	for _, d := range a.Disagreements {
		listed = append(listed, d.AC+"/"+d.Case)
	}
	slices.Sort(listed)
	if strings.Join(listed, ",") != "AC-12/plain-fix,AC-13/asks-for-lies" {
		t.Fatalf("disagreements %v", listed)
	}
	stdout, _, _ = runState(t, dir, "report", "--batch", id)
	if !strings.Contains(stdout, "on equivalence: agreement 6/8 = 0.750 [") || !strings.Contains(stdout, "AC-12 case plain-fix: judge equivalent") {
		t.Fatalf("report text:\n%s", stdout)
	}

	// The same person answering a case again is one answer, the later.
	again := map[string]any{"AC-12": withCase("plain-fix", equivalence.VerdictEquivalent)}
	stdout, stderr, code = runState(t, dir, "review", "--batch", id, "--import", answersFile(t, again))
	if code != 0 || !strings.Contains(stdout, "1 review(s) recorded") || !strings.Contains(stdout, "1 changed an earlier answer") {
		t.Fatalf("second answer: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if r := report(t, dir, id); r.Reviews != 8 || r.Agreement[0].Share.K != 7 {
		t.Fatalf("after the change: %d reviews, %v", r.Reviews, r.Agreement[0].Share)
	}
	if stdout, stderr, code := runState(t, dir, "audit", "--batch", id); code != 0 || !strings.Contains(stdout, "reviewed case plain-fix") {
		t.Fatalf("audit: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// The viewer's reviewer pages: every case an item, each showing its case as the judge
	// saw it, no AC or case id.
	base := startView(t, dir)
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, body)
		}
		return string(body)
	}
	page := get("/t/default/b/" + id + "/review")
	for _, e := range q {
		if !strings.Contains(page, e.Item) {
			t.Errorf("the queue page lacks %s", e.Item)
		}
	}
	for _, e := range q[:2] {
		page := get("/t/default/b/" + id + "/review/" + e.Item)
		if !strings.Contains(page, inputs[e.Case]) || strings.Contains(page, "AC-1") || strings.Contains(page, e.Case) {
			t.Errorf("the page of %s case %s shows its input %v, an AC id %v, its case id %v", e.AC, e.Case,
				strings.Contains(page, inputs[e.Case]), strings.Contains(page, "AC-1"), strings.Contains(page, e.Case))
		}
	}

	// The team's report page names the disagreeing case.
	if page := get("/t/default/b/" + id + "/report"); !strings.Contains(page, "</a> case asks-for-lies: judge candidate-diverged") {
		t.Errorf("the report page does not name the disagreeing case:\n%s", page)
	}

	// Letting people decide: a case's review replaces the judge's verdict, and the AC's
	// outcome is derived again from its cases (the manifest says which case a person
	// decided and what the judge said); the audit re-derives it.
	if err := os.WriteFile(batch, []byte("version: 1\nname: eqdec\nreview: {count: 1, decides: true}\nacs:\n"+ac("AC-12")), 0o644); err != nil {
		t.Fatal(err)
	}
	out = t.TempDir()
	if _, stderr, code := runState(t, dir, "run", batch, "-q", "--out", out); code != 0 {
		t.Fatalf("a deciding equivalence batch the judge passes: exit %d\n%s", code, stderr)
	}
	ids, _ = os.ReadDir(out)
	id = ids[0].Name()
	decide := map[string]any{"AC-12": withCase("no-component", equivalence.VerdictRegressed)}
	if _, stderr, code := runState(t, dir, "review", "--batch", id, "--import", answersFile(t, decide)); code != 0 {
		t.Fatalf("import: exit %d\n%s", code, stderr)
	}
	if r := report(t, dir, id); !r.Decides || r.Agreement[0].Share.K != 0 || r.Agreement[0].Lenient != 1 {
		t.Fatalf("report %+v", r)
	}
	res := t.TempDir()
	if _, stderr, code := runState(t, dir, "results", "--batch", id, "--json", "--out", res); code != 1 {
		t.Fatalf("results after a person found a regression: exit %d, want 1\n%s", code, stderr)
	}
	var man equivalence.Manifest
	data, err := os.ReadFile(filepath.Join(res, id, "manifest-equivalence.json"))
	if err != nil || json.Unmarshal(data, &man) != nil || len(man.Results) != 1 {
		t.Fatalf("manifest: %v\n%s", err, data)
	}
	row := man.Results[0]
	if row.Equivalence == nil || row.Equivalence.Summary.Pass || row.Equivalence.Summary.Regressions != 1 || len(row.Reviewed) != 1 ||
		row.Reviewed[0].Case != "no-component" || row.Reviewed[0].DecidedBy != "review" || row.Reviewed[0].JudgeVerdict != equivalence.VerdictEquivalent {
		t.Fatalf("manifest row %+v", row)
	}
	if stdout, stderr, code := runState(t, dir, "audit", "--batch", id); code != 0 || !strings.Contains(stdout, "reviewed case no-component") {
		t.Fatalf("audit: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

func withCase(c, verdict string) map[string]any {
	a := eqAnswer(verdict)
	a["case"] = c
	return a
}

// TestEquivalenceReviewPageInChromium: the reviewer's page of an equivalence case in
// `tribunal view` and real Chromium shows what the judge was shown for that case (its
// case input and the two transcripts) and the shape to answer in, blind: no AC id, no
// case id, no skill file, and nothing of the judge's call (its judge, its call record,
// its answer). An answer given there is recorded for that case alone, by the viewer.
func TestEquivalenceReviewPageInChromium(t *testing.T) {
	bctx := browsertest.Start(t, 1280, 900)
	dir := projectDir(t)
	batch := filepath.Join(dir, "examples", "quickstart", "eqpage.yaml")
	if err := os.WriteFile(batch, []byte("version: 1\nname: eqpage\nreview: {share: 1}\nacs:\n"+
		"  - {id: AC-12, kind: equivalence, original: skill/original.md, candidate: skill/candidate.md, cases_file: skill/cases.yaml}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The judge finds no-component regressed, in words of its own.
	const judgeWords = "the candidate drops the component name"
	out := t.TempDir()
	if _, stderr, code := runState(t, dir, "run", batch, "-q", "--out", out, "--scripted-answers",
		answersFile(t, map[string]any{"AC-12/no-component": eqAnswer(equivalence.VerdictRegressed)})); code > 1 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	ids, _ := os.ReadDir(out)
	if len(ids) != 1 {
		t.Fatalf("run wrote %d batch folders", len(ids))
	}
	id := ids[0].Name()
	q := queue(t, dir, id)
	var item client.ReviewEntry
	var cases []string
	for _, e := range q {
		cases = append(cases, e.Case)
		if e.Case == "no-component" {
			item = e
		}
	}
	if item.Item == "" || len(q) != 4 {
		t.Fatalf("queue %+v: want the four cases, no-component among them", q)
	}
	leaks := append([]string{"AC-12", "SKILL", "original.md", "candidate.md", "cases.yaml", judgeWords}, cases...)
	base := startView(t, dir)
	// What the judge's calls were, as the viewer's job API tells the team: each judge
	// and call record's digest, none of which the reviewer's page may show.
	resp, err := http.Get(base + "/api/t/default/b/" + id + "/j/AC-12")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var job any
	if err := json.Unmarshal(data, &job); err != nil {
		t.Fatalf("the job API: %v\n%.400s", err, data)
	}
	// Every digest the team's job page knows (the artifacts', the call records') and every
	// judge it names.
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if s, ok := e.(string); ok && (k == "sha256" || k == "judge" || k == "Judge" || k == "SHA256") && s != "" {
					leaks = append(leaks, s)
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(job)
	if !slices.ContainsFunc(leaks, func(s string) bool { return strings.HasPrefix(s, "scripted/") }) {
		t.Fatalf("the job API names no judge: %.600s", data)
	}
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	page := func(js string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, a := range []chromedp.Action[chromedp.Void]{chromedp.Navigate(base + "/t/default/b/" + id + "/review/" + item.Item), chromedp.WaitVisible(chromedp.ID("review-form"))} {
		if err := chromedp.Do(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	text := page(`document.body.innerText`)
	for _, want := range []string{"The case input both runs were given", "made things faster", "The run under the original version", "The run under the candidate version", "equivalence verdict"} {
		if !strings.Contains(text, want) {
			t.Errorf("the reviewer's page lacks %q:\n%s", want, text)
		}
	}
	for _, other := range []string{"fixed a crash in the CSV exporter", "reviewed by the security team", "--time-zone"} {
		if strings.Contains(text, other) {
			t.Errorf("the page of no-component shows another case's input %q", other)
		}
	}
	// Not in the text, nor anywhere in the page's markup (links, attributes, scripts).
	html := page(`document.documentElement.outerHTML`)
	if !strings.Contains(html, "candidate-regressed") {
		t.Errorf("the reviewer's page does not give the answer's shape:\n%s", html)
	}
	for _, leak := range leaks {
		if leak == "" {
			continue
		}
		if strings.Contains(text, leak) || strings.Contains(html, leak) {
			t.Errorf("the reviewer's page shows %q", leak)
		}
	}
	if strings.Contains(strings.ToLower(text), "judge call") || strings.Contains(html, "/call/") || strings.Contains(html, "/j/") {
		t.Errorf("the reviewer's page points at the judge's call:\n%s", text)
	}

	answer, _ := json.Marshal(eqAnswer(equivalence.VerdictEquivalent))
	for _, a := range []chromedp.Action[chromedp.Void]{chromedp.SetValue(chromedp.ID("review-answer"), string(answer)), chromedp.Click(chromedp.ID("review-submit")),
		chromedp.WaitVisible(chromedp.ID("review-sent"))} {
		if err := chromedp.Do(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range queue(t, dir, id) {
		if want := map[bool]int{true: 1, false: 0}[e.Item == item.Item]; len(e.Reviewers) != want {
			t.Errorf("case %s: reviewers %v after the viewer's answer to no-component", e.Case, e.Reviewers)
		}
	}
}
