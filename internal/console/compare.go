package console

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/index"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/verdicts"
)

// Comparing two batches over the same AC ids (a batch and its rerun, this week's build
// against last week's): which ACs regressed, improved or stayed, by the rule `tribunal
// diff` applies (package verdicts: an AC's grade, clean to schema violation, getting
// worse), with each one's outcome and score before and after.

// side is one AC's verdict in one batch.
type side struct {
	Grade      verdicts.Grade `json:"grade"`
	Status     string         `json:"status"`
	Outcome    string         `json:"outcome"`
	Confidence *float64       `json:"confidence,omitempty"`
	Score      *float64       `json:"score,omitempty"`
	Route      string         `json:"route"`
	Judge      string         `json:"judge,omitempty"`
	Href       string         `json:"href"`
}

// change is one AC whose grade, or whose outcome or score within its grade, differs
// between the batches.
type change struct {
	ACID string `json:"ac_id"`
	Kind string `json:"kind"`
	// What is the change: regressed, improved, or unchanged (the grade stayed while the
	// outcome or score moved).
	What   verdicts.Change `json:"what"`
	Before side            `json:"before"`
	After  side            `json:"after"`
}

// comparison is the compare page.
type comparison struct {
	Tenant string `json:"tenant"`
	// Batch is the page's batch ("after"); With the one it is compared with ("before"):
	// the one asked for, else the previous run of the same batch file (Default).
	Batch   string `json:"batch"`
	With    string `json:"with"`
	Default bool   `json:"default,omitempty"`
	// Counts are the ACs by change (regressed, improved, unchanged, only in the batch:
	// added, only in the other: removed).
	Counts verdicts.Counts `json:"counts"`
	// Same counts the ACs of both batches whose grades agree, Changed those whose grade
	// moved; OnlyBatch and OnlyWith the ACs in one batch only.
	Same      int `json:"same"`
	Changed   int `json:"changed"`
	OnlyBatch int `json:"only_batch"`
	OnlyWith  int `json:"only_with"`
	// Transitions counts the grade changes by "before → after".
	Transitions []transition `json:"transitions"`
	// Changes is one page of the changed ACs (regressions, improvements, and outcomes
	// that moved within their grade), in the batch's order.
	Changes []change `json:"changes"`
	Page    int      `json:"page"`
	Pages   int      `json:"pages"`

	Nav       pageNav       `json:"-"`
	Others    []batchChoice `json:"-"`
	BatchHref string        `json:"-"`
	WithHref  string        `json:"-"`
}

type transition struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Count int    `json:"count"`
}

func sideOf(tenant, batch string, e *index.Entry) side {
	return side{Grade: verdicts.GradeOf(e.Row), Status: e.Status, Outcome: verdicts.OutcomeOf(e.Row), Confidence: e.Confidence, Score: verdicts.ScoreOf(e.Row),
		Route: routeOf(e), Judge: e.Judge, Href: jobHref(tenant, batch, e.ACID)}
}

// compareEntries joins two batches' entries on their AC ids (verdicts.Compare). Changes
// come in the after batch's order.
func compareEntries(tenant, afterBatch, beforeBatch string, after, before []index.Entry) (changes []change, c comparison) {
	rows := func(es []index.Entry) []kind.Row {
		out := make([]kind.Row, len(es))
		for i := range es {
			out[i] = es[i].Row
		}
		return out
	}
	cmp := verdicts.Compare(rows(before), rows(after))
	c.Counts = cmp.Counts
	c.Same, c.Changed = cmp.Counts.Unchanged, cmp.Counts.Regressed+cmp.Counts.Improved
	c.OnlyBatch, c.OnlyWith = cmp.Counts.Added, cmp.Counts.Removed
	byID := func(es []index.Entry) map[string]*index.Entry {
		m := make(map[string]*index.Entry, len(es))
		for i := range es {
			m[es[i].ACID] = &es[i]
		}
		return m
	}
	a, b := byID(after), byID(before)
	counts := map[[2]string]int{}
	var order [][2]string
	for _, e := range cmp.Entries {
		if e.Base == nil || e.New == nil || e.Change == verdicts.Unchanged && !e.Moved() {
			continue
		}
		changes = append(changes, change{ACID: e.ACID, Kind: e.Kind, What: e.Change,
			Before: sideOf(tenant, beforeBatch, b[e.ACID]), After: sideOf(tenant, afterBatch, a[e.ACID])})
		if e.Change == verdicts.Unchanged {
			continue
		}
		k := [2]string{string(e.Base.Grade), string(e.New.Grade)}
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
	}
	for _, k := range order {
		c.Transitions = append(c.Transitions, transition{From: k[0], To: k[1], Count: counts[k]})
	}
	return changes, c
}

