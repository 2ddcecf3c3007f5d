package commands

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
)

// TestSpotcheckAnswer: the HE-2 prompt's answer is y/yes or a dimension of the view's
// rubric (the seed's human "names the dimension the judge got wrong"); "reject", a typo
// or a blank line is asked again, never recorded as a dimension.
func TestSpotcheckAnswer(t *testing.T) {
	t.Parallel()
	r := argus.DefaultRubric()
	for _, tc := range []struct {
		in       string
		approved bool
		dim      string
		ok       bool
	}{
		{"y\n", true, "", true}, {"YES", true, "", true}, {" typography \n", false, "typography", true},
		{"reject\n", false, "", false}, {"n", false, "", false}, {"Typography", false, "", false}, {"", false, "", false},
	} {
		a, d, err := SpotcheckAnswer(r, tc.in)
		if (err == nil) != tc.ok || a != tc.approved || d != tc.dim {
			t.Errorf("SpotcheckAnswer(%q) = %v %q %v", tc.in, a, d, err)
		}
		if err != nil && !strings.Contains(err.Error(), "visual_fidelity") {
			t.Errorf("%q: the error does not list the dimensions: %v", tc.in, err)
		}
	}
}

// TestAskSpotcheck: the terminal's HE-2 prompt asks again until the answer is y or one of
// the rubric's dimensions, so "reject" is never recorded as a dimension.
func TestAskSpotcheck(t *testing.T) {
	for _, tc := range []struct {
		in           string
		approved, ok bool
		dim          string
		reasks       int
	}{
		{"y\n", true, true, "", 0},
		{"reject\ntypograpy\n\ntypography\n", false, true, "typography", 2},
		{"reject\n", false, false, "", 1},
		{"", false, false, "", 0},
		{"hierarchy", false, true, "hierarchy", 0},
	} {
		var out bytes.Buffer
		a, d, ok := askSpotcheck(bufio.NewReader(strings.NewReader(tc.in)), &out, argus.DefaultRubric())
		if a != tc.approved || d != tc.dim || ok != tc.ok || strings.Count(out.String(), "spot-check: ") != tc.reasks {
			t.Errorf("%q: %v %q %v after %q", tc.in, a, d, ok, out.String())
		}
	}
}
