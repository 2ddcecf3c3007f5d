package review

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("AC-%d", i+1)
	}
	return out
}

// TestSampleRederived: a 10 % sample of a 200-AC batch is 20 ACs, the same ones on a
// rerun and in any order of the ids, another with another seed or batch.
func TestSampleRederived(t *testing.T) {
	p := Policy{Share: 0.10, Seed: "s1"}
	all := ids(200)
	first := p.Sample("b1", all)
	if len(first) != 20 {
		t.Fatalf("sampled %d of 200 at 10 %%, want 20", len(first))
	}
	shuffled := append([]string(nil), all...)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	again := p.Sample("b1", shuffled)
	for id := range first {
		if !again[id] {
			t.Fatalf("%s sampled once, not on the rerun", id)
		}
	}
	other := Policy{Share: 0.10, Seed: "s2"}.Sample("b1", all)
	overlap := 0
	for id := range other {
		if first[id] {
			overlap++
		}
	}
	if overlap == 20 {
		t.Fatal("another seed drew the same sample")
	}
	if n := len((Policy{Count: 7, Seed: "s1"}).Sample("b1", all)); n != 7 {
		t.Fatalf("count 7 sampled %d", n)
	}
}

// TestQueueReasons: the queue holds the sampled, flagged and unsure judged ACs with
// every reason, in batch order, and an unsure source (trials) adds its words.
func TestQueueReasons(t *testing.T) {
	p := Policy{Count: 1, Seed: "x", Unsure: true}
	all := ids(5)
	sampled := ""
	for id := range p.Sample("b", all) {
		sampled = id
	}
	var cands []Candidate
	for _, id := range all {
		cands = append(cands, Candidate{ID: id, Judged: true})
	}
	cands[1].Flagged = true
	cands[2].Unsure = []string{"swap flip"}
	AddUnsure(cands, func(ac string) []string {
		if ac == "AC-4" {
			return []string{"trials disagree 2/3"}
		}
		return nil
	})
	q := p.Queue("b", cands)
	got := map[string][]string{}
	for _, e := range q {
		got[e.ID] = e.Reasons
	}
	if fmt.Sprint(got["AC-2"]) != "[flagged]" && sampled != "AC-2" {
		t.Fatalf("AC-2 reasons %v", got["AC-2"])
	}
	if r := got["AC-3"]; len(r) == 0 || r[len(r)-1] != "unsure: swap flip" {
		t.Fatalf("AC-3 reasons %v", r)
	}
	if r := got["AC-4"]; len(r) == 0 || r[len(r)-1] != "unsure: trials disagree 2/3" {
		t.Fatalf("AC-4 reasons %v", r)
	}
	if got[sampled] == nil || got[sampled][0] != ReasonSample {
		t.Fatalf("sampled %s reasons %v", sampled, got[sampled])
	}
	cands[2].Judged = false
	for _, e := range p.Queue("b", cands) {
		if e.ID == "AC-3" {
			t.Fatal("an AC without a verdict is in the queue")
		}
	}
}

