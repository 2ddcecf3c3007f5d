package console

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/index"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/spillsort"
	"github.com/tribunal-dev/tribunal/pkg/verdicts"
)

func fptr(f float64) *float64 { return &f }
func bptr(b bool) *bool       { return &b }

// sampleEntries is a small mixed batch.
func sampleEntries() []index.Entry {
	return []index.Entry{
		{Index: 0, Row: kind.Row{ACID: "AC-1", Kind: "ab", Status: "compared", Winner: "reference", Confidence: fptr(0.92), Tag: "block", Impact: "high",
			BiggestGap: "Slot A drops the steps", Judge: "openai/m", Consistent: bptr(true), Agreement: "2/3"}, Criterion: "The notes say what to do",
			Calls: []records.Call{{Judge: "openai/m", Label: "AB", Status: events.VoteOK, PromptTokens: 1000, CompletionTokens: 50, LatencyMillis: 1200}}},
		{Index: 1, Row: kind.Row{ACID: "AC-2", Kind: "ab", Status: "compared", Winner: "ours", Confidence: fptr(0.81), Judge: "openai/m", Cached: true, Consistent: bptr(false)},
			Criterion: "The error names the field", Calls: []records.Call{{Judge: "openai/m", Label: "AB", Status: events.VoteOK, Cached: true}}},
		{Index: 2, Row: kind.Row{ACID: "AC-12", Kind: "ab", Status: "blocked", Reason: "unsupported artifact: video"}},
		{Index: 3, Row: kind.Row{ACID: "AC-3", Kind: "critic", Status: "compared", Verdict: "pass", Judge: "scripted/fixed-A"},
			Calls: []records.Call{{Judge: "scripted/fixed-A", Status: events.VoteOK, LatencyMillis: 3}}},
		{Index: 4, Row: kind.Row{ACID: "AC-4", Kind: "ab", Status: "schema_violation", Reason: "confidence = 1.5"}},
		{Index: 5, Row: kind.Row{ACID: "AC-5", Kind: "ab", Status: "compared", Winner: "tie", Confidence: fptr(0.4), Tag: "polish", Judge: "openai/m"}},
	}
}

func ids(rows []*index.Entry) string {
	var out []string
	for _, r := range rows {
		out = append(out, r.ACID)
	}
	return strings.Join(out, ",")
}

