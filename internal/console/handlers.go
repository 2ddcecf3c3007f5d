package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/index"
	"github.com/tribunal-dev/tribunal/pkg/price"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/verdicts"
)

type indexData struct {
	Batches    []batchRow
	Total      int
	ShowTenant bool
	Tenant     string
	// Costs are the listed batches' costs by team and day, newest first: a team's
	// spending over time.
	Costs []costDay
}

// costDay is what one team's batches created on one day (UTC) cost.
type costDay struct {
	Tenant  string    `json:"tenant"`
	Day     string    `json:"day"`
	Batches int       `json:"batches"`
	Cost    price.Sum `json:"cost"`
}

// costsByDay adds up the completed batches' costs by team and day of creation.
func costsByDay(rows []batchRow) []costDay {
	var out []costDay
	at := map[[2]string]int{}
	for _, b := range rows {
		if b.Cost == nil {
			continue
		}
		k := [2]string{b.Tenant, b.CreatedAt.UTC().Format("2006-01-02")}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, costDay{Tenant: k[0], Day: k[1]})
		}
		out[i].Batches++
		out[i].Cost.Add(*b.Cost)
	}
	return out
}

func (s *server) index(w http.ResponseWriter, r *http.Request, c caller) {
	s.listPage(w, r, c, "")
}

func (s *server) tenantIndex(w http.ResponseWriter, r *http.Request, c caller) {
	tenant := r.PathValue("tenant")
	if events.ValidateTenant(tenant) != nil || !c.sees(tenant) {
		s.notFound(w, r)
		return
	}
	s.listPage(w, r, c, tenant)
}

func (s *server) listPage(w http.ResponseWriter, r *http.Request, c caller, only string) {
	rows, total, err := s.listBatches(r.Context(), c, only)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v := view{Title: "Batches", Page: indexData{Batches: rows, Total: total, ShowTenant: c.all && only == "", Tenant: only, Costs: costsByDay(rows)}}
	if only != "" {
		v.Title = "Batches of " + only
		v.Crumbs = []crumb{{Label: only, Href: "/t/" + only + "/"}}
	} else if !c.all {
		v.Title = "Batches of " + c.tenant
	}
	for _, b := range rows {
		if !b.Complete {
			v.Refresh = s.refresh
			break
		}
	}
	s.render(w, r, http.StatusOK, "index.html", v)
}

// scope reads and checks a page's tenant and batch: malformed, foreign and unknown all
// end in the same 404.
func (s *server) scope(w http.ResponseWriter, r *http.Request, c caller) (tenant, batch string, h *records.Batch, ok bool) {
	tenant, batch = r.PathValue("tenant"), r.PathValue("batch")
	if events.ValidateTenant(tenant) != nil || events.ValidateName(batch) != nil || !c.sees(tenant) {
		s.notFound(w, r)
		return "", "", nil, false
	}
	h, _, err := records.New(s.cfg.Buckets).Header(r.Context(), tenant, batch)
	if err != nil {
		s.fail(w, r, err)
		return "", "", nil, false
	}
	if h == nil {
		s.notFound(w, r)
		return "", "", nil, false
	}
	return tenant, batch, h, true
}

func batchCrumbs(tenant, batch string) []crumb {
	return []crumb{{Label: tenant, Href: "/t/" + tenant + "/"}, {Label: batch, Href: batchHref(tenant, batch)}}
}

type rowView struct {
	index.Entry
	Href string `json:"href"`
	// Outcome and Route are the entry's as the table's filters name them.
	Outcome string `json:"outcome"`
	Route   string `json:"route"`
}

type manifestLink struct {
	Kind string `json:"kind"`
	Href string `json:"href"`
	Size int64  `json:"size"`
}

type batchData struct {
	batchHead
	Completion  *records.Completion `json:"completion,omitempty"`
	ExitMeaning string              `json:"exit_meaning,omitempty"`
	Manifests   []manifestLink      `json:"manifests,omitempty"`
	Awaiting    []rowView           `json:"awaiting,omitempty"`
	AuditHref   string              `json:"audit_href"`
	// The AC table: one page of the rows the query selects.
	Rows    []rowView  `json:"rows"`
	Query   tableQuery `json:"query"`
	Matched int        `json:"matched"`
	Pages   int        `json:"pages"`
	Facets  facets     `json:"facets"`
	Charts  []chart    `json:"charts"`
	// Links of the table's pages, its sort headers, its export and the comparison.
	Nav         pageNav           `json:"-"`
	SortHrefs   map[string]string `json:"-"`
	ClearHref   string            `json:"-"`
	CSVHref     string            `json:"csv_href"`
	CompareHref string            `json:"compare_href"`
	Others      []batchChoice     `json:"-"`
	// Previous is the previous run of the same batch file, which the comparison defaults
	// to; "" when there is none.
	Previous string `json:"previous,omitempty"`
	// FromIndex says the rows came from the batch's stored index.
	FromIndex bool `json:"from_index"`
}