// TestAgreementNinetyOfHundred: reviewers who agree with the judge on 90 of 100 ab ACs
// give a share of 0.90 with its interval, kappa as computed independently here from the
// confusion table, the 10 disagreements listed and the judge's lean counted.
func TestAgreementNinetyOfHundred(t *testing.T) {
	labels := []Verdict{{Label: "ours", Lenience: 2, Slot: "A"}, {Label: "tie", Lenience: 1}, {Label: "reference", Lenience: 0, Slot: "B"}}
	var pairs []Pair
	for i := range 100 {
		j := labels[i%3]
		p := j
		if i%10 == 0 {
			p = labels[(i+1)%3] // the person disagrees
		}
		pairs = append(pairs, Pair{AC: fmt.Sprintf("AC-%d", i), Kind: "ab", Model: "m", By: "ann", Judge: j, Person: p})
	}
	got, err := Agree(pairs, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("agree: %v, %v", got, err)
	}
	a := got[0]
	if a.Share.K != 90 || a.Share.N != 100 || a.Share.Point != 0.9 || !(a.Share.Lo < 0.9 && a.Share.Hi > 0.9) {
		t.Fatalf("share %v, want 90/100 inside an interval", a.Share)
	}
	if len(a.Disagreements) != 10 {
		t.Fatalf("%d disagreements listed, want 10", len(a.Disagreements))
	}
	// Independent kappa: a 3x3 confusion table, po from its diagonal, pe from its margins.
	idx := map[string]int{"ours": 0, "tie": 1, "reference": 2}
	var m [3][3]float64
	for _, p := range pairs {
		m[idx[p.Judge.Label]][idx[p.Person.Label]]++
	}
	var po, pe float64
	for i := range 3 {
		po += m[i][i] / 100
		var row, col float64
		for j := range 3 {
			row += m[i][j]
			col += m[j][i]
		}
		pe += row / 100 * col / 100
	}
	want := (po - pe) / (1 - pe)
	if !a.Kappa.Defined || math.Abs(a.Kappa.Point-want) > 1e-12 || !(a.Kappa.Lo < want && a.Kappa.Hi > want) {
		t.Fatalf("kappa %+v, want %v inside its interval", a.Kappa, want)
	}
	if a.Lenient+a.Strict != 10 {
		t.Fatalf("lean %d lenient + %d strict, want 10", a.Lenient, a.Strict)
	}
}

// TestAgreementScores: per dimension exact share, weighted kappa and mean absolute
// difference in the kind's units, and which way the judge scores.
func TestAgreementScores(t *testing.T) {
	sc := Scale{Lo: 0, Hi: 2, Unit: 0.5}
	var pairs []Pair
	for i := range 10 {
		j := map[string]int{"layout": i % 3}
		p := map[string]int{"layout": i % 3}
		if i == 4 {
			p["layout"] = 0 // judge 1 (0.5), person 0
		}
		pairs = append(pairs, Pair{AC: fmt.Sprint(i), Kind: "rubric", Model: "m", Judge: Verdict{Label: "pass", Scores: j}, Person: Verdict{Label: "pass", Scores: p}, Scale: sc})
	}
	got, err := Agree(pairs, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := got[0].Scores
	if len(s) != 1 || s[0].Exact.K != 9 || s[0].Higher != 1 || math.Abs(s[0].MeanAbsDiff.Point-0.05) > 1e-12 || !s[0].Kappa.Defined {
		t.Fatalf("scores %+v", s)
	}
}

// TestQueuePerCase: an AC reviewed per case has a candidate per case sharing its id; the
// sample draws the AC once (the sample of the other ACs is as if it were one candidate)
// and queues every judged case of it, each case with its own doubts.
func TestQueuePerCase(t *testing.T) {
	p := Policy{Count: 2, Seed: "s", Unsure: true}
	all := ids(6)
	whole := p.Sample("b", all)
	var cands []Candidate
	for _, id := range all {
		if id == "AC-3" {
			cands = append(cands, Candidate{ID: id, Case: "c1", Judged: true}, Candidate{ID: id, Case: "c2", Judged: true, Unsure: []string{"trials split"}})
			continue
		}
		cands = append(cands, Candidate{ID: id, Judged: true})
	}
	got := map[string][]string{}
	for _, e := range p.Queue("b", cands) {
		got[e.ID+"/"+e.Case] = e.Reasons
	}
	for id := range whole {
		if id == "AC-3" {
			if got["AC-3/c1"] == nil || got["AC-3/c2"] == nil {
				t.Fatalf("sampled AC-3 queued %v", got)
			}
			continue
		}
		if got[id+"/"] == nil {
			t.Fatalf("%s sampled as one candidate but not queued per case: %v", id, got)
		}
	}
	if r := got["AC-3/c2"]; len(r) == 0 || r[len(r)-1] != "unsure: trials split" {
		t.Fatalf("AC-3 case c2 reasons %v", r)
	}
	if r := got["AC-3/c1"]; !whole["AC-3"] && r != nil {
		t.Fatalf("AC-3 case c1 queued for %v though neither sampled nor unsure", r)
	}
}