func TestTableQuery(t *testing.T) {
	entries := sampleEntries()
	for _, tc := range []struct {
		query string
		want  string
		total int
	}{
		{"", "AC-1,AC-2,AC-12,AC-3,AC-4,AC-5", 6},
		{"status=compared", "AC-1,AC-2,AC-3,AC-5", 4},
		{"kind=critic", "AC-3", 1},
		{"outcome=reference", "AC-1", 1},
		{"outcome=blocked", "AC-12", 1},
		{"outcome=schema+violation", "AC-4", 1},
		{"outcome=pass", "AC-3", 1},
		{"route=block", "AC-1", 1},
		{"route=none&kind=ab&status=compared", "AC-2", 1},
		{"judge=openai/m", "AC-1,AC-2,AC-5", 3},
		{"cached=yes", "AC-2", 1},
		{"cached=no&judge=openai/m", "AC-1,AC-5", 2},
		// The search covers the id, the criterion, the gap and the reason, any case.
		{"q=SLOT+a", "AC-1", 1},
		{"q=field", "AC-2", 1},
		{"q=video", "AC-12", 1},
		{"q=ac-1", "AC-1,AC-12", 2},
		{"sort=ac", "AC-1,AC-2,AC-3,AC-4,AC-5,AC-12", 6},
		{"sort=confidence&dir=desc", "AC-1,AC-2,AC-5,AC-12,AC-3,AC-4", 6},
		{"sort=confidence", "AC-5,AC-2,AC-1,AC-12,AC-3,AC-4", 6},
		{"per=2&page=2", "AC-12,AC-3", 6},
		{"status=compared&per=3&page=2", "AC-5", 4},
		{"per=2&page=9", "", 6},
	} {
		v, _ := url.ParseQuery(tc.query)
		q := parseTableQuery(v)
		page, total := q.apply(entries, nil)
		var hay []string
		for i := range entries {
			hay = append(hay, searchText(&entries[i]))
		}
		if cached, n := q.apply(entries, hay); ids(cached) != ids(page) || n != total {
			t.Errorf("%q: with the search text kept, %s (%d)", tc.query, ids(cached), n)
		}
		if got := ids(page); got != tc.want || total != tc.total {
			t.Errorf("%q: %s (%d matched), want %s (%d)", tc.query, got, total, tc.want, tc.total)
		}
		// A batch too big to keep decoded is paged as it is read: the same page.
		streamed, n, err := q.applyEach(func(fn func(*index.Entry)) error {
			for i := range entries {
				fn(&entries[i])
			}
			return nil
		})
		var ptrs []*index.Entry
		for i := range streamed {
			ptrs = append(ptrs, &streamed[i])
		}
		if err != nil || ids(ptrs) != tc.want || n != tc.total {
			t.Errorf("%q: read as it comes, %s (%d matched), want %s (%d)", tc.query, ids(ptrs), n, tc.want, tc.total)
		}
		// A page past the rows it may keep: found through the spilled order keys.
		spilled, n, err := q.applySpilled(func(fn func(*index.Entry)) error {
			for i := range entries {
				fn(&entries[i])
			}
			return nil
		})
		ptrs = nil
		for i := range spilled {
			ptrs = append(ptrs, &spilled[i])
		}
		if err != nil || ids(ptrs) != tc.want || n != tc.total {
			t.Errorf("%q: spilled, %s (%d matched), want %s (%d)", tc.query, ids(ptrs), n, tc.want, tc.total)
		}
	}
	// A query is a link: parsing its values gives it back.
	v, _ := url.ParseQuery("status=compared&q=gap&sort=route&dir=desc&page=3&per=50")
	q := parseTableQuery(v)
	if back := parseTableQuery(q.values()); back != q {
		t.Fatalf("round trip %+v != %+v", back, q)
	}
	if q2 := parseTableQuery(url.Values{"sort": {"nonsense"}, "per": {"100000"}}); q2.Sort != "index" || q2.Per != maxPerPage {
		t.Fatalf("bounds %+v", q2)
	}
	// The CSV export sorts rows spilled under their order keys (spillsort): the same
	// order as the table's, by every column both ways.
	for _, by := range sortKeys {
		for _, desc := range []bool{false, true} {
			rows := make([]*index.Entry, len(entries))
			for i := range entries {
				rows[i] = &entries[len(entries)-1-i]
			}
			sortRows(rows, by, desc)
			s := spillsort.New(spilledOrder(by, desc))
			for i := range entries {
				s.Add(appendOrderKey(nil, orderKeyOf(by, &entries[len(entries)-1-i])), []byte(entries[len(entries)-1-i].ACID))
			}
			var spilled []string
			if err := s.Each(func(_, v []byte) error { spilled = append(spilled, string(v)); return nil }); err != nil {
				t.Fatal(err)
			}
			s.Close()
			if got := strings.Join(spilled, ","); got != ids(rows) {
				t.Errorf("sort %s desc %v: spilled %s, the table %s", by, desc, got, ids(rows))
			}
		}
	}
}

func TestFacets(t *testing.T) {
	f := buildFacets(sampleEntries())
	want := map[string]string{
		"status":  "blocked:1 compared:4 schema_violation:1",
		"outcome": "blocked:1 ours:1 pass:1 reference:1 schema violation:1 tie:1",
		"route":   "block:1 none:4 polish:1",
		"judge":   "openai/m:3 scripted/fixed-A:1",
		"cached":  "no:5 yes:1",
	}
	got := map[string][]facet{"status": f.Status, "outcome": f.Outcome, "route": f.Route, "judge": f.Judge, "cached": f.Cached}
	for name, w := range want {
		var parts []string
		for _, v := range got[name] {
			parts = append(parts, fmt.Sprintf("%s:%d", v.Value, v.Count))
		}
		if s := strings.Join(parts, " "); s != w {
			t.Errorf("%s facet %q, want %q", name, s, w)
		}
	}
}

