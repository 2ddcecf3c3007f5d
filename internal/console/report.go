package console

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/stats"
	"github.com/tribunal-dev/tribunal/pkg/trust"
)

// ReportFunc computes the trust report of one batch of a tenant (`tribunal report`):
// how far to trust the batch's judges. The console draws it; it never computes a figure
// itself.
type ReportFunc func(ctx context.Context, tenant, batch string) (*trust.Report, error)

// reportData is the report page: the figures of docs/judging.md as charts (inline SVG,
// drawn here on the server: the console runs no script) and tables.
type reportData struct {
	Tenant, Batch string
	Available     bool
	Error         string
	Report        *trust.Report
	LevelText     string
	Outcomes      forestChart
	Position      forestChart
	Flips         *forestChart
	Judges        []judgeView
	Pairs         *forestChart
	Splits        []splitView
	AlphaText     string
	SpotChecks    *forestChart
	// People is the judges' agreement with the people who reviewed the batch, nil when
	// nobody did; Disagree links each disagreeing AC's page.
	People   *client.ReviewReport
	Disagree map[string]string
}

type judgeView struct {
	trust.JudgeReport
	Patterns    string
	LengthChart *forestChart
}

type splitView struct {
	AC      string
	Answers []string
}

func (s *server) report(w http.ResponseWriter, r *http.Request, c caller) {
	tenant, batch, _, ok := s.scope(w, r, c)
	if !ok {
		return
	}
	d := reportData{Tenant: tenant, Batch: batch, Available: s.cfg.Report != nil}
	v := view{Title: "Judge trust report of " + batch, Crumbs: append(batchCrumbs(tenant, batch), crumb{Label: "trust report", Href: batchHref(tenant, batch) + "/report"})}
	code := http.StatusOK
	if d.Available {
		rep, err := s.cfg.Report(r.Context(), tenant, batch)
		switch {
		case err != nil:
			s.log.Error("trust report", "tenant", tenant, "batch", batch, "err", err)
			d.Error, code = err.Error(), http.StatusBadGateway
		case rep != nil:
			fillReport(&d, rep)
		}
	}
	s.people(r, &d)
	v.Page = d
	s.render(w, r, code, "report.html", v)
}

// fillReport lays a report out as charts: one row per figure with its interval.
func fillReport(d *reportData, rep *trust.Report) {
	d.Report = rep
	d.LevelText = fmt.Sprintf("%g%%", 100*rep.Level)
	o := rep.Outcomes
	d.Outcomes = forest("Outcome rates of the batch", []forestBar{
		prop("ours", o.Ours, false), prop("reference", o.Reference, false), prop("tie", o.Tie, false), prop("blocked", o.Blocked, false),
		{Label: "score", Interval: o.Score, Text: fmt.Sprintf("%.3f [%.3f, %.3f] over %s", o.Score.Point, o.Score.Lo, o.Score.Hi, plural(o.Scored, "AC")), Missing: o.Scored == 0},
	}, nil)
	var pos, flips []forestBar
	everyone := append(slices.Clone(rep.Judges), rep.Overall)
	for i, j := range everyone {
		name := j.Judge
		if i == len(everyone)-1 {
			if len(rep.Judges) < 2 {
				break
			}
			name = "every judge"
		}
		pos = append(pos, prop(name, j.PositionBias.SlotA, j.PositionBias.Biased))
		if j.Flips.Pairs > 0 {
			flips = append(flips, prop(name, j.Flips.Rate, j.Flips.Rate.Lo > flipLimit))
		}
	}
	half := 0.5
	d.Position = forest("Slot A won, of decided answers (an unbiased judge: 50%)", pos, &ref{At: half, Label: "50%"})
	if len(flips) > 0 {
		limit := flipLimit
		c := forest("Swapped pairs that flipped (act above about 10%)", flips, &ref{At: limit, Label: "10%"})
		d.Flips = &c
	}
	for _, j := range rep.Judges {
		jv := judgeView{JudgeReport: j}
		var pats []string
		for _, k := range slices.Sorted(maps.Keys(j.Flips.Patterns)) {
			pats = append(pats, fmt.Sprintf("%s %d", k, j.Flips.Patterns[k]))
		}
		jv.Patterns = strings.Join(pats, ", ")
		var bins []forestBar
		for _, b := range j.Length.Bins {
			if b.LongerWins.N > 0 {
				bins = append(bins, prop(b.Label, b.LongerWins, false))
			}
		}
		if len(bins) > 0 {
			c := forest("Longer text won, by length ratio ("+j.Judge+")", bins, &ref{At: half, Label: "50%"})
			jv.LengthChart = &c
		}
		d.Judges = append(d.Judges, jv)
	}
	if p := rep.Panel; p != nil {
		if p.Alpha != nil {
			d.AlphaText = fmt.Sprintf("%.3f over %s", p.Alpha.Alpha, plural(p.Alpha.Units, "AC"))
		} else {
			d.AlphaText = p.AlphaNote
		}
		var pairs []forestBar
		for _, pr := range p.Pairs {
			pairs = append(pairs, prop(pr.A+" ~ "+pr.B, pr.Proportion, false))
		}
		if len(pairs) > 0 {
			c := forest("Pairwise agreement of the panel's judges", pairs, nil)
			d.Pairs = &c
		}
		for _, sp := range p.Split {
			sv := splitView{AC: sp.AC}
			for _, j := range slices.Sorted(maps.Keys(sp.Answers)) {
				sv.Answers = append(sv.Answers, j+": "+sp.Answers[j])
			}
			d.Splits = append(d.Splits, sv)
		}
	}
	if sc := rep.SpotChecks; sc != nil {
		rows := []forestBar{prop("approved outright", sc.Approved, false)}
		for _, dim := range sc.Dimensions {
			rows = append(rows, prop(dim.Dimension, dim.Proportion, false))
		}
		c := forest("People agreed with the judge in HE-2 spot checks", rows, nil)
		d.SpotChecks = &c
	}
}

