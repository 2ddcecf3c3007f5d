package ab

import (
	"fmt"
	"testing"
)

func TestCombineSwap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		first, second  RawVerdict
		a              Assignment
		want           Winner
		wantConf       float64
		wantConsistent bool
	}{
		// Under oursFirst, A is ours in the first call and B is ours in the second.
		{"ours both times", verdict("A", 0.9, "g"), verdict("B", 0.7, "g"), oursFirst, WinnerOurs, 0.7, true},
		{"reference both times", verdict("B", 0.6, "g"), verdict("A", 0.8, "g"), oursFirst, WinnerReference, 0.6, true},
		{"reference both times, other assignment", verdict("A", 0.8, "g"), verdict("B", 0.95, "g"), refFirst, WinnerReference, 0.8, true},
		{"tie both times", verdict("tie", 0.5, "g"), verdict("tie", 0.9, "g"), oursFirst, WinnerTie, 0.5, true},
		{"slot A both times is position bias", verdict("A", 0.9, "g"), verdict("A", 0.9, "g"), oursFirst, WinnerTie, 0, false},
		{"slot B both times is position bias", verdict("B", 0.7, "g"), verdict("B", 0.95, "g"), refFirst, WinnerTie, 0, false},
		{"win then tie", verdict("A", 0.9, "g"), verdict("tie", 0.4, "g"), oursFirst, WinnerTie, 0, false},
		{"tie then win", verdict("tie", 0.4, "g"), verdict("A", 0.9, "g"), oursFirst, WinnerTie, 0, false},
		{"invalid first", verdict("C", 0.9, "g"), verdict("B", 0.9, "g"), oursFirst, WinnerTie, 0, false},
		{"both invalid", verdict("C", 0.9, "g"), verdict("C", 0.9, "g"), oursFirst, WinnerTie, 0, false},
		{"invalid assignment", verdict("A", 0.9, "g"), verdict("B", 0.9, "g"), Assignment{}, WinnerTie, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, c, ok := CombineSwap(tc.first, tc.second, tc.a)
			if w != tc.want || c != tc.wantConf || ok != tc.wantConsistent {
				t.Errorf("CombineSwap = %s, %v, %v; want %s, %v, %v", w, c, ok, tc.want, tc.wantConf, tc.wantConsistent)
			}
		})
	}
}

// A consistent pair's result is the same whichever call came first.
func TestCombineSwapSymmetric(t *testing.T) {
	t.Parallel()
	raws := []string{"A", "B", "tie"}
	for _, a := range []Assignment{oursFirst, refFirst} {
		for _, r1 := range raws {
			for _, r2 := range raws {
				v1, v2 := verdict(r1, 0.6, "g"), verdict(r2, 0.8, "g")
				w1, c1, ok1 := CombineSwap(v1, v2, a)
				w2, c2, ok2 := CombineSwap(v2, v1, a.Swapped())
				if w1 != w2 || c1 != c2 || ok1 != ok2 {
					t.Errorf("%v %s/%s: %s %v %v vs swapped %s %v %v", a, r1, r2, w1, c1, ok1, w2, c2, ok2)
				}
			}
		}
	}
}

func TestPanel(t *testing.T) {
	t.Parallel()
	v := func(w Winner, c float64) Vote { return Vote{Judge: "j", Winner: w, Confidence: c} }
	tests := []struct {
		name      string
		votes     []Vote
		want      Winner
		agreement string
		conf      float64
	}{
		{"unanimous", []Vote{v(WinnerOurs, 0.9), v(WinnerOurs, 0.8), v(WinnerOurs, 0.7)}, WinnerOurs, "3/3", 0.8},
		{"two of three", []Vote{v(WinnerReference, 0.9), v(WinnerOurs, 0.2), v(WinnerReference, 0.7)}, WinnerReference, "2/3", 0.8},
		{"two of three tie", []Vote{v(WinnerTie, 0.5), v(WinnerOurs, 0.9), v(WinnerTie, 0.7)}, WinnerTie, "2/3", 0.6},
		{"three-way split ends in tie", []Vote{v(WinnerOurs, 0.9), v(WinnerReference, 0.8), v(WinnerTie, 0.3)}, WinnerTie, "1/3", 0.3},
		{"no majority, no tie vote", []Vote{v(WinnerOurs, 0.9), v(WinnerReference, 0.8)}, WinnerTie, "0/2", 0},
		{"plurality is not majority", []Vote{v(WinnerOurs, 0.9), v(WinnerOurs, 0.9), v(WinnerReference, 0.8), v(WinnerTie, 0.6)}, WinnerTie, "1/4", 0.6},
		{"three of four", []Vote{v(WinnerOurs, 1), v(WinnerOurs, 0.5), v(WinnerReference, 0.8), v(WinnerOurs, 0.6)}, WinnerOurs, "3/4", 0.7},
		{"single vote", []Vote{v(WinnerReference, 0.95)}, WinnerReference, "1/1", 0.95},
		{"empty panel", nil, WinnerTie, "0/0", 0},
		{"invalid votes never win", []Vote{v("", 0.9), v("", 0.9), v(WinnerOurs, 0.9)}, WinnerTie, "0/3", 0},
		{"invalid votes count in size", []Vote{v(WinnerOurs, 0.8), v(WinnerOurs, 0.6), v("A", 0.9)}, WinnerOurs, "2/3", 0.7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Panel(tc.votes)
			if got.Winner != tc.want || got.Agreement != tc.agreement || !near(got.Confidence, tc.conf) {
				t.Errorf("Panel = %s %s %v; want %s %s %v", got.Winner, got.Agreement, got.Confidence, tc.want, tc.agreement, tc.conf)
			}
			if want := fmt.Sprintf("%d/%d", got.For, got.Size); want != got.Agreement || got.Size != len(tc.votes) || len(got.Votes) != len(tc.votes) || got.Votes == nil {
				t.Errorf("Panel bookkeeping = %+v", got)
			}
		})
	}
}

// The mean must not depend on the order votes arrived in.
func TestPanelOrderIndependent(t *testing.T) {
	t.Parallel()
	cs := []float64{0.1, 0.7, 0.2, 0.3, 0.9, 0.33, 0.61}
	var votes []Vote
	for _, c := range cs {
		votes = append(votes, Vote{Winner: WinnerOurs, Confidence: c})
	}
	want := Panel(votes).Confidence
	for i := 0; i < len(votes); i++ {
		rot := append(append([]Vote{}, votes[i:]...), votes[:i]...)
		for l, r := 0, len(rot)-1; l < r; l, r = l+1, r-1 {
			if i%2 == 1 {
				rot[l], rot[r] = rot[r], rot[l]
			}
		}
		if got := Panel(rot).Confidence; got != want {
			t.Errorf("rotation %d: %v != %v", i, got, want)
		}
	}
}

func near(a, b float64) bool {
	d := a - b
	return d < 1e-12 && d > -1e-12
}