// compareData builds the compare page; ok is false when it answered already (a 404).
func (s *server) compareData(w http.ResponseWriter, r *http.Request, c caller) (comparison, bool) {
	tenant, batch, h, ok := s.scope(w, r, c)
	if !ok {
		return comparison{}, false
	}
	ctx := r.Context()
	with := r.URL.Query().Get("with")
	d := comparison{Tenant: tenant, Batch: batch, BatchHref: batchHref(tenant, batch)}
	others, previous, err := s.otherBatches(ctx, c, tenant, batch, h)
	if err != nil {
		s.fail(w, r, err)
		return d, false
	}
	if with == "" && previous != "" {
		// The question a rerun asks: what changed since the last run of this batch file.
		with, d.Default = previous, true
	}
	d.With = with
	for i := range others {
		others[i].Selected = others[i].Batch == with
	}
	d.Others = others
	if with == "" {
		return d, true
	}
	var wh *records.Batch
	if events.ValidateName(with) == nil {
		if wh, _, err = records.New(s.cfg.Buckets).Header(ctx, tenant, with); err != nil {
			s.fail(w, r, err)
			return d, false
		}
	}
	if wh == nil {
		s.notFound(w, r)
		return d, false
	}
	d.WithHref = batchHref(tenant, with)
	after, err := s.rows(ctx, tenant, batch, h)
	if err != nil {
		s.fail(w, r, err)
		return d, false
	}
	before, err := s.rows(ctx, tenant, with, wh)
	if err != nil {
		s.fail(w, r, err)
		return d, false
	}
	afterEntries, err := after.all()
	if err != nil {
		s.fail(w, r, err)
		return d, false
	}
	beforeEntries, err := before.all()
	if err != nil {
		s.fail(w, r, err)
		return d, false
	}
	changes, counts := compareEntries(tenant, batch, with, afterEntries, beforeEntries)
	d.Counts, d.Transitions = counts.Counts, counts.Transitions
	d.Same, d.Changed, d.OnlyBatch, d.OnlyWith = counts.Same, counts.Changed, counts.OnlyBatch, counts.OnlyWith
	q := parseTableQuery(r.URL.Query())
	d.Page, d.Pages = q.Page, max((len(changes)+q.Per-1)/q.Per, 1)
	from := min((q.Page-1)*q.Per, len(changes))
	d.Changes = changes[from:min(from+q.Per, len(changes))]
	base := batchHref(tenant, batch) + "/compare"
	at := func(p int) string {
		v := url.Values{"with": {with}}
		if p > 1 {
			v.Set("page", strconv.Itoa(p))
		}
		if q.Per != defaultPerPage {
			v.Set("per", strconv.Itoa(q.Per))
		}
		return hrefWith(base, v)
	}
	d.Nav = pageNav{Page: d.Page, Pages: d.Pages}
	if d.Page > 1 {
		d.Nav.First, d.Nav.Prev = at(1), at(min(d.Page-1, d.Pages))
	}
	if d.Page < d.Pages {
		d.Nav.Next, d.Nav.Last = at(d.Page+1), at(d.Pages)
	}
	return d, true
}

func (s *server) compare(w http.ResponseWriter, r *http.Request, c caller) {
	d, ok := s.compareData(w, r, c)
	if !ok {
		return
	}
	v := view{Title: "Compare " + d.Batch, Crumbs: append(batchCrumbs(d.Tenant, d.Batch), crumb{Label: "compare", Href: batchHref(d.Tenant, d.Batch) + "/compare"}), Page: d}
	s.render(w, r, http.StatusOK, "compare.html", v)
}

func (s *server) apiCompare(w http.ResponseWriter, r *http.Request, c caller) {
	if d, ok := s.compareData(w, r, c); ok {
		s.writeJSON(w, d)
	}
}