// flipLimit is the flip rate docs/judging.md says to act on.
const flipLimit = 0.1

// forestBar is one row of a forestChart: a share with its interval.
type forestBar struct {
	Label    string
	Interval stats.Interval
	Text     string
	// Flag draws the point in the warning colour (a biased judge, a flip rate above the
	// limit); Missing draws no point (nothing was measured).
	Flag, Missing bool
}

func prop(label string, p stats.Proportion, flag bool) forestBar {
	return forestBar{Label: label, Interval: p.Interval, Text: p.String(), Flag: flag, Missing: p.N == 0}
}

// ref is a vertical reference line across a forestChart (50% for position bias).
type ref struct {
	At    float64
	Label string
	X     float64
}

// forestChart is a forest plot on a [0, 1] axis laid out in pixels, for the template's SVG.
type forestChart struct {
	Title              string
	Width, Height      int
	Top, Bottom, AxisY int
	PlotLeft, ValueX   int
	Ticks              []tick
	Rows               []chartRow
	Ref                *ref
	LabelX             int
}

type tick struct {
	X     float64
	Label string
}

type chartRow struct {
	forestBar
	Y, TextY    int
	X, Lo, Hi   float64
	ShortLabel  string
	Description string
}

// Chart geometry, in pixels.
const (
	chartLabelWidth = 240
	chartPlotWidth  = 360
	chartValueWidth = 300
	chartRowHeight  = 24
	chartTop        = 8
	chartAxisHeight = 22
	chartLabelChars = 34
)

// forest lays rows out as a forest plot: each row's point and interval on a shared
// [0, 1] axis, its label on the left and its value on the right.
func forest(title string, rows []forestBar, r *ref) forestChart {
	c := forestChart{Title: title, Width: chartLabelWidth + chartPlotWidth + chartValueWidth, Top: chartTop,
		PlotLeft: chartLabelWidth, ValueX: chartLabelWidth + chartPlotWidth + 10, LabelX: chartLabelWidth - 8}
	x := func(v float64) float64 { return float64(chartLabelWidth) + min(max(v, 0), 1)*chartPlotWidth }
	for i, b := range rows {
		y := chartTop + i*chartRowHeight + chartRowHeight/2
		row := chartRow{forestBar: b, Y: y, TextY: y + 4, X: x(b.Interval.Point), Lo: x(b.Interval.Lo), Hi: x(b.Interval.Hi),
			ShortLabel: shorten(b.Label, chartLabelChars), Description: b.Label + ": " + b.Text}
		c.Rows = append(c.Rows, row)
	}
	c.Bottom = chartTop + len(rows)*chartRowHeight
	c.AxisY = c.Bottom + 14
	c.Height = c.Bottom + chartAxisHeight
	for _, v := range []float64{0, 0.25, 0.5, 0.75, 1} {
		c.Ticks = append(c.Ticks, tick{X: x(v), Label: fmt.Sprintf("%.0f%%", 100*v)})
	}
	if r != nil {
		rr := *r
		rr.X = x(rr.At)
		c.Ref = &rr
	}
	return c
}

// shorten cuts a label to n characters, marking the cut; the full label is the row's
// tooltip.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}
