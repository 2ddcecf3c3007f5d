package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/index"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/spillsort"
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

// sideOf is an entry's side, its Href left to the page.
func sideOf(e *index.Entry) side {
	return side{Grade: verdicts.GradeOf(e.Row), Status: e.Status, Outcome: verdicts.OutcomeOf(e.Row), Confidence: e.Confidence, Score: verdicts.ScoreOf(e.Row),
		Route: routeOf(e), Judge: e.Judge}
}

// acSide is one AC of one batch as a comparison keeps it while it looks for the AC in the
// other batch: its side (Href left to the page), and where it is in its batch.
type acSide struct {
	ACID  string `json:"ac_id"`
	Kind  string `json:"kind"`
	Index int    `json:"index"`
	Side  side   `json:"side"`
}

func acSideOf(e *index.Entry) acSide {
	return acSide{ACID: e.ACID, Kind: e.Kind, Index: e.Index, Side: sideOf(e)}
}

// comparer joins two batches' ACs on their ids and keeps what the compare page shows:
// the counts, the transitions and the changed ACs, these spilled in the after batch's
// order (pkg/spillsort), so it holds a bounded number of ACs whatever the batches' size.
type comparer struct {
	c comparison
	// changes are the changed ACs' JSON keyed by their position in the after batch;
	// unmatched the ACs not found near their position in the other batch, keyed by id.
	changes, unmatched *spillsort.Sorter
	transitions        map[[2]string]*transitionAt
	key                []byte
}

// transitionAt counts one grade change and where it first appears in the after batch.
type transitionAt struct{ count, first int }

func newComparer() *comparer {
	return &comparer{changes: spillsort.New(nil), unmatched: spillsort.New(nil), transitions: map[[2]string]*transitionAt{}}
}

func (m *comparer) close() {
	m.changes.Close()
	m.unmatched.Close()
}

// pair compares an AC found in both batches by the rule verdicts.Compare applies: the
// grade's rank got worse (regressed) or better (improved), or stayed (unchanged, listed
// when its outcome, status or score moved all the same).
func (m *comparer) pair(after, before acSide) error {
	a, b := after.Side, before.Side
	e := verdicts.Entry{Base: &verdicts.Side{Grade: b.Grade, Outcome: b.Outcome, Score: b.Score, Status: b.Status},
		New: &verdicts.Side{Grade: a.Grade, Outcome: a.Outcome, Score: a.Score, Status: a.Status}}
	switch br, nr := b.Grade.Rank(), a.Grade.Rank(); {
	case nr > br:
		e.Change = verdicts.Regressed
		m.c.Counts.Regressed++
	case nr < br:
		e.Change = verdicts.Improved
		m.c.Counts.Improved++
	default:
		e.Change = verdicts.Unchanged
		m.c.Counts.Unchanged++
	}
	if e.Change == verdicts.Unchanged && !e.Moved() {
		return nil
	}
	if e.Change != verdicts.Unchanged {
		k := [2]string{string(b.Grade), string(a.Grade)}
		t := m.transitions[k]
		if t == nil {
			t = &transitionAt{first: after.Index}
			m.transitions[k] = t
		}
		t.count++
		t.first = min(t.first, after.Index)
	}
	val, err := json.Marshal(change{ACID: after.ACID, Kind: after.Kind, What: e.Change, Before: b, After: a})
	if err != nil {
		return fmt.Errorf("compare %s: %w", after.ACID, err)
	}
	m.key = spillsort.IntKey(m.key[:0], after.Index)
	m.changes.Add(m.key, val)
	return nil
}

// Which batch an unmatched AC is of, the first byte of its spilled value.
const (
	inAfter  = 'a'
	inBefore = 'b'
)

// spill keeps an AC whose partner was not near its position, to be joined by id (join).
func (m *comparer) spill(in byte, s acSide) error {
	val, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("compare %s: %w", s.ACID, err)
	}
	m.unmatched.Add([]byte(s.ACID), append([]byte{in}, val...))
	return nil
}

