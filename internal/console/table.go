package console

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"iter"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/index"
	"github.com/tribunal-dev/tribunal/pkg/spillsort"
	"github.com/tribunal-dev/tribunal/pkg/verdicts"
)

// The AC table of a batch: filters, a text search, a sort and pages, all in the URL's
// query, so every view of the table is a link (and a form without script sets it).

// Page sizes of the AC table.
const (
	defaultPerPage = 100
	maxPerPage     = 500
)

// tableQuery is one view of a batch's AC table.
type tableQuery struct {
	Status string `json:"status,omitempty"`
	Kind   string `json:"kind,omitempty"`
	// Outcome is the winner of an ab comparison, the verdict of another kind, or
	// "blocked" / "schema violation".
	Outcome string `json:"outcome,omitempty"`
	// Route is a suggestion's tag (block, fix, polish) or "none".
	Route string `json:"route,omitempty"`
	Judge string `json:"judge,omitempty"`
	// Cached is "yes" or "no".
	Cached string `json:"cached,omitempty"`
	// Q searches the AC id, the criterion, the judge's biggest gap, the detail and the
	// reason, case-insensitively.
	Q    string `json:"q,omitempty"`
	Sort string `json:"sort,omitempty"`
	Desc bool   `json:"desc,omitempty"`
	Page int    `json:"page"`
	Per  int    `json:"per"`
}

// sortKeys are the table's sortable columns.
var sortKeys = []string{"index", "ac", "kind", "status", "outcome", "confidence", "route", "judge"}

func parseTableQuery(v url.Values) tableQuery {
	q := tableQuery{Status: v.Get("status"), Kind: v.Get("kind"), Outcome: v.Get("outcome"), Route: v.Get("route"),
		Judge: v.Get("judge"), Cached: v.Get("cached"), Q: strings.TrimSpace(v.Get("q")), Sort: v.Get("sort"), Desc: v.Get("dir") == "desc"}
	known := false
	for _, k := range sortKeys {
		known = known || k == q.Sort
	}
	if !known {
		q.Sort = "index"
	}
	q.Page, _ = strconv.Atoi(v.Get("page"))
	q.Page = max(q.Page, 1)
	q.Per, _ = strconv.Atoi(v.Get("per"))
	if q.Per <= 0 {
		q.Per = defaultPerPage
	}
	q.Per = min(q.Per, maxPerPage)
	return q
}

// values is the query as URL parameters, defaults left out.
func (q tableQuery) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"status": q.Status, "kind": q.Kind, "outcome": q.Outcome, "route": q.Route, "judge": q.Judge, "cached": q.Cached, "q": q.Q} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Sort != "index" {
		v.Set("sort", q.Sort)
	}
	if q.Desc {
		v.Set("dir", "desc")
	}
	if q.Page > 1 {
		v.Set("page", strconv.Itoa(q.Page))
	}
	if q.Per != defaultPerPage {
		v.Set("per", strconv.Itoa(q.Per))
	}
	return v
}

// with returns the query changed by fn, back on its first page unless fn sets one.
func (q tableQuery) with(fn func(*tableQuery)) tableQuery {
	n := q
	n.Page = 1
	fn(&n)
	return n
}

// Filtered reports whether any filter or search is set.
func (q tableQuery) Filtered() bool {
	return q.Status != "" || q.Kind != "" || q.Outcome != "" || q.Route != "" || q.Judge != "" || q.Cached != "" || q.Q != ""
}

// routeOf is a job's route: its suggestion's tag, or "none".
func routeOf(e *index.Entry) string {
	if e.Tag != "" {
		return e.Tag
	}
	return "none"
}

// judgesOf yields the judges of a job (a row names them comma-separated), without
// building a list per row: the facets and filters run over every row of a batch.
func judgesOf(e *index.Entry) iter.Seq[string] {
	return func(yield func(string) bool) {
		if e.Judge == "" {
			return
		}
		for j := range strings.SplitSeq(e.Judge, ",") {
			if !yield(j) {
				return
			}
		}
	}
}