// exitMeaning is the batch exit code as a sentence.
func exitMeaning(code int) string {
	switch code {
	case 0:
		return "clean"
	case 1:
		return "findings"
	case 3:
		return "schema violation"
	case 4:
		return "every AC blocked"
	}
	return "unknown"
}

func (s *server) batch(w http.ResponseWriter, r *http.Request, c caller) {
	d, ok := s.loadBatch(w, r, c)
	if !ok {
		return
	}
	v := view{Title: "Batch " + d.Batch, Crumbs: batchCrumbs(d.Tenant, d.Batch), Page: d}
	if !d.Complete && len(d.Awaiting) == 0 {
		v.Refresh = s.refresh
	}
	s.render(w, r, http.StatusOK, "batch.html", v)
}

// loadBatch reads the batch page's data for the batch the request names (the page and the
// API serve the same); on false the response is written.
func (s *server) loadBatch(w http.ResponseWriter, r *http.Request, c caller) (batchData, bool) {
	tenant, batch, h, ok := s.scope(w, r, c)
	if !ok {
		return batchData{}, false
	}
	d, err := s.batchData(r, c, tenant, batch, h)
	if err != nil {
		s.fail(w, r, err)
		return batchData{}, false
	}
	return d, true
}

// batchData is the batch page: its summary, charts and one page of its AC table.
func (s *server) batchData(r *http.Request, c caller, tenant, batch string, h *records.Batch) (batchData, error) {
	ctx := r.Context()
	base := batchHref(tenant, batch)
	d := batchData{batchHead: headOf(tenant, batch, h),
		Completion: h.Completion, AuditHref: base + "/audit", CompareHref: base + "/compare"}
	rows, err := s.rows(ctx, tenant, batch, h)
	if err != nil {
		return d, err
	}
	d.FromIndex = rows.FromIndex
	if h.Completion != nil {
		d.ExitMeaning = exitMeaning(h.Completion.Summary.ExitCode)
		names := make([]string, 0, len(h.Completion.Manifests))
		for k := range h.Completion.Manifests {
			names = append(names, string(k))
		}
		sort.Strings(names)
		for _, k := range names {
			m := h.Completion.Manifests[events.Kind(k)]
			d.Manifests = append(d.Manifests, manifestLink{Kind: k, Href: blobHref(tenant, m.SHA256), Size: m.Size})
		}
	} else if d.Done, err = records.New(s.cfg.Buckets).Progress(ctx, tenant, batch, h.Size); err != nil {
		return d, err
	}
	sum, err := rows.summary()
	if err != nil {
		return d, err
	}
	if len(d.Judges) == 0 {
		// A running batch, or one completed before completions named their judges.
		d.Judges = sum.judges
	}
	if d.KindMix == "" {
		d.KindMix = kindMix(sum.kinds)
	}
	for i := range sum.awaiting {
		d.Awaiting = append(d.Awaiting, s.rowView(tenant, batch, &sum.awaiting[i]))
	}
	d.Charts, d.Facets = sum.charts, sum.facets
	q := parseTableQuery(r.URL.Query())
	var page []*index.Entry
	matched := rows.len()
	if !q.Filtered() && q.Sort == "index" && !q.Desc {
		// The stored order is the batch's: read the page, not the rest.
		from := (q.Page - 1) * q.Per
		es, err := rows.page(from, from+q.Per)
		if err != nil {
			return d, err
		}
		for i := range es {
			page = append(page, &es[i])
		}
	} else if rows.tooBig(s.cache.limit) {
		// Filtered or sorted, as it is read: the batch's entries would not fit the cache.
		es, n, err := q.applyEach(rows.each)
		if err != nil {
			return d, err
		}
		for i := range es {
			page = append(page, &es[i])
		}
		matched = n
	} else {
		entries, err := rows.all()
		if err != nil {
			return d, err
		}
		var hay []string
		if q.Q != "" {
			if hay, err = rows.haystack(); err != nil {
				return d, err
			}
		}
		page, matched = q.apply(entries, hay)
	}
	d.Query, d.Matched = q, matched
	d.Pages = max((matched+q.Per-1)/q.Per, 1)
	for _, e := range page {
		d.Rows = append(d.Rows, s.rowView(tenant, batch, e))
	}
	d.Nav = navFor(base, q, d.Pages)
	d.SortHrefs = map[string]string{}
	for _, k := range sortKeys {
		k := k
		n := q.with(func(n *tableQuery) { n.Desc = n.Sort == k && !n.Desc; n.Sort = k })
		d.SortHrefs[k] = hrefWith(base, n.values())
	}
	d.ClearHref = base
	exp := q
	exp.Page, exp.Per = 1, defaultPerPage
	d.CSVHref = hrefWith(base+"/export.csv", exp.values())
	others, previous, err := s.otherBatches(ctx, c, tenant, batch, h)
	if err != nil {
		return d, err
	}
	for i := range others {
		others[i].Selected = others[i].Batch == previous
	}
	d.Others, d.Previous = others, previous
	return d, nil
}

