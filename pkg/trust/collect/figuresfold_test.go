package collect_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/stats"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
	"github.com/tribunal-dev/tribunal/pkg/trust"
	"github.com/tribunal-dev/tribunal/pkg/trust/collect"
)

// randomJob is one AC's judge calls as a pairwise job records them: some of the panel's
// judges (sometimes one only), each with one or more trials, each trial in one order or
// both, some calls failed or answered outside the slots.
func randomJob(rng *rand.Rand, ac string, panel []string) []trust.Judgment {
	var js []trust.Judgment
	raws := []string{"A", "B", "tie", "a", "b", "TIE", "C", ""}
	winners := []trust.Winner{trust.WinnerOurs, trust.WinnerReference, trust.WinnerTie}
	trials := 1 + rng.IntN(3)
	if rng.IntN(3) > 0 {
		trials = 1
	}
	for _, judge := range panel {
		if rng.IntN(4) == 0 {
			continue // this judge was not asked, or the AC has one judge only
		}
		swapped := rng.IntN(2) == 0
		for trial := range trials {
			orders := []string{""}
			if swapped {
				orders = []string{trust.OrderShown, trust.OrderSwapped}
				if rng.IntN(2) == 0 {
					orders = []string{trust.OrderSwapped, trust.OrderShown}
				}
				if rng.IntN(8) == 0 {
					orders = orders[:1] // the other call never recorded
				}
			}
			for _, order := range orders {
				j := trust.Judgment{AC: ac, Judge: judge, Order: order, Status: trust.StatusOK, Trial: trial,
					RawWinner: raws[rng.IntN(len(raws))], Winner: winners[rng.IntN(len(winners))]}
				if rng.IntN(10) == 0 {
					j.Status, j.Winner = "unavailable", "" // blocked: no answer
				}
				js = append(js, j)
			}
		}
	}
	rng.Shuffle(len(js), func(a, b int) { js[a], js[b] = js[b], js[a] })
	return js
}