func TestCharts(t *testing.T) {
	charts := buildCharts(sampleEntries())
	byID := map[string]chart{}
	for _, c := range charts {
		byID[c.ID] = c
		if c.Width == 0 || c.Height == 0 {
			t.Errorf("%s is not laid out", c.ID)
		}
	}
	bars := func(id string) string {
		var parts []string
		for _, b := range byID[id].Bars {
			parts = append(parts, b.Label+"="+b.Text)
		}
		return strings.Join(parts, " ")
	}
	for id, want := range map[string]string{
		"chart-outcomes":  "ours=1 reference=1 tie=1 pass=1 blocked=1 schema violation=1",
		"chart-swap":      "consistent=1 flipped=1",
		"chart-agreement": "2/3=1",
		"chart-calls":     "openai/m made=1 openai/m cached=1 scripted/fixed-A made=1 scripted/fixed-A cached=0",
		"chart-tokens":    "openai/m prompt=1000 openai/m completion=50",
		"chart-latency":   "openai/m p50=1200 ms openai/m p95=1200 ms scripted/fixed-A p50=3 ms scripted/fixed-A p95=3 ms",
	} {
		if got := bars(id); got != want {
			t.Errorf("%s: %s, want %s", id, got, want)
		}
	}
	// Confidences 0.92, 0.81 and 0.4 fall in the bins of 0.9, 0.8 and 0.4.
	h := byID["chart-confidence"]
	if len(h.Bars) != 10 || h.Bars[9].Value != 1 || h.Bars[8].Value != 1 || h.Bars[4].Value != 1 || h.Layout != "columns" {
		t.Fatalf("histogram %+v", h.Bars)
	}
	// The tallest bar fills the bar area; the others scale to it.
	if o := byID["chart-outcomes"]; o.Bars[0].W != barArea {
		t.Fatalf("bar width %v, want %d", o.Bars[0].W, barArea)
	}
	// Without swaps, panels or calls those charts are left out.
	plain := buildCharts([]index.Entry{{Row: kind.Row{ACID: "x", Status: "blocked"}}})
	if len(plain) != 1 || plain[0].ID != "chart-outcomes" {
		t.Fatalf("charts of a batch with nothing to chart but its outcome: %+v", plain)
	}
}

// TestCompareEntries: the compare page joins two batches by the rule tribunal diff
// applies (package verdicts): a grade that got worse regressed, a better one improved, an
// outcome that moved within its grade is listed too.
func TestCompareEntries(t *testing.T) {
	before := sampleEntries()
	after := sampleEntries()
	after[0].Winner, after[0].Tag, after[0].Confidence = "ours", "", fptr(0.9)                                // AC-1: block -> clean
	after[2].Status, after[2].Reason, after[2].Winner, after[2].Tag = "compared", "", "tie", "polish"         // AC-12: blocked -> polish
	after[5].Tag = "fix"                                                                                      // AC-5: polish -> fix
	after[1].Confidence = fptr(0.95)                                                                          // AC-2: clean, moved
	after = append(after[:3], after[4:]...)                                                                   // AC-3 only before
	after = append(after, index.Entry{Index: 9, Row: kind.Row{ACID: "AC-9", Kind: "ab", Status: "compared"}}) // only after
	c, n, err := compareRows("t", "new", "old", entriesRows(after, true), entriesRows(before, true), 0, 100)
	if err != nil || n != len(c.Changes) {
		t.Fatalf("%d changes, %v", n, err)
	}
	changes := c.Changes
	if c.Counts != (verdicts.Counts{Regressed: 1, Improved: 2, Unchanged: 2, Added: 1, Removed: 1}) || c.Changed != 3 || c.Same != 2 || c.OnlyBatch != 1 || c.OnlyWith != 1 {
		t.Fatalf("counts %+v", c)
	}
	got := []string{}
	for _, ch := range changes {
		got = append(got, ch.ACID+":"+string(ch.What)+":"+string(ch.Before.Grade)+">"+string(ch.After.Grade))
	}
	if s := strings.Join(got, " "); s != "AC-1:improved:block>clean AC-2:unchanged:clean>clean AC-12:improved:blocked>polish AC-5:regressed:polish>fix" {
		t.Fatalf("changes %s", s)
	}
	if changes[0].Before.Href != "/t/t/b/old/j/AC-1" || changes[0].After.Href != "/t/t/b/new/j/AC-1" || *changes[0].After.Score != 0.95 {
		t.Fatalf("links and scores %+v", changes[0])
	}
	if len(c.Transitions) != 3 || c.Transitions[0] != (transition{From: "block", To: "clean", Count: 1}) {
		t.Fatalf("transitions %+v", c.Transitions)
	}
}