func (s *server) rowView(tenant, batch string, e *index.Entry) rowView {
	return rowView{Entry: *e, Href: jobHref(tenant, batch, e.ACID), Outcome: verdicts.OutcomeOf(e.Row), Route: routeOf(e)}
}

// kindMix is "3 ab, 1 critic": the batch's jobs by kind, in registry order.
func kindMix(kinds map[events.Kind]int) string {
	var parts []string
	for _, k := range kindsInOrder(kinds) {
		parts = append(parts, fmt.Sprintf("%d %s", kinds[k], k))
	}
	return strings.Join(parts, ", ")
}

type auditData struct {
	Tenant    string `json:"tenant"`
	Batch     string `json:"batch"`
	Available bool   `json:"available"`
	Error     string `json:"error,omitempty"`
	// Text is a result the console cannot read as a report, as text.
	Text string `json:"text,omitempty"`
	// Verdict is "passed" or "failed" when the result says (an OK() bool method, as
	// *audit.Report has), "" otherwise.
	Verdict string `json:"verdict,omitempty"`
	// Report is the audit as a readable report, when the result is an *audit.Report.
	Report *auditReport `json:"report,omitempty"`
}

func (s *server) audit(w http.ResponseWriter, r *http.Request, c caller) {
	d, code, ok := s.auditPage(w, r, c)
	if !ok {
		return
	}
	v := view{Title: "Audit of " + d.Batch, Crumbs: append(batchCrumbs(d.Tenant, d.Batch), crumb{Label: "audit", Href: batchHref(d.Tenant, d.Batch) + "/audit"}), Page: d}
	s.render(w, r, code, "audit.html", v)
}

// auditPage runs the batch's audit; ok is false when it answered already (a 404).
func (s *server) auditPage(w http.ResponseWriter, r *http.Request, c caller) (auditData, int, bool) {
	tenant, batch, _, ok := s.scope(w, r, c)
	if !ok {
		return auditData{}, 0, false
	}
	d := auditData{Tenant: tenant, Batch: batch, Available: s.cfg.Audit != nil}
	code := http.StatusOK
	if !d.Available {
		return d, code, true
	}
	res, err := s.cfg.Audit(r.Context(), tenant, batch)
	if err != nil {
		s.log.Error("audit", "tenant", tenant, "batch", batch, "err", err)
		d.Error, code = err.Error(), http.StatusBadGateway
		return d, code, true
	}
	if v, ok := res.(interface{ OK() bool }); ok {
		d.Verdict = "failed"
		if v.OK() {
			d.Verdict = "passed"
		}
	}
	if rep, ok := res.(*audit.Report); ok {
		d.Report = reportView(rep, r.URL.Query(), tenant, batch)
	} else {
		d.Text = auditText(res)
	}
	return d, code, true
}

// auditText renders an audit result of unknown shape as text; html/template escapes it.
func auditText(res any) string {
	switch x := res.(type) {
	case nil:
		return "(the audit returned nothing)"
	case string:
		return x
	case []byte:
		return string(x)
	case fmt.Stringer:
		return x.String()
	}
	// The page escapes the text, so the JSON need not (and "<" reads better than \u003c).
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return fmt.Sprintf("%+v", res)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}