// TestFiguresFoldMatchesFiguresOf: the fold fed one job at a time, in any job order,
// gives the figures the whole-slice computation gave (figuresOfReference, FiguresOf as
// it was): every count exactly, alpha bit for bit, on randomized batches of one to six
// judges, both orders, trials, blocked calls and ACs answered by one judge only.
func TestFiguresFoldMatchesFiguresOf(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(29, 5))
	var alphas, panels int
	for run := range 400 {
		var panel []string
		for i := range 1 + rng.IntN(6) {
			panel = append(panel, fmt.Sprintf("%s/m%d", []string{"openai", "anthropic"}[i%2], i))
		}
		var jobs [][]trust.Judgment
		var all []trust.Judgment
		for i := range rng.IntN(120) {
			js := randomJob(rng, fmt.Sprintf("AC-%d", i), panel)
			jobs = append(jobs, js)
			all = append(all, js...)
		}
		want, err := figuresOfReference(all)
		if err != nil {
			t.Fatal(err)
		}
		var fold, shuffled collect.FiguresFold
		for _, js := range jobs {
			fold.Add(js)
		}
		for _, i := range rng.Perm(len(jobs)) {
			shuffled.Add(jobs[i])
		}
		for name, f := range map[string]*collect.FiguresFold{"in order": &fold, "shuffled": &shuffled} {
			got, err := f.Figures()
			if err != nil {
				t.Fatal(err)
			}
			if f.Calls() != len(all) {
				t.Errorf("run %d %s: %d calls, %d added", run, name, f.Calls(), len(all))
			}
			if !reflect.DeepEqual(got.Judges, want.Judges) || !reflect.DeepEqual(got.Flips, want.Flips) {
				t.Fatalf("run %d %s (%d judges, %d jobs):\n%+v %+v\nwant\n%+v %+v", run, name, len(panel), len(jobs), got.Judges, got.Flips, want.Judges, want.Flips)
			}
			if (got.Alpha == nil) != (want.Alpha == nil) || got.Alpha != nil && math.Float64bits(*got.Alpha) != math.Float64bits(*want.Alpha) {
				t.Fatalf("run %d %s: alpha %v, want %v", run, name, deref(got.Alpha), deref(want.Alpha))
			}
		}
		if len(want.Judges) > 1 {
			panels++
		}
		if want.Alpha != nil {
			alphas++
		}
	}
	if panels < 100 || alphas < 100 {
		t.Errorf("only %d batches with a panel, %d with an alpha: the test covers too little", panels, alphas)
	}
	if got, err := (&collect.FiguresFold{}).Figures(); err != nil || got.Judges != nil || got.Alpha != nil || len(got.Flips) != 0 {
		t.Errorf("nothing added: %+v %v", got, err)
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// figuresOfReference is FiguresOf as it was before FiguresFold, over the whole batch's
// judgments at once: the definition the fold is held to.
func figuresOfReference(js []trust.Judgment) (collect.Figures, error) {
	f := collect.Figures{Flips: map[string]collect.FlipCount{}}
	agreed, compared := map[string]int{}, map[string]int{}
	groups := trust.ByJudge(js)
	if len(groups) > 1 {
		p, err := trust.Panel(js, stats.Z95)
		if err != nil {
			return collect.Figures{}, err
		}
		if p.Alpha != nil {
			a := p.Alpha.Alpha
			f.Alpha = &a
		}
		for _, pr := range p.Pairs {
			for _, j := range []string{pr.A, pr.B} {
				agreed[j] += pr.K
				compared[j] += pr.N
			}
		}
	}
	for _, g := range groups {
		b := trust.PositionBiasOf(g.Items, stats.Z95)
		fl := trust.FlipsOf(g.Items, stats.Z95)
		provider, model, _ := strings.Cut(g.Judge, "/")
		f.Judges = append(f.Judges, telemetry.JudgeFigures{Provider: provider, Model: model,
			SlotA: b.SlotA.K, Decided: b.SlotA.N, Flips: fl.Rate.K, Pairs: fl.Pairs,
			Agreed: agreed[g.Judge], Compared: compared[g.Judge]})
		f.Flips[g.Judge] = collect.FlipCount{Pairs: fl.Pairs, Flips: fl.Rate.K}
	}
	return f, nil
}

// syntheticJob is an AC of a three-judge swapped panel, the answers varying with i so
// every count moves: what the aggregator's completion adds a job at a time.
func syntheticJob(i int) []trust.Judgment {
	ac := fmt.Sprintf("AC-%07d", i)
	var js []trust.Judgment
	for n, judge := range []string{"openai/a", "openai/b", "anthropic/c"} {
		for o, order := range []string{trust.OrderShown, trust.OrderSwapped} {
			raw := []string{"A", "B", "tie"}[(i+n+o)%3]
			w := []trust.Winner{trust.WinnerOurs, trust.WinnerReference, trust.WinnerTie}[(i*7+n)%3]
			js = append(js, trust.Judgment{AC: ac, Judge: judge, Order: order, Status: trust.StatusOK, RawWinner: raw, Winner: w})
		}
	}
	return js
}

// maxFoldGrowth bounds what the fold's live heap may grow from 20,000 jobs to 200,000:
// it holds counts per judge, judge pair and coincidence cell, none per AC. The
// judgments it replaced (a slice of every call, then ByJudge's copy of it) held 256 bytes
// a call (a trust.Judgment is 128): over 270 MB for these 1,080,000 calls.
const maxFoldGrowth = 64 << 10

// TestFiguresFoldMemory: the fold's retained heap does not grow with the jobs fed it.
// 200,000 synthetic jobs (six calls each, every AC id new) are built and added one at a
// time; the live heap after 200,000 is within maxFoldGrowth of that after 20,000, and
// the figures still count every job.
func TestFiguresFoldMemory(t *testing.T) {
	const small, large = 20000, 200000
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	var fold collect.FiguresFold
	var at [2]uint64
	for i := range large {
		fold.Add(syntheticJob(i))
		switch i + 1 {
		case small:
			at[0] = heap()
		case large:
			at[1] = heap()
		}
	}
	grown := int64(at[1]) - int64(at[0])
	t.Logf("live heap %.2f MB after %d jobs, %.2f MB after %d: %+d bytes", float64(at[0])/1e6, small, float64(at[1])/1e6, large, grown)
	if grown > maxFoldGrowth {
		t.Errorf("the fold grew %d bytes from %d jobs to %d, over %d: it keeps something per job", grown, small, large, maxFoldGrowth)
	}
	f, err := fold.Figures()
	if err != nil {
		t.Fatal(err)
	}
	if fold.Calls() != 6*large || len(f.Judges) != 3 || f.Alpha == nil {
		t.Fatalf("after %d jobs: %d calls, %+v", large, fold.Calls(), f)
	}
	for _, j := range f.Judges {
		if j.Pairs != large || j.Decided == 0 || j.Compared != 2*large {
			t.Errorf("judge %s/%s after %d jobs: %+v", j.Provider, j.Model, large, j)
		}
	}
}

// BenchmarkFiguresFold: the judge figures of 20,000 synthetic jobs (six calls each),
// folded a job at a time as the completion does, against the whole-slice computation it
// replaced (the slice appended job by job, then figuresOfReference).
func BenchmarkFiguresFold(b *testing.B) {
	const n = 20000
	jobs := make([][]trust.Judgment, n)
	for i := range jobs {
		jobs[i] = syntheticJob(i)
	}
	b.Run("fold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var f collect.FiguresFold
			for _, js := range jobs {
				f.Add(js)
			}
			if _, err := f.Figures(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/job")
	})
	b.Run("slice", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var all []trust.Judgment
			for _, js := range jobs {
				all = append(all, js...)
			}
			if _, err := figuresOfReference(all); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/job")
	})
}