// join pairs the spilled ACs by id: an id in one batch only is added (the after batch's)
// or removed (the before batch's).
func (m *comparer) join() error {
	var afters, befores []acSide
	flush := func() error {
		for i := range max(len(afters), len(befores)) {
			switch {
			case i < len(afters) && i < len(befores):
				if err := m.pair(afters[i], befores[i]); err != nil {
					return err
				}
			case i < len(afters):
				m.c.Counts.Added++
			default:
				m.c.Counts.Removed++
			}
		}
		afters, befores = afters[:0], befores[:0]
		return nil
	}
	last := ""
	err := m.unmatched.Each(func(key, val []byte) error {
		if string(key) != last {
			if err := flush(); err != nil {
				return err
			}
			last = string(key)
		}
		var s acSide
		if err := json.Unmarshal(val[1:], &s); err != nil {
			return fmt.Errorf("compare: a spilled AC: %w", err)
		}
		if val[0] == inAfter {
			afters = append(afters, s)
		} else {
			befores = append(befores, s)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// compareRows joins two batches' ACs on their ids (the rule of verdicts.Compare) and
// returns the comparison's counts, its transitions and the changes at positions from to
// from+per of the changed ACs in the after batch's order, with how many changed.
//
// Both batches are walked a chunk at a time, side by side (batchRows.cursor): a batch and
// its rerun hold the same ACs at about the same positions, so an AC is looked for among
// the other batch's ACs of the same and the next chunk, and only one not found there is
// spilled (pkg/spillsort) to be joined by id at the end. What it holds is two chunks of
// entries, the ACs waiting for a partner (two chunks' worth at most) and the sorters'
// buffers, never a batch's entries.
func compareRows(tenant, afterBatch, beforeBatch string, after, before *batchRows, from, per int) (c comparison, changed int, err error) {
	ac, err := after.cursor()
	if err != nil {
		return c, 0, err
	}
	bc, err := before.cursor()
	if err != nil {
		return c, 0, err
	}
	m := newComparer()
	defer m.close()
	type waiting struct {
		s      acSide
		window int
	}
	waitA, waitB := map[string]waiting{}, map[string]waiting{}
	// meet finds s's partner among those waiting in the other batch, else s waits.
	meet := func(in byte, s acSide, window int, mine, theirs map[string]waiting) error {
		if w, ok := theirs[s.ACID]; ok {
			delete(theirs, s.ACID)
			if in == inAfter {
				return m.pair(s, w.s)
			}
			return m.pair(w.s, s)
		}
		if old, ok := mine[s.ACID]; ok {
			// The same id twice in one batch: the first is joined by id.
			if err := m.spill(in, old.s); err != nil {
				return err
			}
		}
		mine[s.ACID] = waiting{s, window}
		return nil
	}
	// expire spills those that waited since before window.
	expire := func(in byte, wait map[string]waiting, window int) error {
		for id, w := range wait {
			if w.window < window {
				if err := m.spill(in, w.s); err != nil {
					return err
				}
				delete(wait, id)
			}
		}
		return nil
	}
	for window := 0; ; window++ {
		as, err := ac.next()
		if err != nil {
			return c, 0, err
		}
		bs, err := bc.next()
		if err != nil {
			return c, 0, err
		}
		if len(as) == 0 && len(bs) == 0 {
			break
		}
		// The same AC at the same position in both (a rerun's every AC) pairs at once.
		same := func(i int) bool { return i < len(as) && i < len(bs) && as[i].ACID == bs[i].ACID }
		for i := range bs {
			if !same(i) {
				if err := meet(inBefore, acSideOf(&bs[i]), window, waitB, waitA); err != nil {
					return c, 0, err
				}
			}
		}
		for i := range as {
			var err error
			if same(i) {
				err = m.pair(acSideOf(&as[i]), acSideOf(&bs[i]))
			} else {
				err = meet(inAfter, acSideOf(&as[i]), window, waitA, waitB)
			}
			if err != nil {
				return c, 0, err
			}
		}
		if err := expire(inAfter, waitA, window); err != nil {
			return c, 0, err
		}
		if err := expire(inBefore, waitB, window); err != nil {
			return c, 0, err
		}
	}
	if err := expire(inAfter, waitA, math.MaxInt); err != nil {
		return c, 0, err
	}
	if err := expire(inBefore, waitB, math.MaxInt); err != nil {
		return c, 0, err
	}
	if err := m.join(); err != nil {
		return c, 0, err
	}
	c = m.c
	c.Same, c.Changed = c.Counts.Unchanged, c.Counts.Regressed+c.Counts.Improved
	c.OnlyBatch, c.OnlyWith = c.Counts.Added, c.Counts.Removed
	keys := make([][2]string, 0, len(m.transitions))
	for k := range m.transitions {
		keys = append(keys, k)
	}
	// In the order they first appear in the after batch.
	sort.Slice(keys, func(i, j int) bool { return m.transitions[keys[i]].first < m.transitions[keys[j]].first })
	for _, k := range keys {
		c.Transitions = append(c.Transitions, transition{From: k[0], To: k[1], Count: m.transitions[k].count})
	}
	i := 0
	err = m.changes.Each(func(_, val []byte) error {
		if i >= from+per {
			return errPageFull
		}
		if i >= from {
			var ch change
			if err := json.Unmarshal(val, &ch); err != nil {
				return fmt.Errorf("compare: a spilled change: %w", err)
			}
			ch.Before.Href, ch.After.Href = jobHref(tenant, beforeBatch, ch.ACID), jobHref(tenant, afterBatch, ch.ACID)
			c.Changes = append(c.Changes, ch)
		}
		i++
		return nil
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return c, 0, err
	}
	return c, m.changes.Len(), nil
}

// errPageFull stops a walk over the changes once the page is read.
var errPageFull = errors.New("page full")

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
	q := parseTableQuery(r.URL.Query())
	cmp, changed, err := compareRows(tenant, batch, with, after, before, (q.Page-1)*q.Per, q.Per)
	if err != nil {
		s.fail(w, r, err)
		return d, false
	}
	d.Counts, d.Transitions, d.Changes = cmp.Counts, cmp.Transitions, cmp.Changes
	d.Same, d.Changed, d.OnlyBatch, d.OnlyWith = cmp.Same, cmp.Changed, cmp.OnlyBatch, cmp.OnlyWith
	d.Page, d.Pages = q.Page, max((changed+q.Per-1)/q.Per, 1)
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
