package trust

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/stats"
)

// ac builds the id of the i-th AC of a synthetic batch.
func ac(i int) string { return fmt.Sprintf("AC-%03d", i) }

// call is a judgment with the role winner derived from the slot the judge picked and
// where ours sat in the slots the call saw.
func call(judge, id, order, raw string, oursInA bool) Judgment {
	j := Judgment{AC: id, Judge: judge, Order: order, Status: StatusOK, RawWinner: raw, Confidence: 0.8}
	switch raw {
	case SlotA:
		j.Winner = map[bool]Winner{true: WinnerOurs, false: WinnerReference}[oursInA]
	case SlotB:
		j.Winner = map[bool]Winner{true: WinnerReference, false: WinnerOurs}[oursInA]
	default:
		j.Winner = WinnerTie
	}
	return j
}

// pickFor returns the slot holding the winner given where ours is.
func pickFor(winner Winner, oursInA bool) string {
	switch {
	case winner == WinnerTie:
		return SlotTie
	case (winner == WinnerOurs) == oursInA:
		return SlotA
	}
	return SlotB
}

// biasedFake answers like a content-blind model that picks slot A with probability pA.
type biasedFake struct {
	rng *rand.Rand
	pA  float64
}

func (f biasedFake) pick() string {
	if f.rng.Float64() < f.pA {
		return SlotA
	}
	return SlotB
}