// searchText is what the text search looks in, lower-cased: the AC id, the criterion,
// the judge's biggest gap, the detail and the reason.
func searchText(e *index.Entry) string {
	return strings.ToLower(e.ACID + "\x00" + e.Criterion + "\x00" + e.BiggestGap + "\x00" + e.Detail + "\x00" + e.Reason)
}

// match reports whether e passes the filters; hay is its searchText ("" to compute it).
func (q tableQuery) match(e *index.Entry, needle, hay string) bool {
	if q.Status != "" && e.Status != q.Status || q.Kind != "" && e.Kind != q.Kind || q.Outcome != "" && verdicts.OutcomeOf(e.Row) != q.Outcome ||
		q.Route != "" && routeOf(e) != q.Route {
		return false
	}
	if q.Cached != "" && (q.Cached == "yes") != e.Cached {
		return false
	}
	if q.Judge != "" {
		found := false
		for j := range judgesOf(e) {
			found = found || j == q.Judge
		}
		if !found {
			return false
		}
	}
	if needle != "" {
		if hay == "" {
			hay = searchText(e)
		}
		return strings.Contains(hay, needle)
	}
	return true
}

// apply filters, sorts and pages the entries; it returns the page and how many matched.
// hay, when not nil, holds each entry's searchText.
func (q tableQuery) apply(entries []index.Entry, hay []string) (page []*index.Entry, matched int) {
	needle := strings.ToLower(q.Q)
	var rows []*index.Entry
	if !q.Filtered() && q.Sort == "index" && !q.Desc {
		// The stored order is the batch's: page without touching the rest.
		from := min((q.Page-1)*q.Per, len(entries))
		to := min(from+q.Per, len(entries))
		for i := from; i < to; i++ {
			rows = append(rows, &entries[i])
		}
		return rows, len(entries)
	}
	for i := range entries {
		h := ""
		if needle != "" && hay != nil {
			h = hay[i]
		}
		if q.match(&entries[i], needle, h) {
			rows = append(rows, &entries[i])
		}
	}
	sortRows(rows, q.Sort, q.Desc)
	matched = len(rows)
	from := min((q.Page-1)*q.Per, matched)
	return rows[from:min(from+q.Per, matched)], matched
}

func sortRows(rows []*index.Entry, by string, desc bool) {
	before := rowOrder(by, desc)
	sort.SliceStable(rows, func(i, j int) bool { return before(rows[i], rows[j]) })
}

// rowOrder is the table's order by a column, then by batch order: rows without a
// confidence after every number, whatever the direction.
func rowOrder(by string, desc bool) func(a, b *index.Entry) bool {
	return func(a, b *index.Entry) bool { return orderBefore(by, desc, orderKeyOf(by, a), orderKeyOf(by, b)) }
}

// orderKey is what the table's order compares of a row: the sorted column's text or
// confidence, and the row's position in its batch.
type orderKey struct {
	text   string
	conf   float64
	noConf bool
	index  int
}

func orderKeyOf(by string, e *index.Entry) orderKey {
	k := orderKey{index: e.Index}
	switch by {
	case "ac":
		k.text = e.ACID
	case "kind":
		k.text = e.Kind
	case "status":
		k.text = e.Status
	case "outcome":
		k.text = verdicts.OutcomeOf(e.Row)
	case "route":
		k.text = routeOf(e)
	case "judge":
		k.text = e.Judge
	case "confidence":
		k.noConf = e.Confidence == nil
		if !k.noConf {
			k.conf = *e.Confidence
		}
	}
	return k
}

