package console

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/index"
	"github.com/tribunal-dev/tribunal/pkg/verdicts"
)

// A batch's charts, drawn on the server as inline SVG (no script, no image requests):
// the outcome split, the confidence histogram, swap consistency and panel agreement
// where the batch has them, and the judges' calls, tokens and latency.

// chart is one chart: bars with their labels and values, and where the template draws
// them.
type chart struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Note  string `json:"note,omitempty"`
	// Layout is "rows" (horizontal bars) or "columns" (a histogram).
	Layout string `json:"layout"`
	Bars   []bar  `json:"bars"`

	Width  int `json:"-"`
	Height int `json:"-"`
}

// bar is one value of a chart.
type bar struct {
	Label string  `json:"label"`
	Value float64 `json:"value"`
	// Text is the value as shown.
	Text string `json:"text"`
	// Class colours the bar (console.css).
	Class string `json:"-"`

	X, Y, W, H     float64 `json:"-"`
	LabelX, LabelY float64 `json:"-"`
	TextX, TextY   float64 `json:"-"`
}

// Chart geometry, in SVG user units.
const (
	chartWidth  = 560
	labelWidth  = 190
	barArea     = 300
	rowHeight   = 22
	barHeight   = 14
	colHeight   = 150
	colPadding  = 24
	colLabelGap = 16
)

// layout places a chart's bars.
func (c *chart) layout() {
	peak := 0.0
	for _, b := range c.Bars {
		peak = math.Max(peak, b.Value)
	}
	scale := func(v float64, length float64) float64 {
		if peak <= 0 {
			return 0
		}
		return math.Round(v/peak*length*10) / 10
	}
	c.Width = chartWidth
	if c.Layout == "columns" {
		n := max(len(c.Bars), 1)
		slot := float64(chartWidth-2*colPadding) / float64(n)
		c.Height = colHeight + 2*colLabelGap + 8
		for i := range c.Bars {
			b := &c.Bars[i]
			b.W = math.Floor(slot * 0.8)
			b.H = scale(b.Value, colHeight)
			b.X = math.Round(float64(colPadding)+float64(i)*slot+slot*0.1) + 0
			b.Y = float64(colLabelGap) + colHeight - b.H
			b.LabelX, b.LabelY = b.X+b.W/2, float64(colLabelGap)+colHeight+colLabelGap
			b.TextX, b.TextY = b.X+b.W/2, b.Y-4
		}
		return
	}
	c.Height = len(c.Bars)*rowHeight + 6
	for i := range c.Bars {
		b := &c.Bars[i]
		b.X, b.Y = labelWidth, float64(i*rowHeight+4)
		b.W, b.H = scale(b.Value, barArea), barHeight
		b.LabelX, b.LabelY = labelWidth-8, b.Y+barHeight-3
		b.TextX, b.TextY = b.X+b.W+6, b.Y+barHeight-3
	}
}

// outcomeOrder puts the ab winners first, then other verdicts, then the outcomes that
// are not verdicts.
var outcomeOrder = map[string]int{"ours": 0, "reference": 1, "tie": 2, "blocked": 90, "schema violation": 91, "pending": 92}

func outcomeClass(o string) string {
	switch o {
	case "ours", "pass", "equivalent", "signed_off":
		return "c-ours"
	case "reference", "reject", "fail", "needs_fixes":
		return "c-reference"
	case "tie", "revise":
		return "c-tie"
	case "blocked":
		return "c-blocked"
	case "schema violation":
		return "c-violation"
	}
	return "c-bar"
}

func count(n int) string { return strconv.Itoa(n) }

// buildCharts draws a batch's charts from its entries.
func buildCharts(entries []index.Entry) []chart {
	var a chartsFold
	for i := range entries {
		a.add(&entries[i])
	}
	return a.charts()
}