func TestJudgeOutcomes(t *testing.T) {
	t.Parallel()
	js := []Judgment{
		call("m", "AC-2", OrderShown, SlotA, true),                                                // ours
		call("m", "AC-1", OrderShown, SlotA, true), call("m", "AC-1", OrderSwapped, SlotB, false), // consistent: ours
		call("m", "AC-3", OrderShown, SlotA, true), call("m", "AC-3", OrderSwapped, SlotA, false), // flipped: tie
		call("m", "AC-4", OrderShown, SlotB, true), {AC: "AC-4", Judge: "m", Order: OrderSwapped, Status: "unavailable"}, // blocked
		{AC: "AC-5", Judge: "m", Status: "schema_violation", RawWinner: "C"}, // blocked
		call("n", "AC-1", OrderShown, SlotTie, true),
	}
	got := JudgeOutcomes(js)
	want := []Group[Outcome]{
		{Judge: "m", Items: []Outcome{{AC: "AC-1", Winner: WinnerOurs}, {AC: "AC-2", Winner: WinnerOurs}, {AC: "AC-3", Winner: WinnerTie}, {AC: "AC-4", Blocked: true}, {AC: "AC-5", Blocked: true}}},
		{Judge: "n", Items: []Outcome{{AC: "AC-1", Winner: WinnerTie}}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("JudgeOutcomes =\n%v\nwant\n%v", got, want)
	}
}

func TestRates(t *testing.T) {
	t.Parallel()
	var outs []Outcome
	// By hand: 10 ACs, 5 ours, 2 reference, 2 tie, 1 blocked; score (5 + 1) / 9 = 2/3.
	for i, w := range []Winner{WinnerOurs, WinnerOurs, WinnerOurs, WinnerOurs, WinnerOurs, WinnerReference, WinnerReference, WinnerTie, WinnerTie, ""} {
		outs = append(outs, Outcome{AC: ac(i), Winner: w, Blocked: w == ""})
	}
	boot := stats.BootstrapOptions{Resamples: 500, Seed: 9}
	r, err := Rates(outs, stats.Z95, boot)
	if err != nil {
		t.Fatal(err)
	}
	if r.ACs != 10 || r.Ours != stats.Wilson95(5, 10) || r.Reference != stats.Wilson95(2, 10) ||
		r.Tie != stats.Wilson95(2, 10) || r.Blocked != stats.Wilson95(1, 10) || r.Scored != 9 {
		t.Errorf("rates %+v", r)
	}
	if math.Abs(r.Score.Point-2.0/3) > 1e-12 || !(r.Score.Lo < r.Score.Point && r.Score.Point < r.Score.Hi) {
		t.Errorf("score %+v", r.Score)
	}
	again, _ := Rates(outs, stats.Z95, boot)
	if again != r {
		t.Error("score interval not reproducible for a seed")
	}
	if _, err := Rates([]Outcome{{AC: "AC-1", Winner: "A"}}, stats.Z95, boot); err == nil || !strings.Contains(err.Error(), "AC-1") {
		t.Errorf("a slot letter as winner: %v", err)
	}
	if r, err := Rates(nil, stats.Z95, boot); err != nil || r.Scored != 0 || r.Score != (stats.Interval{}) {
		t.Errorf("no outcomes: %+v %v", r, err)
	}
}

func TestPositionBias(t *testing.T) {
	t.Parallel()
	// By hand: 70 slot-A picks, 30 slot-B, 5 ties, 2 failures: 70/100 = [0.604, 0.781].
	var js []Judgment
	for i := range 107 {
		raw := SlotA
		switch {
		case i >= 105:
			js = append(js, Judgment{AC: ac(i), Judge: "m", Status: "unavailable"})
			continue
		case i >= 100:
			raw = SlotTie
		case i >= 70:
			raw = SlotB
		}
		js = append(js, call("m", ac(i), OrderShown, raw, i%2 == 0))
	}
	b := PositionBiasOf(js, stats.Z95)
	if b.Calls != 107 || b.Ties != 5 || b.Unanswered != 2 || b.SlotA != stats.Wilson95(70, 100) || !b.Biased {
		t.Errorf("bias %+v", b)
	}

	// A content-blind model that picks slot A on 7 of every 10 calls, whichever slot ours
	// is in, over a shuffled batch: by hand 140/200, interval [0.633, 0.760] excludes 0.5
	// and holds 0.7.
	js = js[:0]
	for i := range 200 {
		raw := SlotB
		if i%10 < 7 {
			raw = SlotA
		}
		js = append(js, call("fake/slot-a-70", ac(i), OrderShown, raw, i%2 == 0))
	}
	b = PositionBiasOf(js, stats.Z95)
	if !b.Biased || b.SlotA != stats.Wilson95(140, 200) || b.SlotA.Excludes(0.7) {
		t.Errorf("biased fake: %+v", b)
	}

	// A judge that follows content on the same shuffled batch: ours (better for i%5 < 3)
	// sits in slot A for even i, so by hand slot A wins 5 of every 10 ACs: 100/200.
	js = js[:0]
	for i := range 200 {
		w := WinnerReference
		if i%5 < 3 {
			w = WinnerOurs
		}
		js = append(js, call("fair", ac(i), OrderShown, pickFor(w, i%2 == 0), i%2 == 0))
	}
	b = PositionBiasOf(js, stats.Z95)
	if b.Biased || b.SlotA.K != 100 || b.SlotA.N != 200 {
		t.Errorf("content judge: %+v", b)
	}
	if b := PositionBiasOf(nil, stats.Z95); b.Biased || b.SlotA.N != 0 {
		t.Errorf("no calls: %+v", b)
	}
}

func TestFlips(t *testing.T) {
	t.Parallel()
	// Each row: the first call's raw answer, the swapped call's raw answer, the pattern in
	// the first call's letters, whether it is a flip.
	rows := []struct {
		first, second, pattern string
		flip                   bool
	}{
		{SlotA, SlotB, "A->A", false},
		{SlotB, SlotA, "B->B", false},
		{SlotTie, SlotTie, "tie->tie", false},
		{SlotA, SlotA, "A->B", true}, // picked the first-shown slot both times
		{SlotB, SlotB, "B->A", true}, // picked the second-shown slot both times
		{SlotA, SlotTie, "A->tie", true},
		{SlotTie, SlotA, "tie->B", true},
	}
	var js []Judgment
	for i, r := range rows {
		js = append(js, call("m", ac(i), OrderShown, r.first, true), call("m", ac(i), OrderSwapped, r.second, false))
	}
	// A swapped AC with a failed second call and an AC judged once are not pairs.
	js = append(js, call("m", "AC-x", OrderShown, SlotA, true), Judgment{AC: "AC-x", Judge: "m", Order: OrderSwapped, Status: "unavailable"},
		call("m", "AC-y", OrderShown, SlotA, true))
	f := FlipsOf(js, stats.Z95)
	if f.Pairs != 7 || f.Unpaired != 1 || f.Rate != stats.Wilson95(4, 7) {
		t.Errorf("flips %+v", f)
	}
	wantPatterns := map[string]int{}
	var wantFlipped []string
	for i, r := range rows {
		wantPatterns[r.pattern]++
		if r.flip {
			wantFlipped = append(wantFlipped, ac(i))
		}
	}
	if !maps.Equal(f.Patterns, wantPatterns) || !slices.Equal(f.Flipped, wantFlipped) {
		t.Errorf("patterns %v flipped %v; want %v %v", f.Patterns, f.Flipped, wantPatterns, wantFlipped)
	}
	// The role winners agree with the pattern: a consistent pair un-shuffles to one role.
	for _, g := range JudgeOutcomes(js[:6]) {
		for _, o := range g.Items {
			if o.Winner == WinnerTie && o.AC != ac(2) {
				t.Errorf("consistent pair %s came out %s", o.AC, o.Winner)
			}
		}
	}

	// A content-blind fake picking slot A 70% of the time, in both orders: consistent only
	// when it picks A then B or B then A, 0.7·0.3 + 0.3·0.7 = 0.42, so it flips 58% of the
	// time, 49% of all pairs as "A->B".
	fake := biasedFake{rand.New(rand.NewPCG(3, 4)), 0.7}
	js = js[:0]
	for i := range 400 {
		js = append(js, call("fake", ac(i), OrderShown, fake.pick(), i%2 == 0), call("fake", ac(i), OrderSwapped, fake.pick(), i%2 != 0))
	}
	f = FlipsOf(js, stats.Z95)
	if f.Pairs != 400 || f.Rate.Excludes(0.58) || math.Abs(float64(f.Patterns["A->B"])/400-0.49) > 0.06 {
		t.Errorf("fake flips %v, patterns %v", f.Rate, f.Patterns)
	}

	// With two judges the flipped list names the judge.
	js = []Judgment{call("m", "AC-1", OrderShown, SlotA, true), call("m", "AC-1", OrderSwapped, SlotA, false),
		call("n", "AC-1", OrderShown, SlotA, true), call("n", "AC-1", OrderSwapped, SlotB, false)}
	if f := FlipsOf(js, stats.Z95); !slices.Equal(f.Flipped, []string{"m: AC-1"}) || f.Pairs != 2 {
		t.Errorf("two judges: %+v", f)
	}
}

// lengthCall is a decided judgment on a pair with the given lengths.
func lengthCall(i int, winner Winner, lenOurs, lenRef int) Judgment {
	j := call("m", ac(i), OrderShown, pickFor(winner, true), true)
	j.LenOurs, j.LenRef = lenOurs, lenRef
	return j
}

func TestLength(t *testing.T) {
	t.Parallel()
	// counts builds n judgments where ours is longer (or the reference is) by ratio and the
	// longer side wins k of them.
	counts := func(start, k, n int, oursLonger bool, ratio float64) []Judgment {
		var js []Judgment
		short, long := 100, int(100*ratio)
		for i := range n {
			lo, lr := long, short
			if !oursLonger {
				lo, lr = short, long
			}
			w := WinnerOurs
			if (i < k) != oursLonger {
				w = WinnerReference
			}
			js = append(js, lengthCall(start+i, w, lo, lr))
		}
		return js
	}
	tests := []struct {
		name    string
		js      []Judgment
		verdict string
		longer  [2]int // K, N of the longer side's wins
	}{
		// The longer side wins 16/20 when ours is longer and 15/20 when the reference is:
		// 31/40 = 0.775, interval [0.625, 0.877] excludes 0.5, both strata above half.
		{"length bias", append(counts(0, 16, 20, true, 1.6), counts(100, 15, 20, false, 2.5)...), LengthFlagged, [2]int{31, 40}},
		// Ours is better whatever its length: it wins 18/20 when longer and 18/20 when
		// shorter, so the longer side wins 18 + 2 = 20/40: content, not length.
		{"content explains", append(counts(0, 18, 20, true, 1.6), counts(100, 2, 20, false, 1.6)...), LengthOK, [2]int{20, 40}},
		// Ours always longer: 19/20 for the longer side, but nothing separates length from
		// ours being better.
		{"confounded", counts(0, 19, 20, true, 3), LengthConfounded, [2]int{19, 20}},
		// A high rate on too few answers: 4/5 has an interval reaching below 0.5.
		{"too few to flag", append(counts(0, 2, 2, true, 1.6), counts(100, 2, 3, false, 1.6)...), LengthOK, [2]int{4, 5}},
		// Within 10% there is no longer side to speak of.
		{"no data", counts(0, 10, 10, true, 1.05), LengthNoData, [2]int{0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := LengthOf(tc.js, stats.Z95, LengthOptions{})
			if l.Verdict != tc.verdict || l.Longer.K != tc.longer[0] || l.Longer.N != tc.longer[1] {
				t.Errorf("verdict %s (%s), longer %v; want %s, %v", l.Verdict, l.Reason, l.Longer, tc.verdict, tc.longer)
			}
			if l.Reason == "" {
				t.Error("no reason")
			}
		})
	}
	// Bins by ratio; ties, images and equal lengths are left out of the rates.
	js := []Judgment{
		lengthCall(0, WinnerOurs, 105, 100),      // 1.05: within 10%, longer wins
		lengthCall(1, WinnerOurs, 100, 120),      // 1.2: longer (reference) loses
		lengthCall(2, WinnerReference, 100, 180), // 1.8: longer wins
		lengthCall(3, WinnerOurs, 300, 100),      // 3: longer wins
		lengthCall(4, WinnerTie, 300, 100),       // tie in the 2x bin
		lengthCall(5, WinnerOurs, 0, 100),        // no length: left out
		lengthCall(6, WinnerOurs, 100, 100),      // equal: left out
	}
	l := LengthOf(js, stats.Z95, LengthOptions{})
	wantBins := []struct{ k, n, ties int }{{1, 1, 0}, {0, 1, 0}, {1, 1, 0}, {1, 1, 1}}
	for i, w := range wantBins {
		b := l.Bins[i]
		if b.LongerWins.K != w.k || b.LongerWins.N != w.n || b.Ties != w.ties {
			t.Errorf("bin %s: %v ties %d; want %+v", b.Label, b.LongerWins, b.Ties, w)
		}
	}
	if l.Longer.K != 2 || l.Longer.N != 3 || l.OursLonger.N != 1 || l.RefLonger.N != 2 {
		t.Errorf("longer %v ours %v ref %v", l.Longer, l.OursLonger, l.RefLonger)
	}
	if LengthOf(js, stats.Z95, LengthOptions{MinRatio: 1.5}).Longer.N != 2 {
		t.Error("MinRatio not applied")
	}
}

func TestPanel(t *testing.T) {
	t.Parallel()
	// Two judges who agree on everything and a third that answers at random, over 60 ACs
	// with a mix of true outcomes. The third one lowers alpha below the two alone, and
	// every AC it disagrees on is listed as split.
	rng := rand.New(rand.NewPCG(5, 6))
	answers := []Winner{WinnerOurs, WinnerReference, WinnerTie}
	var js, consistent []Judgment
	truth := map[string]Winner{}
	for i := range 60 {
		id := ac(i)
		w := answers[i%3]
		truth[id] = w
		for _, judge := range []string{"a/one", "b/two"} {
			j := call(judge, id, OrderShown, pickFor(w, i%2 == 0), i%2 == 0)
			js = append(js, j)
			consistent = append(consistent, j)
		}
		js = append(js, call("c/random", id, OrderShown, pickFor(answers[rng.IntN(3)], i%2 == 0), i%2 == 0))
	}
	two, err := Panel(consistent, stats.Z95)
	if err != nil {
		t.Fatal(err)
	}
	three, err := Panel(js, stats.Z95)
	if err != nil {
		t.Fatal(err)
	}
	if two.Alpha == nil || two.Alpha.Alpha != 1 || len(two.Split) != 0 {
		t.Fatalf("two consistent judges: %+v", two)
	}
	if three.Alpha == nil || three.Alpha.Alpha >= two.Alpha.Alpha-0.2 {
		t.Fatalf("alpha with a random judge %+v, not well below %v", three.Alpha, two.Alpha.Alpha)
	}
	if !slices.Equal(three.Judges, []string{"a/one", "b/two", "c/random"}) || len(three.Pairs) != 3 {
		t.Fatalf("judges %v pairs %v", three.Judges, three.Pairs)
	}
	if p := three.Pairs[0]; p.A != "a/one" || p.B != "b/two" || p.K != 60 || p.N != 60 {
		t.Errorf("consistent pair %+v", p)
	}
	var wantSplit []string
	for _, j := range js {
		if j.Judge == "c/random" && j.Winner != truth[j.AC] {
			wantSplit = append(wantSplit, j.AC)
		}
	}
	var gotSplit []string
	for _, s := range three.Split {
		gotSplit = append(gotSplit, s.AC)
		if s.Answers["a/one"] != string(truth[s.AC]) || s.Answers["c/random"] == string(truth[s.AC]) {
			t.Errorf("split %+v", s)
		}
	}
	if len(wantSplit) == 0 || !slices.Equal(gotSplit, wantSplit) {
		t.Errorf("split %v, want %v", gotSplit, wantSplit)
	}
	if three.Pairs[1].K+len(wantSplit) != 60 {
		t.Errorf("a/one vs c/random agreement %v with %d splits", three.Pairs[1].Proportion, len(wantSplit))
	}

	// By hand (the two-judge row of the stats tests, testdata/reference.py): alpha
	// 0.6935483870967742; a blocked call is missing, not a disagreement.
	a := []Winner{WinnerOurs, WinnerOurs, WinnerReference, WinnerTie, WinnerOurs, WinnerReference, WinnerReference, WinnerOurs, WinnerTie, WinnerOurs}
	b := []Winner{WinnerOurs, WinnerReference, WinnerReference, WinnerTie, WinnerOurs, WinnerReference, WinnerOurs, WinnerOurs, WinnerTie, WinnerOurs}
	js = js[:0]
	for i := range a {
		js = append(js, call("a", ac(i), OrderShown, pickFor(a[i], true), true), call("b", ac(i), OrderShown, pickFor(b[i], true), true))
	}
	js = append(js, call("a", "AC-z", OrderShown, SlotA, true), Judgment{AC: "AC-z", Judge: "b", Status: "unavailable"})
	p, err := Panel(js, stats.Z95)
	if err != nil || math.Abs(p.Alpha.Alpha-0.6935483870967742) > 1e-12 || p.Pairs[0].K != 8 || p.Pairs[0].N != 10 || len(p.Split) != 2 {
		t.Errorf("hand panel: %+v %v", p, err)
	}

	// Undefined alpha says why.
	js = []Judgment{call("a", "AC-1", OrderShown, SlotTie, true), call("b", "AC-1", OrderShown, SlotTie, true)}
	if p, err := Panel(js, stats.Z95); err != nil || p.Alpha != nil || !strings.Contains(p.AlphaNote, "same answer") {
		t.Errorf("no variation: %+v %v", p, err)
	}
	js = []Judgment{call("a", "AC-1", OrderShown, SlotA, true), call("b", "AC-2", OrderShown, SlotA, true)}
	if p, err := Panel(js, stats.Z95); err != nil || p.Alpha != nil || !strings.Contains(p.AlphaNote, "no AC") {
		t.Errorf("no pairs: %+v %v", p, err)
	}
}

func TestSpotCheckAgreement(t *testing.T) {
	t.Parallel()
	checks := []SpotCheck{
		{AC: "f--a", Judge: "m", Approved: true},
		{AC: "f--b", Judge: "m", Approved: true},
		{AC: "f--c", Judge: "m", Dimension: "typography"},
		{AC: "f--d", Judge: "m", Dimension: "typography"},
		{AC: "f--e", Judge: "m", Dimension: "spacing"},
		{AC: "f--f", Judge: "m", Dimension: "motion"},
	}
	got := SpotCheckAgreement(checks, []string{"visual_fidelity", "typography", "spacing"}, stats.Z95)
	// By hand: 6 checks, 2 approved; typography named twice (4/6 agree), spacing once
	// (5/6), visual_fidelity never (6/6); motion is not a listed dimension and comes last.
	want := SpotChecks{Checks: 6, Approved: stats.Wilson95(2, 6), Dimensions: []DimensionAgreement{
		{"visual_fidelity", stats.Wilson95(6, 6)}, {"typography", stats.Wilson95(4, 6)},
		{"spacing", stats.Wilson95(5, 6)}, {"motion", stats.Wilson95(5, 6)},
	}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}

func TestUsage(t *testing.T) {
	calls := []Call{
		{Judge: "m", Status: StatusOK, PromptTokens: 100, CompletionTokens: 10, LatencyMillis: 400},
		{Judge: "m", Status: StatusOK, PromptTokens: 120, CompletionTokens: 12, LatencyMillis: 200},
		{Judge: "m", Status: "unavailable", LatencyMillis: 3000},
		{Judge: "m", Status: StatusOK, PromptTokens: 90, CompletionTokens: 9, LatencyMillis: 300},
		{Judge: "m", Status: StatusOK, PromptTokens: 100, CompletionTokens: 10, LatencyMillis: 400, Cached: true},
	}
	u := UsageOf(calls)
	// By hand: latencies 200, 300, 400, 3000; p50 = 350; p95: h = 3·0.95 = 2.85, so
	// 400 + 0.85·2600 = 2610 (Python: statistics.quantiles([200,300,400,3000], n=20,
	// method="inclusive")[-1] = 2610.0).
	want := Usage{Calls: 5, ProviderCalls: 4, CacheHits: 1, Failed: 1, CacheHitRate: 0.2,
		PromptTokens: 310, CompletionTokens: 31, LatencyP50: 350, LatencyP95: 2610}
	if math.Abs(u.LatencyP95-want.LatencyP95) > 1e-9 {
		t.Errorf("p95 %v", u.LatencyP95)
	}
	u.LatencyP95 = want.LatencyP95
	if u != want {
		t.Errorf("usage %+v\nwant  %+v", u, want)
	}
	if u := UsageOf(nil); u != (Usage{}) {
		t.Errorf("no calls: %+v", u)
	}
}

func TestBuildReport(t *testing.T) {
	in := Input{Seed: 11, Resamples: 200, Dimensions: []string{"typography"}}
	for i := range 20 {
		oursInA := i%2 == 0
		in.Outcomes = append(in.Outcomes, Outcome{AC: ac(i), Winner: WinnerOurs})
		for _, judge := range []string{"openai/b", "openai/a"} {
			j := call(judge, ac(i), OrderShown, pickFor(WinnerOurs, oursInA), oursInA)
			in.Judgments = append(in.Judgments, j)
			in.Calls = append(in.Calls, Call{Judge: judge, Status: StatusOK, PromptTokens: 10, LatencyMillis: 100})
		}
	}
	in.Calls = append(in.Calls, Call{Judge: "critic/x", Status: StatusOK, PromptTokens: 5})
	in.SpotChecks = []SpotCheck{{AC: "f", Judge: "openai/a", Approved: true}, {AC: "g", Judge: "openai/b", Dimension: "typography"}}
	r, err := BuildReport(in)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range r.Judges {
		names = append(names, j.Judge)
	}
	if !slices.Equal(names, []string{"critic/x", "openai/a", "openai/b"}) {
		t.Fatalf("judges %v", names)
	}
	a := r.Judges[1]
	if a.Outcomes == nil || a.Outcomes.Ours.K != 20 || a.Usage.ProviderCalls != 20 || a.PositionBias.SlotA.N != 20 || a.PositionBias.Biased {
		t.Errorf("judge a: %+v", a)
	}
	if r.Judges[0].Outcomes != nil || r.Judges[0].Usage.PromptTokens != 5 {
		t.Errorf("critic judge: %+v", r.Judges[0])
	}
	if r.Overall.Usage.Calls != 41 || r.Overall.PositionBias.SlotA.N != 40 || r.Outcomes.Ours.K != 20 {
		t.Errorf("overall %+v", r.Overall)
	}
	if r.Panel == nil || r.Panel.Alpha != nil || r.Panel.Pairs[0].K != 20 {
		t.Errorf("panel %+v", r.Panel)
	}
	if r.SpotChecks == nil || r.SpotChecks.Checks != 2 || r.SpotChecksByJudge["openai/b"].Dimensions[0].K != 0 {
		t.Errorf("spot checks %+v %+v", r.SpotChecks, r.SpotChecksByJudge)
	}
	if r.Level != 0.95 || r.Seed != 11 || r.Resamples != 200 {
		t.Errorf("parameters %v %v %v", r.Level, r.Seed, r.Resamples)
	}
	data, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(data), `"slot_a":{"k":10,"n":20`) {
		t.Errorf("json %s %v", data, err)
	}
	again, _ := BuildReport(in)
	if d2, _ := json.Marshal(again); string(d2) != string(data) {
		t.Error("report not reproducible")
	}
	if _, err := BuildReport(Input{Level: 1.2}); err == nil {
		t.Error("level 1.2 accepted")
	}
}
