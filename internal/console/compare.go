package console

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/index"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// Comparing two batches over the same AC ids (a batch and its rerun, this week's build
// against last week's): which verdicts changed, from what to what.

// side is one AC's verdict in one batch.
type side struct {
	Status     string   `json:"status"`
	Outcome    string   `json:"outcome"`
	Confidence *float64 `json:"confidence,omitempty"`
	Route      string   `json:"route"`
	Judge      string   `json:"judge,omitempty"`
	Href       string   `json:"href"`
}

// change is one AC whose verdict differs between the batches.
type change struct {
	ACID string `json:"ac_id"`
	Kind string `json:"kind"`
	// What changed: "outcome", "status", "route" (in that order of weight).
	What   string `json:"what"`
	Before side   `json:"before"`
	After  side   `json:"after"`
}

// comparison is the compare page.
type comparison struct {
	Tenant string `json:"tenant"`
	// Batch is the page's batch ("after"); With the one it is compared with ("before").
	Batch string `json:"batch"`
	With  string `json:"with"`
	// Same counts the ACs of both batches whose verdicts agree; OnlyBatch and OnlyWith
	// the ACs in one batch only.
	Same      int `json:"same"`
	Changed   int `json:"changed"`
	OnlyBatch int `json:"only_batch"`
	OnlyWith  int `json:"only_with"`
	// Transitions counts the changes by "before → after" outcome.
	Transitions []transition `json:"transitions"`
	// Changes is one page of the changed ACs, in the batch's order.
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
	return side{Status: e.Status, Outcome: outcomeOf(e), Confidence: e.Confidence, Route: routeOf(e), Judge: e.Judge, Href: jobHref(tenant, batch, e.ACID)}
}

// compareEntries joins two batches' entries on their AC ids. Changes come in the after
// batch's order.
func compareEntries(tenant, afterBatch, beforeBatch string, after, before []index.Entry) (changes []change, c comparison) {
	prev := make(map[string]*index.Entry, len(before))
	for i := range before {
		prev[before[i].ACID] = &before[i]
	}
	seen := make(map[string]bool, len(after))
	counts := map[[2]string]int{}
	var order [][2]string
	for i := range after {
		a := &after[i]
		seen[a.ACID] = true
		b, ok := prev[a.ACID]
		if !ok {
			c.OnlyBatch++
			continue
		}
		what := ""
		switch {
		case outcomeOf(a) != outcomeOf(b):
			what = "outcome"
		case a.Status != b.Status:
			what = "status"
		case routeOf(a) != routeOf(b):
			what = "route"
		}
		if what == "" {
			c.Same++
			continue
		}
		changes = append(changes, change{ACID: a.ACID, Kind: a.Kind, What: what, Before: sideOf(tenant, beforeBatch, b), After: sideOf(tenant, afterBatch, a)})
		k := [2]string{outcomeOf(b), outcomeOf(a)}
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
	}
	for i := range before {
		if !seen[before[i].ACID] {
			c.OnlyWith++
		}
	}
	c.Changed = len(changes)
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
	d := comparison{Tenant: tenant, Batch: batch, With: with, BatchHref: batchHref(tenant, batch)}
	others, err := s.otherBatches(ctx, c, tenant, batch)
	if err != nil {
		s.fail(w, r, err)
		return d, false
	}
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
	changes, counts := compareEntries(tenant, batch, with, after.Entries, before.Entries)
	d.Same, d.Changed, d.OnlyBatch, d.OnlyWith, d.Transitions = counts.Same, counts.Changed, counts.OnlyBatch, counts.OnlyWith, counts.Transitions
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
