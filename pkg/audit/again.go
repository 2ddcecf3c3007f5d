package audit

import (
	"cmp"
	"math"
	"slices"
	"sort"
)

// mergeAgain is the report of a replay whose one read (first, of auditor a) got some
// batches' audits wrong and whose second read (second, of auditor b) audited those
// again (again): each batch's findings, counts, notes and derived state come from the
// read that audited it right, and what concerns no batch (undecodable messages that
// name none) from the one read, unless it placed them otherwise than a planned replay
// (againLoose: the second read then delivers them as a planned replay does).
//
// It rests on each batch's audit being its own: the rules' state is per batch but for
// a rubric view's loop, which readAgain keeps within the batches read again, so the
// second read derives for its batches what a planned replay derives, and the one read
// did so for the rest. The lists come out in the order a planned replay makes them:
// mismatches by batch and stream order (as finish sorts them), notes, refusals and
// people's inputs by where the replay made them, each batch's in its own order.
func mergeAgain(a *auditor, first Report, b *auditor, second Report, again map[batchKey]bool, againLoose bool) Report {
	mine := func(bk batchKey) bool { return again[bk] }
	rep := first
	rep.Rejudges, rep.Events, rep.Decisions = 0, a.loose, 0
	if againLoose {
		rep.Events = b.loose
	}
	for bk, t := range a.tallies {
		if !mine(bk) {
			rep.Rejudges, rep.Events, rep.Decisions = rep.Rejudges+t.rejudges, rep.Events+t.events, rep.Decisions+t.decisions
		}
	}
	for bk, t := range b.tallies {
		if mine(bk) {
			rep.Rejudges, rep.Events, rep.Decisions = rep.Rejudges+t.rejudges, rep.Events+t.events, rep.Decisions+t.decisions
		}
	}
	// The one read delivers no history (a view's loop from another batch is a reason to
	// read again), so the second read's is the replay's.
	rep.History = first.History + second.History

	loose := func(m Mismatch) bool { return m.Kind == KindUndecodable && m.Batch == "" }
	rep.Mismatches = []Mismatch{}
	for _, m := range first.Mismatches {
		if loose(m) && !againLoose || !loose(m) && !mine(batchKey{m.Tenant, m.Batch}) {
			rep.Mismatches = append(rep.Mismatches, m)
		}
	}
	for _, m := range second.Mismatches {
		if loose(m) && againLoose || !loose(m) && mine(batchKey{m.Tenant, m.Batch}) {
			rep.Mismatches = append(rep.Mismatches, m)
		}
	}
	sort.SliceStable(rep.Mismatches, func(i, j int) bool {
		x, y := rep.Mismatches[i], rep.Mismatches[j]
		if x.Batch != y.Batch {
			return x.Batch < y.Batch
		}
		return x.Seq < y.Seq
	})

	rep.Unverified = mergeAt(first.Unverified, a.unverifiedAt, second.Unverified, b.unverifiedAt,
		func(u Unverified) bool { return mine(batchKey{u.Tenant, u.Batch}) })
	rep.Refused = mergeAt(first.Refused, a.refusedAt, second.Refused, b.refusedAt,
		func(r Refused) bool { return mine(batchKey{r.Tenant, r.Batch}) })
	rep.People = nil
	for _, in := range first.People {
		if !mine(batchKey{in.Tenant, in.Batch}) {
			rep.People = append(rep.People, in)
		}
	}
	for _, in := range second.People {
		if mine(batchKey{in.Tenant, in.Batch}) {
			rep.People = append(rep.People, in)
		}
	}
	slices.SortStableFunc(rep.People, func(x, y PersonInput) int { return cmp.Compare(x.Seq, y.Seq) })

	rep.Batches, rep.Jobs = nil, 0
	for _, s := range first.Batches {
		if !mine(batchKey{s.Tenant, s.Batch}) {
			rep.Batches = append(rep.Batches, s)
		}
	}
	for _, s := range second.Batches {
		if mine(batchKey{s.Tenant, s.Batch}) {
			rep.Batches = append(rep.Batches, s)
		}
	}
	sort.Slice(rep.Batches, func(i, j int) bool {
		x, y := rep.Batches[i], rep.Batches[j]
		return x.Tenant+"/"+x.Batch < y.Tenant+"/"+y.Batch
	})
	for _, s := range rep.Batches {
		rep.Jobs += s.Jobs
	}

	st := *first.state
	st.audited = map[batchKey]bool{}
	for bk := range first.state.audited {
		if !mine(bk) {
			st.audited[bk] = true
		}
	}
	for bk := range second.state.audited {
		st.audited[bk] = true
	}
	st.again = second.state
	rep.state = &st
	return rep
}

// mergeAt merges two lists made while replaying (xs at positions xat, ys at yat, the
// stream sequences visited): the entries of xs that are not ys's (theirs false), and
// those of ys that are, in the order of where they were made; the first list's first at
// one place.
func mergeAt[T any](xs []T, xat []uint64, ys []T, yat []uint64, theirs func(T) bool) []T {
	type at struct {
		v   T
		pos uint64
	}
	var all []at
	pos := func(ps []uint64, i int) uint64 {
		if i < len(ps) {
			return ps[i]
		}
		return math.MaxUint64 // added after the replay
	}
	for i, x := range xs {
		if !theirs(x) {
			all = append(all, at{x, pos(xat, i)})
		}
	}
	for i, y := range ys {
		if theirs(y) {
			all = append(all, at{y, pos(yat, i)})
		}
	}
	slices.SortStableFunc(all, func(x, y at) int { return cmp.Compare(x.pos, y.pos) })
	if len(all) == 0 {
		return nil
	}
	out := make([]T, len(all))
	for i, e := range all {
		out[i] = e.v
	}
	return out
}
