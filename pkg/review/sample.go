// Package review is the arithmetic of people in the loop: which ACs of a batch go to a
// person (a seeded sample, the unsure ones, the flagged ones) and how far the judge
// agrees with the people who reviewed it. It reads no clock, does no I/O and draws no
// randomness but from the seed it is given, so the queue and the agreement a report
// prints are re-derived from the same records by anyone.
//
// It knows nothing of kinds: each kind says what its verdict means to a reviewer
// (kind.Reviewing), and this package works on the labels and scores it gets.
package review

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Reasons an AC is in a batch's review queue. An AC may have several.
const (
	// ReasonSample: drawn by the batch's seeded sample.
	ReasonSample = "sample"
	// ReasonFlagged: the team flagged the AC for review (review: true on the AC).
	ReasonFlagged = "flagged"
	// ReasonUnsure prefixes the judge's own doubt ("unsure: confidence 0.42",
	// "unsure: swap flip"), as the kind reports it (kind.Reviewing.Unsure).
	ReasonUnsure = "unsure"
)

// Policy is a batch's review setting: what goes to people and whether their answer
// decides. The zero Policy sends nothing but flagged and unsure ACs.
type Policy struct {
	// Share samples this share of the batch's ACs (0.1: one in ten), Count this many;
	// at most one of them is set.
	Share float64
	Count int
	// Seed names the sample: the same seed, batch and AC ids give the same sample.
	Seed string
	// Unsure sends every AC the judge was unsure of (the kind's signals).
	Unsure bool
}

// Validate checks a policy's fields.
func (p Policy) Validate() error {
	switch {
	case p.Share < 0 || p.Share > 1 || math.IsNaN(p.Share):
		return fmt.Errorf("review share %v: want a number in [0, 1]", p.Share)
	case p.Count < 0:
		return fmt.Errorf("review count %d: want 0 or more", p.Count)
	case p.Share > 0 && p.Count > 0:
		return fmt.Errorf("review share %v and count %d: give one of them", p.Share, p.Count)
	}
	return nil
}

// Key is an AC's place in its batch's sample: the first 8 bytes of SHA-256 over the
// seed, the batch id and the AC id, NUL-separated. A sample takes the ACs with the
// smallest keys, so it is re-derived from the three names alone, in any order, on any
// machine, and an AC's key does not move when another AC joins the batch.
func Key(seed, batch, ac string) uint64 {
	h := sha256.Sum256([]byte(seed + "\x00" + batch + "\x00" + ac))
	return binary.BigEndian.Uint64(h[:8])
}

// SampleSize is how many of n ACs the policy samples: Count (at most n), or Share of n
// rounded to the nearest whole AC (halves up), and at least one AC when Share is above 0.
func (p Policy) SampleSize(n int) int {
	switch {
	case p.Count > 0:
		return min(p.Count, n)
	case p.Share > 0:
		return max(1, min(n, int(math.Floor(p.Share*float64(n)+0.5))))
	}
	return 0
}

// Sample is the policy's sample of a batch's AC ids: the SampleSize(len(ids)) ids with
// the smallest Key, as a set. Ties (which SHA-256 makes theoretical) go by id.
func (p Policy) Sample(batch string, ids []string) map[string]bool {
	k := p.SampleSize(len(ids))
	out := map[string]bool{}
	if k == 0 {
		return out
	}
	type keyed struct {
		id  string
		key uint64
	}
	all := make([]keyed, 0, len(ids))
	for _, id := range ids {
		all = append(all, keyed{id, Key(p.Seed, batch, id)})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].key != all[j].key {
			return all[i].key < all[j].key
		}
		return all[i].id < all[j].id
	})
	for _, a := range all[:k] {
		out[a.id] = true
	}
	return out
}

// Candidate is one AC of a batch as the queue weighs it, or one case of an AC for a kind
// reviewed per case (equivalence): then the AC has a candidate per case, sharing its ID,
// and is drawn once by the sample, which queues every judged case of it.
type Candidate struct {
	ID string
	// Case is the case of the AC the candidate is, "" for a kind reviewed whole.
	Case string
	// Flagged: the team asked for a person.
	Flagged bool
	// Unsure are the judge's doubts about its verdict, as the kind words them
	// ("confidence 0.42 below 0.60", "swap flip"); empty when it was sure or not judged.
	Unsure []string
	// Judged: the AC has a verdict a person can review (not blocked, not pending).
	Judged bool
}

// Entry is one AC in the queue and why it is there.
type Entry struct {
	ID      string   `json:"ac_id"`
	Case    string   `json:"case,omitempty"`
	Reasons []string `json:"reasons"`
}

// Queue is the batch's review queue: every judged candidate the sample drew, the team
// flagged or (with Policy.Unsure) the judge was unsure of, in the candidates' order,
// each with every reason it is there. The sample is drawn over all candidates, judged or
// not, so it is the same sample whatever became of the ACs.
//
// Sources beside the judge's own doubts (a trial disagreement, an escalation: issue 26)
// reach the queue as more Unsure words on the candidate; see UnsureSources.
func (p Policy) Queue(batch string, cands []Candidate) []Entry {
	var ids []string
	seen := map[string]bool{}
	for _, c := range cands {
		if !seen[c.ID] {
			seen[c.ID] = true
			ids = append(ids, c.ID)
		}
	}
	sample := p.Sample(batch, ids)
	var out []Entry
	for _, c := range cands {
		if !c.Judged {
			continue
		}
		var why []string
		if sample[c.ID] {
			why = append(why, ReasonSample)
		}
		if c.Flagged {
			why = append(why, ReasonFlagged)
		}
		if p.Unsure {
			for _, u := range c.Unsure {
				why = append(why, ReasonUnsure+": "+u)
			}
		}
		if len(why) > 0 {
			out = append(out, Entry{ID: c.ID, Case: c.Case, Reasons: why})
		}
	}
	return out
}

// UnsureSource adds doubts about a judged AC from beyond its kind's verdict, by AC id:
// the hook where trial disagreement and escalation (issue 26) join the queue. It
// returns the words to add ("trials disagree 2/3", "escalated").
type UnsureSource func(ac string) []string

// AddUnsure appends to each candidate the doubts the sources report, in source order,
// without repeating a word the candidate has.
func AddUnsure(cands []Candidate, sources ...UnsureSource) {
	for i := range cands {
		for _, s := range sources {
			for _, u := range s(cands[i].ID) {
				if u = strings.TrimSpace(u); u != "" && !slices.Contains(cands[i].Unsure, u) {
					cands[i].Unsure = append(cands[i].Unsure, u)
				}
			}
		}
	}
}
