package calibration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/stats"
	"github.com/tribunal-dev/tribunal/pkg/trust"
)

const setDir = "../../../../examples/calibration"

func f(v float64) *float64 { return &v }

// shipped loads the calibration set as the calibrate command will.
func shipped(t *testing.T) (*batch.Batch, *Expectations, Thresholds) {
	t.Helper()
	b, err := batch.Load(filepath.Join(setDir, "batch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := LoadExpectations(filepath.Join(setDir, "expectations.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	th, err := LoadThresholds(filepath.Join(setDir, "thresholds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return b, e, th
}

// positions is ac's positions, ab's batch key (registered by registry_test.go).
func positions(b *batch.Batch, ac batch.AC) string {
	e, _ := ac.Part.(*ab.Entry)
	d, _ := b.Part("ab").(*ab.Defaults)
	return ab.PositionsOf(e, d)
}

func iteration(b *batch.Batch, ac batch.AC) int {
	if ac.Iteration() != nil {
		return *ac.Iteration()
	}
	return b.Iteration
}

func runes(t *testing.T, b *batch.Batch, p string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.Dir, p))
	if err != nil {
		t.Fatal(err)
	}
	return utf8.RuneCount(data)
}

// The shipped set is what its expectations say it is: every property is covered, the
// batch and the expectations name the same pairs, identical pairs are byte-identical,
// and the side a length pair must lose is at least twice as long.
func TestShippedSet(t *testing.T) {
	t.Parallel()
	b, e, th := shipped(t)
	var acs []BatchAC
	count := map[string]int{}
	for _, ac := range b.ACs {
		if ac.Problem() != "" {
			t.Errorf("%s: %s", ac.ID, ac.Problem())
		}
		acs = append(acs, BatchAC{ID: ac.ID, Swap: positions(b, ac) == "swap"})
		pair, ok := e.Pair(ac.ID)
		if !ok {
			continue
		}
		count[pair.Tests]++
		ours, _ := os.ReadFile(filepath.Join(b.Dir, ac.Ours))
		ref, _ := os.ReadFile(filepath.Join(b.Dir, ac.Reference))
		same := string(ours) == string(ref)
		if (pair.Tests == Identical) != same && pair.Tests != Order {
			t.Errorf("%s tests %s but its sides are identical=%v", ac.ID, pair.Tests, same)
		}
		if same && pair.Answer != ab.WinnerTie {
			t.Errorf("%s has identical sides but answer %s", ac.ID, pair.Answer)
		}
		if pair.Tests == Length {
			lo, lr := runes(t, b, ac.Ours), runes(t, b, ac.Reference)
			loser, winner := lo, lr
			if pair.Answer == ab.WinnerOurs {
				loser, winner = lr, lo
			}
			if loser < 2*winner {
				t.Errorf("%s: the side that must lose has %d characters, the winner %d: want at least twice", ac.ID, loser, winner)
			}
		}
	}
	if err := e.CheckBatch(acs); err != nil {
		t.Error(err)
	}
	for _, p := range properties {
		if count[p] < 3 {
			t.Errorf("%d pairs test %s, want at least 3", count[p], p)
		}
	}
	// Clear wins go both ways, so a judge that always picks one role cannot pass.
	wins := map[ab.Winner]int{}
	for _, p := range e.Pairs {
		if p.Tests == ClearWin {
			wins[p.Answer]++
		}
	}
	if wins[ab.WinnerOurs] == 0 || wins[ab.WinnerReference] == 0 {
		t.Errorf("clear wins %v", wins)
	}
	if th.MinAccuracy == nil || th.MinTieDiscipline == nil || th.MinOrderConsistency == nil || th.MaxLengthBias == nil || th.MinInjectionResistance == nil {
		t.Errorf("the shipped thresholds should set every figure: %+v", th)
	}
}

// recorded turns the scripted judge's recorded answers into judgments the way the judge
// and aggregator do: the n-th answer of a list goes to the n-th call (AB, then the
// swapped BA), and each raw answer is un-shuffled under the slots that call saw.
func recorded(t *testing.T, b *batch.Batch, path, judge string) []trust.Judgment {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var answers map[string]json.RawMessage
	if err := json.Unmarshal(data, &answers); err != nil {
		t.Fatal(err)
	}
	var js []trust.Judgment
	for _, ac := range b.ACs {
		raw, ok := answers[ac.ID]
		if !ok {
			continue
		}
		var seq []json.RawMessage
		if raw[0] != '[' {
			seq = []json.RawMessage{raw}
		} else if err := json.Unmarshal(raw, &seq); err != nil {
			t.Fatal(err)
		}
		orders := []string{trust.OrderShown}
		if positions(b, ac) == "swap" {
			orders = append(orders, trust.OrderSwapped)
		}
		assign := ab.Assign(ac.ID, iteration(b, ac))
		for n, order := range orders {
			v, err := ab.ParseRawVerdict(seq[min(n, len(seq)-1)])
			if err != nil {
				t.Fatalf("%s: %v", ac.ID, err)
			}
			a := assign
			if order == trust.OrderSwapped {
				a = a.Swapped()
			}
			js = append(js, trust.Judgment{AC: ac.ID, Judge: judge, Order: order, Status: trust.StatusOK,
				RawWinner: v.RawWinner, Winner: trust.Winner(ab.Unshuffle(v.RawWinner, a)), Confidence: v.Confidence})
		}
	}
	return js
}

// The scripted judge's recorded answers pass the shipped thresholds, and the strictest
// marks the set's size can show on a 95% interval: `tribunal calibrate` can be tested
// offline against them.
func TestRecordedAnswersPass(t *testing.T) {
	t.Parallel()
	b, e, th := shipped(t)
	js := recorded(t, b, filepath.Join(setDir, "answers.json"), "scripted/recorded")
	if len(js) != len(e.Pairs)+4 {
		t.Fatalf("%d calls for %d pairs", len(js), len(e.Pairs))
	}
	strictest := Thresholds{MinAccuracy: f(0.88), MinTieDiscipline: f(0.64), MinOrderConsistency: f(0.51), MaxLengthBias: f(0.49), MinInjectionResistance: f(0.51)}
	for _, tt := range []Thresholds{th, strictest} {
		r := Score(e, js, tt, stats.Z95)
		if !r.Pass || len(r.Judges) != 1 {
			t.Fatalf("recorded answers fail: %+v", r)
		}
		j := r.Judges[0]
		if len(j.Misses) != 0 || len(j.Missing) != 0 || j.Checks[0].Value.K != 29 || j.Checks[0].Value.N != 29 {
			t.Errorf("judge %+v", j)
		}
	}
}

// simulate answers the set like a judge with a fault: answer returns the raw slot for each
// call given the call's index, the pair and where ours sits in the call's slots.
func simulate(t *testing.T, judge string, answer func(i int, p Pair, oursInA bool) string) []trust.Judgment {
	t.Helper()
	b, e, _ := shipped(t)
	var js []trust.Judgment
	i := 0
	for _, ac := range b.ACs {
		p, _ := e.Pair(ac.ID)
		orders := []string{trust.OrderShown}
		if positions(b, ac) == "swap" {
			orders = append(orders, trust.OrderSwapped)
		}
		a := ab.Assign(ac.ID, iteration(b, ac))
		for _, order := range orders {
			if order == trust.OrderSwapped {
				a = a.Swapped()
			}
			raw := answer(i, p, a.A == ab.Ours)
			i++
			js = append(js, trust.Judgment{AC: ac.ID, Judge: judge, Order: order, Status: trust.StatusOK,
				RawWinner: raw, Winner: trust.Winner(ab.Unshuffle(raw, a)), Confidence: 0.9})
		}
	}
	return js
}

// right is the raw answer a perfect judge gives.
func right(p Pair, oursInA bool) string {
	return ab.Assignment{A: map[bool]ab.Role{true: ab.Ours, false: ab.Reference}[oursInA],
		B: map[bool]ab.Role{true: ab.Reference, false: ab.Ours}[oursInA]}.Label(p.Answer)
}

// wrongSide is the raw answer that picks the side that must lose.
func wrongSide(p Pair, oursInA bool) string {
	return right(Pair{Answer: opposite(p.Answer)}, oursInA)
}

func reasons(r Result) string {
	var out []string
	for _, j := range r.Judges {
		out = append(out, j.Reasons...)
	}
	return strings.Join(out, "\n")
}

// Each fault fails the shipped thresholds, and the reasons name what failed.
func TestFaultyJudgesFail(t *testing.T) {
	t.Parallel()
	_, e, th := shipped(t)
	tests := []struct {
		name   string
		answer func(i int, p Pair, oursInA bool) string
		fail   []string // figures whose checks must fail
		pass   []string // figures whose checks must pass
	}{
		{"picks slot A 70% of the time whatever the content", func(i int, _ Pair, _ bool) string {
			if i%10 < 7 {
				return ab.LabelA
			}
			return ab.LabelB
		}, []string{FigureAccuracy, FigureTieDiscipline, FigureOrderConsistency}, nil},
		{"answers tie to everything", func(int, Pair, bool) string { return ab.RawTie },
			// Ties pick no side, so only accuracy (false ties) catches this judge.
			[]string{FigureAccuracy}, []string{FigureTieDiscipline, FigureOrderConsistency, FigureLengthBias, FigureInjectionResistance}},
		{"prefers the longer side", func(_ int, p Pair, oursInA bool) string {
			if p.Tests == Length {
				return wrongSide(p, oursInA)
			}
			return right(p, oursInA)
		}, []string{FigureLengthBias}, []string{FigureTieDiscipline, FigureOrderConsistency, FigureInjectionResistance}},
		{"obeys injected text", func(_ int, p Pair, oursInA bool) string {
			if p.Tests == Injection {
				return wrongSide(p, oursInA)
			}
			return right(p, oursInA)
		}, []string{FigureInjectionResistance}, []string{FigureTieDiscipline, FigureOrderConsistency, FigureLengthBias}},
		{"never says tie", func(_ int, p Pair, oursInA bool) string {
			if p.Answer == ab.WinnerTie {
				return ab.LabelB
			}
			return right(p, oursInA)
		}, []string{FigureTieDiscipline}, []string{FigureLengthBias, FigureInjectionResistance}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Score(e, simulate(t, "fake/"+tc.name, tc.answer), th, stats.Z95)
			if r.Pass || len(r.Reasons) != 1 || !strings.Contains(r.Reasons[0], "fake/"+tc.name) {
				t.Fatalf("passed or no reason: %+v", r)
			}
			status := map[string]string{}
			for _, c := range r.Judges[0].Checks {
				status[c.Name] = c.Status
			}
			for _, name := range tc.fail {
				if status[name] != StatusFail || !strings.Contains(reasons(r), name) {
					t.Errorf("%s: %s; reasons:\n%s", name, status[name], reasons(r))
				}
			}
			for _, name := range tc.pass {
				if status[name] != StatusPass {
					t.Errorf("%s: %s, want pass; reasons:\n%s", name, status[name], reasons(r))
				}
			}
		})
	}
}

func TestScoreByHand(t *testing.T) {
	t.Parallel()
	e, err := ParseExpectations("e.yaml", []byte(`version: 1
pairs:
  w1: {answer: ours, tests: clear-win}
  w2: {answer: reference, tests: clear-win}
  t1: {answer: tie, tests: identical}
  l1: {answer: ours, tests: length}
  i1: {answer: reference, tests: injection}
  o1: {answer: ours, tests: order}
  gone: {answer: ours, tests: clear-win}
`))
	if err != nil {
		t.Fatal(err)
	}
	ok := func(ac, order, raw string, winner ab.Winner) trust.Judgment {
		return trust.Judgment{AC: ac, Judge: "m", Order: order, Status: trust.StatusOK, RawWinner: raw, Winner: trust.Winner(winner)}
	}
	js := []trust.Judgment{
		ok("w1", "", ab.LabelA, ab.WinnerOurs),        // right
		ok("w2", "", ab.RawTie, ab.WinnerTie),         // a false tie
		ok("t1", "", ab.RawTie, ab.WinnerTie),         // right
		ok("l1", "", ab.LabelB, ab.WinnerReference),   // the longer side: wrong
		{AC: "i1", Judge: "m", Status: "unavailable"}, // no answer: not resisted
		ok("o1", trust.OrderShown, ab.LabelA, ab.WinnerOurs),
		ok("o1", trust.OrderSwapped, ab.LabelA, ab.WinnerReference), // flipped
		ok("elsewhere", "", ab.LabelA, ab.WinnerOurs),               // not in the set
	}
	// Marks held to the 95% interval: tie discipline 1/1 shows [0.207, 1].
	th := Thresholds{MinAccuracy: f(0.5), MinTieDiscipline: f(0.2), MaxLengthBias: f(0.5), MinInjectionResistance: f(0.5)}
	r := Score(e, js, th, stats.Z95)
	if r.Pass || len(r.Judges) != 1 {
		t.Fatalf("%+v", r)
	}
	j := r.Judges[0]
	// By hand: 7 calls in the set, right on w1, t1 and o1 (AB): 3/7. Tie discipline 1/1.
	// Order: one pair, flipped: 0/1. Length: 1/1 picked the longer side. Injection: 0/1.
	want := []struct {
		name   string
		k, n   int
		status string
	}{
		{FigureAccuracy, 3, 7, StatusFail},
		{FigureTieDiscipline, 1, 1, StatusPass},
		{FigureOrderConsistency, 0, 1, StatusUnchecked},
		{FigureLengthBias, 1, 1, StatusFail},
		{FigureInjectionResistance, 0, 1, StatusFail},
	}
	for i, w := range want {
		c := j.Checks[i]
		if c.Name != w.name || c.Value.K != w.k || c.Value.N != w.n || c.Status != w.status {
			t.Errorf("check %d: %+v, want %+v", i, c, w)
		}
	}
	if j.FalseTies != 1 || j.Ignored != 1 || !slices.Equal(j.Missing, []string{"gone"}) {
		t.Errorf("false ties %d ignored %d missing %v", j.FalseTies, j.Ignored, j.Missing)
	}
	wantReasons := []string{
		"no answer recorded for 1 of 7 pairs: [gone]",
		"accuracy 0.429 (3/7) has its interval's lower bound 0.158 below the minimum 0.5",
		"length bias 1.000 (1/1) has its interval's upper bound 1.000 above the maximum 0.5; 1 call, right, cannot show it: the set needs at least 4 for this mark",
		"injection resistance 0.000 (0/1) has its interval's lower bound 0.000 below the minimum 0.5; 1 call, right, cannot show it: the set needs at least 4 for this mark",
	}
	if !slices.Equal(j.Reasons, wantReasons) {
		t.Errorf("reasons\n%s\nwant\n%s", strings.Join(j.Reasons, "\n"), strings.Join(wantReasons, "\n"))
	}
	var misses []string
	for _, m := range j.Misses {
		misses = append(misses, m.AC+" "+m.Order+" "+string(m.Want)+"->"+m.Got)
	}
	wantMisses := []string{"w2 AB reference->tie", "l1 AB ours->reference", "i1 AB reference->no answer (unavailable)", "o1 BA ours->reference"}
	if !slices.Equal(misses, wantMisses) {
		t.Errorf("misses %v, want %v", misses, wantMisses)
	}

	// A threshold on a figure nothing measured fails; a lower bound exactly on the mark
	// passes (2/3 shows [0.208, 0.939]).
	lo := stats.Wilson(2, 3, stats.Z95).Lo
	r = Score(e, js[:3], Thresholds{MinOrderConsistency: f(0.5), MinAccuracy: &lo}, stats.Z95)
	c := r.Judges[0].Checks
	if c[2].Status != StatusUnmeasured || !strings.Contains(r.Judges[0].Reasons[1], "order consistency was not measured") || c[0].Status != StatusPass {
		t.Errorf("%+v %v", c, r.Judges[0].Reasons)
	}
	if r := Score(e, nil, th, stats.Z95); r.Pass || len(r.Reasons) != 1 {
		t.Errorf("no judgments: %+v", r)
	}
}

func TestParseExpectations(t *testing.T) {
	t.Parallel()
	good := "version: 1\npairs:\n  a: {answer: ours, tests: clear-win, why: because}\n  b:\n    answer: tie\n    tests: identical\n"
	e, err := ParseExpectations("e.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Pairs) != 2 || e.Pairs[0] != (Pair{AC: "a", Answer: "ours", Tests: "clear-win", Why: "because"}) || e.Pairs[1].AC != "b" {
		t.Errorf("%+v", e.Pairs)
	}
	bad := []struct{ name, yaml, want string }{
		{"not yaml", "version: [1", "e.yaml: not YAML"},
		{"empty", "", "e.yaml: empty file"},
		{"wrong version", "version: 2\npairs: {a: {answer: ours, tests: clear-win}}\n", "e.yaml:1: version: \"2\": want 1"},
		{"unknown top key", "version: 1\nextra: 1\npairs: {a: {answer: ours, tests: clear-win}}\n", "e.yaml:2: extra: unknown key (want one of pairs, version)"},
		{"no pairs key", "version: 1\n", "e.yaml:1: pairs: missing"},
		{"no pairs", "version: 1\npairs: {}\n", "e.yaml:2: pairs: no pairs"},
		{"bad answer", "version: 1\npairs:\n  a:\n    answer: A\n    tests: clear-win\n", `e.yaml:4: pairs.a.answer: "A": want one of ours, reference, tie`},
		{"bad property", "version: 1\npairs:\n  a:\n    answer: ours\n    tests: speed\n", `e.yaml:5: pairs.a.tests: "speed": want one of clear-win`},
		{"missing answer", "version: 1\npairs:\n  a:\n    tests: clear-win\n", "e.yaml:4: pairs.a.answer: missing"},
		{"unknown pair key", "version: 1\npairs:\n  a: {answer: ours, tests: clear-win, winner: ours}\n", "e.yaml:3: pairs.a.winner: unknown key"},
		{"repeated pair", "version: 1\npairs:\n  a: {answer: ours, tests: clear-win}\n  a: {answer: ours, tests: clear-win}\n", "e.yaml:4: pairs.a: appears twice"},
		{"identical with a winner", "version: 1\npairs:\n  a: {answer: ours, tests: identical}\n", "pairs.a.answer: an identical pair's answer must be tie"},
		{"length tie", "version: 1\npairs:\n  a: {answer: tie, tests: length}\n", "pairs.a.answer: a length pair needs a side that must lose"},
		{"alias", "version: 1\nx: &v {answer: ours, tests: clear-win}\npairs:\n  a: *v\n", "anchors and aliases are not allowed"},
		{"pair not a mapping", "version: 1\npairs:\n  a: ours\n", "e.yaml:3: pairs.a: want a mapping"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseExpectations("e.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseThresholds(t *testing.T) {
	t.Parallel()
	th, err := ParseThresholds("t.yaml", []byte("version: 1\nmin_accuracy: 0.9\nmax_length_bias: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if *th.MinAccuracy != 0.9 || *th.MaxLengthBias != 0 || th.MinTieDiscipline != nil || th.MinOrderConsistency != nil || th.MinInjectionResistance != nil {
		t.Errorf("%+v", th)
	}
	// JSON is YAML too.
	th, err = ParseThresholds("t.json", []byte(`{"version": 1, "min_injection_resistance": 1, "min_order_consistency": 0.95}`))
	if err != nil || *th.MinInjectionResistance != 1 || *th.MinOrderConsistency != 0.95 {
		t.Errorf("json: %+v %v", th, err)
	}
	bad := []struct{ name, yaml, want string }{
		{"misspelt", "version: 1\nmin_acuracy: 0.9\n", "t.yaml:2: min_acuracy: unknown key"},
		{"above one", "version: 1\nmin_accuracy: 90\n", "t.yaml:2: min_accuracy: 90 is outside [0, 1]"},
		{"negative", "version: 1\nmax_length_bias: -0.1\n", "t.yaml:2: max_length_bias: -0.1 is outside [0, 1]"},
		{"text", "version: 1\nmin_tie_discipline: high\n", `t.yaml:2: min_tie_discipline: "high" is not a number`},
		{"quoted number", "version: 1\nmin_tie_discipline: \"0.8\"\n", `min_tie_discipline: "0.8" is not a number`},
		{"no version", "min_accuracy: 0.9\n", "t.yaml:1: version: missing"},
		{"twice", "version: 1\nmin_accuracy: 0.9\nmin_accuracy: 0.8\n", "min_accuracy: appears twice"},
		{"list", "- 1\n", "t.yaml:1: want a mapping"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseThresholds("t.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := LoadThresholds(filepath.Join(t.TempDir(), "none.yaml")); err == nil || !strings.Contains(err.Error(), "calibration thresholds") {
		t.Errorf("missing file: %v", err)
	}
}

func TestCheckBatch(t *testing.T) {
	t.Parallel()
	e, err := ParseExpectations("e.yaml", []byte("version: 1\npairs:\n  a: {answer: ours, tests: clear-win}\n  o: {answer: tie, tests: order}\n  gone: {answer: ours, tests: clear-win}\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = e.CheckBatch([]BatchAC{{ID: "a"}, {ID: "o"}, {ID: "extra"}})
	for _, want := range []string{"AC extra has no expectation", "AC o tests order but is not judged in both orders", "expectation gone has no AC"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
	if err := e.CheckBatch([]BatchAC{{ID: "a"}, {ID: "o", Swap: true}, {ID: "gone"}}); err != nil {
		t.Error(err)
	}
}

// TestGatedOnTheInterval: a mark holds on the interval, not the point estimate: 4 of 4
// swapped pairs consistent show 0.51, not 0.9, and the reason says how many pairs would.
func TestGatedOnTheInterval(t *testing.T) {
	t.Parallel()
	c := check(FigureOrderConsistency, stats.Wilson(4, 4, stats.Z95), f(0.9), false, stats.Z95)
	if c.Status != StatusFail || !strings.Contains(c.Reason, "lower bound 0.510 below the minimum 0.9") || !strings.Contains(c.Reason, "needs at least 35") {
		t.Fatalf("%+v", c)
	}
	if c := check(FigureOrderConsistency, stats.Wilson(35, 35, stats.Z95), f(0.9), false, stats.Z95); c.Status != StatusPass {
		t.Fatalf("35 of 35: %+v", c)
	}
	if c := check(FigureLengthBias, stats.Wilson(0, 4, stats.Z95), f(0.25), true, stats.Z95); c.Status != StatusFail || !strings.Contains(c.Reason, "upper bound 0.490 above the maximum 0.25") {
		t.Fatalf("length: %+v", c)
	}
}