// orderBefore reports whether a row keyed a comes before one keyed b.
func orderBefore(by string, desc bool, a, b orderKey) bool {
	c := 0
	switch by {
	case "ac":
		c = naturalCompare(a.text, b.text)
	case "kind", "status", "outcome", "route", "judge":
		c = strings.Compare(a.text, b.text)
	case "confidence":
		// Rows without a confidence sort after every number, whatever the direction.
		switch {
		case a.noConf && b.noConf:
		case a.noConf:
			return false
		case b.noConf:
			return true
		case a.conf < b.conf:
			c = -1
		case a.conf > b.conf:
			c = 1
		}
	}
	if c == 0 {
		return a.index < b.index
	}
	if desc {
		return c > 0
	}
	return c < 0
}

// appendOrderKey appends k as bytes parseOrderKey reads back: the key of a row spilled
// to be sorted (spillsort) in the table's order.
func appendOrderKey(dst []byte, k orderKey) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(k.index))
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(k.conf))
	if k.noConf {
		dst = append(dst, 1)
	} else {
		dst = append(dst, 0)
	}
	return append(dst, k.text...)
}

func parseOrderKey(b []byte) orderKey {
	return orderKey{index: int(binary.BigEndian.Uint64(b)), conf: math.Float64frombits(binary.BigEndian.Uint64(b[8:])),
		noConf: b[16] == 1, text: string(b[17:])}
}

// spilledOrder orders keys appendOrderKey wrote as orderBefore orders rows.
func spilledOrder(by string, desc bool) func(a, b []byte) bool {
	return func(a, b []byte) bool { return orderBefore(by, desc, parseOrderKey(a), parseOrderKey(b)) }
}

// maxKeptRows bounds the rows applyEach keeps to find a page (every row up to the page's
// end): about 3 MiB of entries. A page further on is found by spilling the matching
// rows' order keys (applySpilled).
var maxKeptRows = 8 * index.ChunkSize

// applyEach is apply over the entries each hands over in batch order, for a batch too
// big to keep decoded: it keeps the rows up to the page's end in the query's order (a
// heap), not every match, and searches each entry's text as it comes.
func (q tableQuery) applyEach(each func(func(*index.Entry)) error) (page []index.Entry, matched int, err error) {
	needle := strings.ToLower(q.Q)
	keep := q.Page * q.Per
	if keep > maxKeptRows {
		return q.applySpilled(each)
	}
	before := rowOrder(q.Sort, q.Desc)
	h := &worstFirst{before: before}
	err = each(func(e *index.Entry) {
		if !q.match(e, needle, "") {
			return
		}
		matched++
		switch {
		case len(h.es) < keep:
			heap.Push(h, *e)
		case before(e, &h.es[0]):
			h.es[0] = *e
			heap.Fix(h, 0)
		}
	})
	rows := h.es
	sort.Slice(rows, func(i, j int) bool { return before(&rows[i], &rows[j]) })
	from := min((q.Page-1)*q.Per, len(rows))
	return rows[from:], matched, err
}