// chartsFold gathers a batch's charts an entry at a time, so a stored index is read a
// chunk at a time (index.Reader.Each), not held: counts, and each call's latency.
type chartsFold struct {
	n                        int
	outcomes                 map[string]int
	bins                     [10]int
	confident                int
	consistent, inconsistent int
	agreement                map[string]int
	judges                   map[string]*judgeFigures
}

// judgeFigures are one judge's calls made and answered from the cache, tokens, latency.
type judgeFigures struct {
	made, cached     int
	prompt, complete int
	// latencies counts the calls by latency in milliseconds: as many keys as distinct
	// latencies (a few thousand), where a list of them grew with every call of the batch.
	latencies map[int64]int
	timed     int
}

func (a *chartsFold) add(e *index.Entry) { a.fold(e, 1) }

// remove takes back what add(e) counted: a running batch's job changed (live.go).
func (a *chartsFold) remove(e *index.Entry) { a.fold(e, -1) }

// fold counts e d times (1 or -1). A count back at zero is dropped, as if never added:
// the charts of a batch folded a change at a time equal those of its entries folded once.
func (a *chartsFold) fold(e *index.Entry, d int) {
	if a.outcomes == nil {
		a.outcomes, a.agreement, a.judges = map[string]int{}, map[string]int{}, map[string]*judgeFigures{}
	}
	a.n += d
	bump(a.outcomes, verdicts.OutcomeOf(e.Row), d)
	if c := e.Confidence; c != nil {
		a.bins[min(int(*c*10), 9)] += d
		a.confident += d
	}
	if e.Consistent != nil {
		if *e.Consistent {
			a.consistent += d
		} else {
			a.inconsistent += d
		}
	}
	if _, size, ok := strings.Cut(e.Agreement, "/"); ok && size != "1" {
		bump(a.agreement, e.Agreement, d)
	}
	for _, c := range e.Calls {
		f := a.judges[c.Judge]
		if f == nil {
			f = &judgeFigures{}
			a.judges[c.Judge] = f
		}
		if c.Cached {
			f.cached += d
		} else {
			f.made += d
			f.prompt += d * c.PromptTokens
			f.complete += d * c.CompletionTokens
			if c.LatencyMillis > 0 {
				if f.latencies == nil {
					f.latencies = map[int64]int{}
				}
				bump(f.latencies, c.LatencyMillis, d)
				f.timed += d
			}
		}
		if f.made == 0 && f.cached == 0 {
			delete(a.judges, c.Judge)
		}
	}
}

// bump adds d to m[k], dropping the key at zero.
func bump[K comparable](m map[K]int, k K, d int) {
	if m[k] += d; m[k] == 0 {
		delete(m, k)
	}
}