func TestSideBySide(t *testing.T) {
	d := sideBySide("# Notes\nExports are faster.\nBye\n", "# Notes\nCSV exports finish in seconds.\nDates follow your time zone.\nBye\n")
	var rows []string
	for _, r := range d.Rows {
		rows = append(rows, fmt.Sprintf("%s %d:%s | %d:%s", r.Op, r.LeftNo, r.Left, r.RightNo, r.Right))
	}
	want := []string{
		"same 1:# Notes | 1:# Notes",
		"change 2:Exports are faster. | 2:CSV exports finish in seconds.",
		"add 0: | 3:Dates follow your time zone.",
		"same 3:Bye | 4:Bye",
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") || d.Removed != 1 || d.Added != 2 || d.Same {
		t.Fatalf("diff\n%s\nremoved %d added %d", strings.Join(rows, "\n"), d.Removed, d.Added)
	}
	if same := sideBySide("a\nb\n", "a\nb\n"); !same.Same || len(same.Rows) != 2 {
		t.Fatalf("identical texts: %+v", same)
	}
	long := strings.Repeat("x\n", maxDiffRows+10)
	if big := sideBySide(long, ""); !big.Truncated || len(big.Rows) != maxDiffRows {
		t.Fatalf("a long diff: %d rows, truncated %v", len(big.Rows), big.Truncated)
	}
}

func TestCSVText(t *testing.T) {
	for in, want := range map[string]string{"=HYPERLINK(1)": "'=HYPERLINK(1)", "+1": "'+1", "-x": "'-x", "@a": "'@a", "plain": "plain", "": ""} {
		if got := csvText(in); got != want {
			t.Errorf("csvText(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAuditPageNamesRefusedInputs: the audit page lists the inputs in the batch's name
// that the rules refused, with the subject they came on, beside a passed verdict.
func TestAuditPageNamesRefusedInputs(t *testing.T) {
	rep := &audit.Report{Mismatches: []audit.Mismatch{}, Refused: []audit.Refused{{Tenant: "team-b", Batch: "b-1", Job: "AC-1",
		EventID: "0123456789abcdef", EventType: events.TypeJobSubmitted, Seq: 7, Subject: "tribunal.team-a.job.submitted", From: "team-a",
		DeadLetter: "aggregator", Reason: events.OriginTenant, Detail: "input refused"}}}
	v := reportView(rep, url.Values{}, "team-b", "b-1")
	var buf bytes.Buffer
	page := view{Page: auditData{Tenant: "team-b", Batch: "b-1", Available: true, Verdict: "passed", Report: v}}
	if err := mustParsePages().t["audit.html"].ExecuteTemplate(&buf, "layout", page); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`id="refused"`, "tribunal.team-a.job.submitted (tenant team-a&#39;s)", "av-passed"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("audit page lacks %q", want)
		}
	}
}

// SetIndexRead has fn told what each read of a chunked index read (its bytes and the
// entries decoded), until the returned func restores the console's.
func SetIndexRead(fn func(bytes int64, entries int)) (restore func()) {
	old := indexRead
	indexRead = fn
	return func() { indexRead = old }
}

// SetKeptRows sets how many rows a view of a batch too big for the cache keeps to find a
// page (maxKeptRows), until the returned func restores it.
func SetKeptRows(n int) (restore func()) {
	old := maxKeptRows
	maxKeptRows = n
	return func() { maxKeptRows = old }
}

// SetRowsLimit sets the rows cache's limit of the consoles made next, until the returned
// func restores it.
func SetRowsLimit(n int) (restore func()) {
	old := rowsLimit
	rowsLimit = n
	return func() { rowsLimit = old }
}

// TestQuantileOfCounts: the latency chart's quantiles, from calls counted by latency, are
// the nearest-rank quantiles of the sorted latencies.
func TestQuantileOfCounts(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 10, 99, 1000} {
		counts := map[int64]int{}
		var sorted []float64
		for range n {
			v := int64(1 + r.IntN(50))
			counts[v]++
			sorted = append(sorted, float64(v))
		}
		slices.Sort(sorted)
		for _, q := range []float64{0, 0.5, 0.95, 1} {
			want := sorted[min(max(int(math.Ceil(q*float64(n)))-1, 0), n-1)]
			if got := quantile(counts, n, q); got != want {
				t.Errorf("%d values, q %v: %v, want %v", n, q, got, want)
			}
		}
	}
}