// applySpilled is applyEach for a page past maxKeptRows (the last of a sorted 1,000,000-AC
// table would keep them all): the matching rows' order keys are sorted through spill
// files (pkg/spillsort), the page's positions in the batch read off them, and the batch
// read again for those entries. It holds the sorter's buffer and a page.
func (q tableQuery) applySpilled(each func(func(*index.Entry)) error) (page []index.Entry, matched int, err error) {
	needle := strings.ToLower(q.Q)
	sorted := spillsort.New(spilledOrder(q.Sort, q.Desc))
	defer sorted.Close()
	var key []byte
	if err := each(func(e *index.Entry) {
		if q.match(e, needle, "") {
			matched++
			key = appendOrderKey(key[:0], orderKeyOf(q.Sort, e))
			sorted.Add(key, nil)
		}
	}); err != nil {
		return nil, 0, err
	}
	// A row is its entry's position in the batch (Index): where each of the page's is on it.
	from, at := (q.Page-1)*q.Per, map[int]int{}
	i := 0
	err = sorted.Each(func(k, _ []byte) error {
		if i >= from+q.Per {
			return errPageFull
		}
		if i >= from {
			at[parseOrderKey(k).index] = i - from
		}
		i++
		return nil
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return nil, 0, err
	}
	if len(at) == 0 {
		return nil, matched, nil
	}
	page = make([]index.Entry, len(at))
	err = each(func(e *index.Entry) {
		if r, ok := at[e.Index]; ok && q.match(e, needle, "") {
			page[r] = *e
		}
	})
	return page, matched, err
}

// worstFirst is a heap of rows whose top is the last in the table's order.
type worstFirst struct {
	es     []index.Entry
	before func(a, b *index.Entry) bool
}

func (h *worstFirst) Len() int           { return len(h.es) }
func (h *worstFirst) Less(i, j int) bool { return h.before(&h.es[j], &h.es[i]) }
func (h *worstFirst) Swap(i, j int)      { h.es[i], h.es[j] = h.es[j], h.es[i] }
func (h *worstFirst) Push(x any)         { h.es = append(h.es, x.(index.Entry)) }
func (h *worstFirst) Pop() any {
	e := h.es[len(h.es)-1]
	h.es = h.es[:len(h.es)-1]
	return e
}

// sortEntries puts entries in batch order.
func sortEntries(entries []index.Entry) {
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Index < entries[j].Index })
}

// naturalCompare orders ids with digit runs by value ("AC-2" before "AC-12").
func naturalCompare(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if isDigit(ca) && isDigit(cb) {
			si, sj := i, j
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			na, nb := strings.TrimLeft(a[si:i], "0"), strings.TrimLeft(b[sj:j], "0")
			if len(na) != len(nb) {
				return cmpInt(len(na), len(nb))
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			continue
		}
		if ca != cb {
			return cmpInt(int(ca), int(cb))
		}
		i++
		j++
	}
	if c := cmpInt(len(a)-i, len(b)-j); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// facets are the values each filter can take in a batch, with how many jobs have each.
type facets struct {
	Status  []facet `json:"status"`
	Kind    []facet `json:"kind"`
	Outcome []facet `json:"outcome"`
	Route   []facet `json:"route"`
	Judge   []facet `json:"judge"`
	Cached  []facet `json:"cached"`
}

type facet struct {
	Value string `json:"value"`
	Count int    `json:"count"`
}

func buildFacets(entries []index.Entry) facets {
	var f facetsFold
	for i := range entries {
		f.add(&entries[i])
	}
	return f.facets()
}

// facetsFold counts the filter choices an entry at a time (see chartsFold).
type facetsFold struct{ counts map[string]map[string]int }

func (f *facetsFold) add(e *index.Entry) { f.fold(e, 1) }

// remove takes back what add(e) counted (chartsFold.remove).
func (f *facetsFold) remove(e *index.Entry) { f.fold(e, -1) }

func (f *facetsFold) fold(e *index.Entry, d int) {
	if f.counts == nil {
		f.counts = map[string]map[string]int{}
	}
	add := func(name, v string) {
		if v == "" {
			return
		}
		if f.counts[name] == nil {
			f.counts[name] = map[string]int{}
		}
		bump(f.counts[name], v, d)
	}
	add("status", e.Status)
	add("kind", e.Kind)
	add("outcome", verdicts.OutcomeOf(e.Row))
	add("route", routeOf(e))
	for j := range judgesOf(e) {
		add("judge", j)
	}
	if e.Cached {
		add("cached", "yes")
	} else {
		add("cached", "no")
	}
}

func (f *facetsFold) facets() facets {
	list := func(name string) []facet {
		var out []facet
		for v, n := range f.counts[name] {
			out = append(out, facet{v, n})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Value < out[j].Value })
		return out
	}
	return facets{Status: list("status"), Kind: list("kind"), Outcome: list("outcome"), Route: list("route"), Judge: list("judge"), Cached: list("cached")}
}