// charts draws the charts of the entries added.
func (a *chartsFold) charts() []chart {
	var out []chart
	add := func(c chart) {
		if len(c.Bars) == 0 {
			return
		}
		c.layout()
		out = append(out, c)
	}

	// The outcome split.
	outcomes := a.outcomes
	names := make([]string, 0, len(outcomes))
	for o := range outcomes {
		names = append(names, o)
	}
	sort.Slice(names, func(i, j int) bool {
		oi, iok := outcomeOrder[names[i]]
		oj, jok := outcomeOrder[names[j]]
		if !iok {
			oi = 50
		}
		if !jok {
			oj = 50
		}
		if oi != oj {
			return oi < oj
		}
		return names[i] < names[j]
	})
	split := chart{ID: "chart-outcomes", Title: "Outcomes", Layout: "rows", Note: fmt.Sprintf("%d jobs: the winner of each comparison, the verdict of the other kinds, and the jobs without one", a.n)}
	for _, o := range names {
		split.Bars = append(split.Bars, bar{Label: o, Value: float64(outcomes[o]), Text: count(outcomes[o]), Class: outcomeClass(o)})
	}
	add(split)

	// Confidence of the comparisons.
	if a.confident > 0 {
		h := chart{ID: "chart-confidence", Title: "Confidence", Layout: "columns", Note: fmt.Sprintf("%d compared ab jobs, by the judge's confidence in the winner", a.confident)}
		for i, n := range a.bins {
			h.Bars = append(h.Bars, bar{Label: fmt.Sprintf("%.1f", float64(i)/10), Value: float64(n), Text: count(n), Class: "c-bar"})
		}
		add(h)
	}

	// Swap consistency and panel agreement, where the batch asked for them.
	if a.consistent+a.inconsistent > 0 {
		add(chart{ID: "chart-swap", Title: "Swap consistency", Layout: "rows",
			Note: "position-swapped pairs: did the judge pick the same artifact in both orders?",
			Bars: []bar{{Label: "consistent", Value: float64(a.consistent), Text: count(a.consistent), Class: "c-ours"},
				{Label: "flipped", Value: float64(a.inconsistent), Text: count(a.inconsistent), Class: "c-reference"}}})
	}
	if len(a.agreement) > 0 {
		p := chart{ID: "chart-agreement", Title: "Panel agreement", Layout: "rows", Note: "votes for the panel's winner, of the panel's size"}
		keys := make([]string, 0, len(a.agreement))
		for k := range a.agreement {
			keys = append(keys, k)
		}
		sort.Sort(sort.Reverse(sort.StringSlice(keys)))
		for _, k := range keys {
			p.Bars = append(p.Bars, bar{Label: k, Value: float64(a.agreement[k]), Text: count(a.agreement[k]), Class: "c-bar"})
		}
		add(p)
	}

	// The judges: calls made and answered from the cache, tokens, latency.
	judges := a.judges
	jn := make([]string, 0, len(judges))
	for j := range judges {
		jn = append(jn, j)
	}
	sort.Strings(jn)
	calls := chart{ID: "chart-calls", Title: "Judge calls", Layout: "rows", Note: "calls made, and answered from the judge-call cache (no cost)"}
	tokens := chart{ID: "chart-tokens", Title: "Tokens per judge", Layout: "rows", Note: "prompt and completion tokens of the calls made, as the provider reported them"}
	latency := chart{ID: "chart-latency", Title: "Latency per judge", Layout: "rows", Note: "median and 95th percentile of the calls made, repair re-asks included"}
	for _, j := range jn {
		f := judges[j]
		calls.Bars = append(calls.Bars, bar{Label: j + " made", Value: float64(f.made), Text: count(f.made), Class: "c-bar"},
			bar{Label: j + " cached", Value: float64(f.cached), Text: count(f.cached), Class: "c-tie"})
		if f.prompt+f.complete > 0 {
			tokens.Bars = append(tokens.Bars, bar{Label: j + " prompt", Value: float64(f.prompt), Text: count(f.prompt), Class: "c-bar"},
				bar{Label: j + " completion", Value: float64(f.complete), Text: count(f.complete), Class: "c-tie"})
		}
		if f.timed > 0 {
			p50, p95 := quantile(f.latencies, f.timed, 0.5), quantile(f.latencies, f.timed, 0.95)
			latency.Bars = append(latency.Bars, bar{Label: j + " p50", Value: p50, Text: fmt.Sprintf("%.0f ms", p50), Class: "c-bar"},
				bar{Label: j + " p95", Value: p95, Text: fmt.Sprintf("%.0f ms", p95), Class: "c-tie"})
		}
	}
	add(calls)
	add(tokens)
	add(latency)
	return out
}

// quantile of n values counted by value, nearest rank.
func quantile(counts map[int64]int, n int, q float64) float64 {
	if n == 0 {
		return 0
	}
	values := make([]int64, 0, len(counts))
	for v := range counts {
		values = append(values, v)
	}
	slices.Sort(values)
	rank := min(max(int(math.Ceil(q*float64(n)))-1, 0), n-1)
	for _, v := range values {
		if rank -= counts[v]; rank < 0 {
			return float64(v)
		}
	}
	return float64(values[len(values)-1])
}
